"""What the fusion rewrites ask of the backend that will run the graph: can
this scalar op, on these dtypes, be part of one fused loop?

The rewrites sit below the backends and import none: a backend hands its
answers down by registering two predicates here when it is imported
(``register_fusion_support``).  A scalar op that the backend cannot compile
must not be fused, or the whole fused node would drop to Python.  With no
backend registered, nothing is fused.
"""

import threading

__all__ = ["register_fusion_support", "can_fuse_elemwise", "can_fuse_reduction",
           "DEFAULT_BACKEND"]

#: The backend the rewrites ask when none is named (the native CPU backend).
DEFAULT_BACKEND = "cpu"

_SUPPORT = {}    # backend -> (elemwise predicate, reduction predicate)
_LOCK = threading.Lock()


def register_fusion_support(backend, elemwise, reduction):
    """Register ``backend``'s predicates.

    ``elemwise(scalar_op, in_dtypes) -> bool``: the op can be a member of a
    fused element-wise loop for inputs of ``in_dtypes`` (a tuple of str).
    ``reduction(scalar_op, in_dtypes) -> bool``: it can be evaluated per
    element inside a reduction loop (``ReduceOfElemwise``).
    """
    with _LOCK:
        _SUPPORT[backend] = (elemwise, reduction)


def _ask(which, scalar_op, in_dtypes, backend):
    support = _SUPPORT.get(backend or DEFAULT_BACKEND)
    if support is None:
        return False
    # memoized on the op, not in a table here: fused Composites are made per
    # graph, and a table would keep every one alive after its function
    memo = scalar_op.__dict__.setdefault("_fusable_memo", {})
    key = (which, backend or DEFAULT_BACKEND, tuple(in_dtypes))
    found = memo.get(key)
    if found is None:
        found = memo[key] = bool(support[which](scalar_op, tuple(in_dtypes)))
    return found


def can_fuse_elemwise(scalar_op, in_dtypes, backend=None):
    """True when ``backend`` (default: the CPU backend) can fuse ``scalar_op``
    on inputs of ``in_dtypes`` into an element-wise loop."""
    return _ask(0, scalar_op, in_dtypes, backend)


def can_fuse_reduction(scalar_op, in_dtypes, backend=None):
    """True when ``backend`` can evaluate ``scalar_op`` per element inside a
    reduction loop."""
    return _ask(1, scalar_op, in_dtypes, backend)
