"""What the native backend makes of a node: a CKernel (C source plus how to call it).

The backend's lowering table (``lowerings.py``) maps an op class to the rule
``rule(op, node) -> CKernel | None`` (None: this node runs its Python
``perform``).  The kernel's source follows
the ABI of ``c_src/sg_kernel.h``: it defines ``int SG_FN(run)(const sg_array
*in, sg_array *out, sg_error *err)`` and, for compute kernels, ``int
SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err)``.
A "view or copy" kernel (VIEW_OR_COPY) exports both and ``int
SG_FN(view)(const sg_array *in, const int64_t *out_shapes, sg_array *out,
sg_error *err)``: given the shapes, it describes the outputs as views of
their base inputs (returns 0) when the inputs' strides, known only at run
time, allow it, or returns ``SG_NO_VIEW``; the runtime then allocates the
outputs as for a compute kernel and calls ``run``, which copies (NumPy's
``reshape`` behaves this way).
``SG_FN`` gives each kernel unique symbol names when many kernels are
compiled into one library; any other file-level name in ``source`` must be
wrapped in ``SG_FN`` too, or go in ``support`` (shared helpers, defined once
per library, deduplicated by their key).
"""

from dataclasses import dataclass, field

COMPUTE = "compute"   # the runtime allocates (or reuses) the outputs
INPLACE = "inplace"   # output k is the array of input inplace_of[k]
VIEW = "view"         # output k points into the memory of input view_of[k]
VIEW_OR_COPY = "view_or_copy"  # a view of input view_of[k] when the strides allow, else a copy


@dataclass(frozen=True)
class CKernel:
    """The native implementation of one node.

    ``source``: the kernel's C code (see the module docstring).
    ``kind``: COMPUTE, INPLACE, VIEW or VIEW_OR_COPY.
    ``view_of``/``inplace_of``: per output, the input index it aliases
    (VIEW_OR_COPY: the input it is a view of, when it is one).
    ``support``: ((key, code), ...) helper definitions shared between kernels.
    ``headers``: extra ``#include`` lines (system headers as ``<math.h>``,
    symgraph's own as ``"sg_loops.h"`` from ``c_src/``).
    ``symbols``: (name, python_value_fn) pairs: global pointers the kernel
    declares in its support code (e.g. BLAS function pointers) that the
    linker sets after loading the library; python_value_fn() -> int address.
    ``openmp``: compile this kernel's library with OpenMP.
    ``version``: bump to invalidate cached builds when the generator changes
    in a way the source text would not show.
    ``compile_weight``: the compiler's time per character of ``source``
    relative to an element-wise kernel's (the linker balances the libraries
    it compiles at once by it); not part of the kernel's identity.
    """

    source: str
    kind: str = COMPUTE
    view_of: tuple = ()
    inplace_of: tuple = ()
    support: tuple = ()
    headers: tuple = ()
    symbols: tuple = ()
    openmp: bool = False
    version: int = 1
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    compile_weight: float = field(default=1.0, compare=False)
