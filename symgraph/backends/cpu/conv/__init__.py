"""CPU C for convolution: the kernel calling the algorithm library of
``c_src/conv/``, the library's build and load, and the algorithm choice (tuning)."""
