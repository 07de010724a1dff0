"""CPU C for the BLAS ops (dot, batched dot, GEMM/GEMV/GER) and the BLAS they call."""
