"""The CUDA backend: CUDA kernels for device nodes, built by nvcc for a GPU or by the
host compiler for the emulated device (gpu.emulate), run through the runtime
with device memory behind its allocator interface."""
