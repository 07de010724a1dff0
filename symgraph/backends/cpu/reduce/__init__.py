"""CPU C for reductions: the loop plan, the serial and parallel kernels, the
lowering of CAReduce and of reductions fused with their element-wise input."""
