"""CPU C for reductions: the loop plan, the kernels' element loops, the drivers
in the support library, the lowering of CAReduce and of reductions fused with
their element-wise input."""
