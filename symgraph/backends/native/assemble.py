"""Putting kernels together: one C translation unit for many nodes' kernels.

Each kernel's symbols get a unique prefix through the ``SG_FN`` macro, shared
support code is emitted once per key, and headers once each.
"""

from symgraph.backends.native.c_sources import C_SRC  # noqa: F401  (re-exported)


def kernel_prefix(index):
    """The symbol prefix of the ``index``-th kernel of a library."""
    return f"sgk{index}"


#: The symbol through which a library says which kernels it holds.
MANIFEST_SYMBOL = "sg_library_manifest"


def manifest_source(entries):
    """C defining :data:`MANIFEST_SYMBOL`: one ``"<kernel key> <prefix>"`` line per
    (key, prefix) of ``entries``.  The linker reads it back after loading, so an
    index record that names the wrong library or prefix is a miss, never a call
    into another kernel's code."""
    text = "".join(f"{key} {prefix}\\n" for key, prefix in entries)
    return (f'__attribute__((visibility("default"))) const char {MANIFEST_SYMBOL}[] = '
            f'"{text}";\n')


def collect(kernels):
    """(headers, support codes, bodies) of ``kernels`` ((prefix, kernel) pairs):
    each header and support entry once, each body with its ``SG_FN`` prefix."""
    headers, support, bodies = [], {}, []
    for prefix, kernel in kernels:
        for header in kernel.headers:
            if header not in headers:
                headers.append(header)
        for key, code in kernel.support:
            support.setdefault(key, code)
        bodies.append(f"#define SG_FN(name) {prefix}_##name\n{kernel.source}\n#undef SG_FN\n")
    return headers, list(support.values()), bodies


def assemble(kernels, manifest=()):
    """C source for ``kernels``, a list of (prefix, CKernel); ``manifest``, the
    (key, prefix) of each, becomes the library's :data:`MANIFEST_SYMBOL`."""
    headers, support, bodies = collect(kernels)
    lines = ['#include "sg_kernel.h"', "#include <math.h>", "#include <stdlib.h>"]
    lines += [f"#include {h}" for h in headers if h not in ("<math.h>", "<stdlib.h>")]
    lines += support
    lines += bodies
    if manifest:
        lines.append(manifest_source(manifest))
    return "\n".join(lines) + "\n"
