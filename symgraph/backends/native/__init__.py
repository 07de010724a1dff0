"""The backend-neutral native machinery: the kernel ABI (``kernel``), the content-addressed
compile cache and its keys, the linker that turns a schedule of kernels into one
program, and the loader of the native runtime."""
