"""Many device nodes' kernels in one CUDA translation unit.

As ``native/assemble.py`` for C: each kernel's names get a prefix through
``SG_FN``, shared support is emitted once, and the manifest says which kernels
the library holds.  Host functions (``run``, ``shape``) and the manifest have C
linkage, so the linker finds them with ``dlsym`` whichever compiler built the
library (nvcc, or the host C++ compiler for the emulated device).
"""

from symgraph.backends.native.assemble import MANIFEST_SYMBOL, collect

__all__ = ["assemble_cuda"]


def assemble_cuda(kernels, manifest=()):
    """CUDA source for ``kernels`` ((prefix, CKernel) pairs); ``manifest``: the
    (key, prefix) of each, as in ``native.assemble.assemble``."""
    headers, support, bodies = collect(kernels)
    lines = ['#include "sg_kernel.h"', '#include "cuda/sg_cuda_launch.h"', "#include <math.h>",
             "#include <stdint.h>",
             # shared support code defines helpers a library may not call (177),
             # and a fused composite may compute a temporary that only feeds an
             # output another kernel does not use (550): expected in generated
             # code, not warnings to stop the warnings-as-errors build
             "#ifdef __CUDACC__\n#pragma nv_diag_suppress 177\n#pragma nv_diag_suppress 550\n"
             "#endif"]
    lines += [f"#include {h}" for h in headers]
    lines += support
    lines.append('extern "C" {')
    lines += bodies
    if manifest:
        text = "".join(f"{key} {prefix}\\n" for key, prefix in manifest)
        # extern: a const at namespace scope has internal linkage in C++
        lines.append(f'extern __attribute__((visibility("default"))) const char {MANIFEST_SYMBOL}[] = '
                     f'"{text}";')
    lines.append('}  /* extern "C" */')
    return "\n".join(lines) + "\n"
