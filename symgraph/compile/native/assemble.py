"""Putting kernels together: one C translation unit for many nodes' kernels.

Each kernel's symbols get a unique prefix through the ``SG_FN`` macro, shared
support code is emitted once per key, and headers once each.
"""

from pathlib import Path

C_SRC = Path(__file__).resolve().parents[3] / "c_src"


def kernel_prefix(index):
    """The symbol prefix of the ``index``-th kernel of a library."""
    return f"sgk{index}"


def assemble(kernels):
    """C source for ``kernels``, a list of (prefix, CKernel)."""
    headers, support, bodies = [], {}, []
    for prefix, kernel in kernels:
        for header in kernel.headers:
            if header not in headers:
                headers.append(header)
        for key, code in kernel.support:
            support.setdefault(key, code)
        bodies.append(f"#define SG_FN(name) {prefix}_##name\n{kernel.source}\n#undef SG_FN\n")
    lines = ['#include "sg_kernel.h"', "#include <math.h>", "#include <stdlib.h>"]
    lines += [f"#include {h}" for h in headers if h not in ("<math.h>", "<stdlib.h>")]
    lines += [code for code in support.values()]
    lines += bodies
    return "\n".join(lines) + "\n"
