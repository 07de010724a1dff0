/* Kernel launches in generated CUDA, the same text for a GPU and for the
 * emulated device.
 *
 * SG_LAUNCH(kernel, grid, block, shared_bytes, args...) launches; then
 * SG_CUDA_CHECK(err, what) turns a failed launch into the kernel ABI's error
 * (sg_kernel.h).  nvcc compiles it to <<<...>>>; under gpu.emulate the file is
 * compiled by the host C++ compiler with sg_cuda_emu.h included first
 * (SG_CUDA_EMULATED), and a launch runs the kernel's blocks on the CPU.
 */
#ifndef SG_CUDA_LAUNCH_H
#define SG_CUDA_LAUNCH_H

/* float16 storage, float32 arithmetic: __half converts to and from float.  On
 * the emulated device it is GCC's _Float16 (the same rounding, to nearest even);
 * nvcc has its own (cuda_fp16.h).  SG_ROUND_F16 rounds a float to float16 and
 * back, as the CPU's kernels do after each float16 step. */
#ifdef SG_CUDA_EMULATED
struct __half {
    _Float16 v;
    __half() = default;
    __half(float f) : v((_Float16)f) {}
    operator float() const { return (float)v; }
};
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half(float f) { return __half(f); }
#else
#include <cuda_fp16.h>
#endif
#undef SG_ROUND_F16
#define SG_ROUND_F16(x) __half2float(__float2half((float)(x)))

#ifdef SG_CUDA_EMULATED
#include <exception>
#include <stdlib.h>
#include <string.h>
#include <string>
namespace sg_emu_glue {
/* The emulator reports a failed launch (a divergent barrier, a bad launch
 * configuration) by an exception; kept here for SG_CUDA_CHECK's message. */
inline thread_local std::string failure;
template <class K, class... A>
void launch(K k, const char *name, dim3 grid, dim3 block, size_t shmem, A... args) {
    /* fault injection for tests of the error path: SG_CUDA_EMU_FAIL=<text>
     * fails every launch whose kernel expression contains <text> */
    const char *inject = getenv("SG_CUDA_EMU_FAIL");
    if (inject != nullptr && *inject && strstr(name, inject) != nullptr) {
        failure = std::string(name) + ": a launch failure injected by SG_CUDA_EMU_FAIL";
        return;
    }
    try {
        ::cuda_emu::launch(k, grid, block, shmem, args...);
    } catch (const std::exception &e) {
        failure = std::string(name) + ": " + e.what();
    }
}
inline const char *take_failure() {
    static thread_local std::string last;
    if (failure.empty()) return nullptr;
    last.swap(failure);
    failure.clear();
    return last.c_str();
}
}  // namespace sg_emu_glue
#define SG_LAUNCH(k, grid, block, shmem, ...) \
    ::sg_emu_glue::launch(k, #k, dim3(grid), dim3(block), shmem, __VA_ARGS__)
#define SG_CUDA_CHECK(err, what)                                                        \
    do {                                                                                \
        const char *sg_f_ = ::sg_emu_glue::take_failure();                              \
        if (sg_f_ != nullptr)                                                           \
            SG_FAIL(err, SG_ERR_RUNTIME, "%s failed on the (emulated) device: %s",      \
                    (what), sg_f_);                                                     \
    } while (0)
#else
#include <cuda_runtime.h>
/* cudaGetLastError first: the runtime's error state is per thread and kept
 * until read, so an error that another caller of the runtime left (a
 * library's probe, say) would otherwise be reported as this launch's. */
#define SG_LAUNCH(k, grid, block, shmem, ...)                                           \
    do {                                                                                \
        (void)cudaGetLastError();                                                       \
        k<<<(grid), (block), (shmem)>>>(__VA_ARGS__);                                   \
    } while (0)
#define SG_CUDA_CHECK(err, what)                                                        \
    do {                                                                                \
        cudaError_t sg_e_ = cudaGetLastError();                                         \
        if (sg_e_ != cudaSuccess)                                                       \
            SG_FAIL(err, SG_ERR_RUNTIME, "%s failed on the device: %s", (what),         \
                    cudaGetErrorString(sg_e_));                                         \
    } while (0)
#endif

#endif
