"""Theano's ``tensor.extra_ops`` import path: ``cumsum``, ``cumprod``,
``searchsorted``, ``diff``, ``bincount``, ``squeeze``, ``compress``,
``repeat``, ``bartlett``, ``fill_diagonal``, ``fill_diagonal_offset``,
``to_one_hot``, ``Unique``, ``unravel_index``, ``ravel_multi_index``
(implemented in ``symgraph.ops.extra``)."""

from symgraph.ops.extra import (CumOp, SearchsortedOp, Unique, bartlett, bincount,  # noqa: F401
                                compress, cumprod, cumsum, diff, fill_diagonal,
                                fill_diagonal_offset, ravel_multi_index, searchsorted,
                                to_one_hot, unique, unravel_index)
from symgraph.ops.shape import squeeze  # noqa: F401
from symgraph.ops.sort import repeat  # noqa: F401

__all__ = ["CumOp", "SearchsortedOp", "Unique", "bartlett", "bincount", "compress", "cumprod",
           "cumsum", "diff", "fill_diagonal", "fill_diagonal_offset", "ravel_multi_index",
           "searchsorted", "to_one_hot", "unique", "unravel_index", "squeeze", "repeat",
           "cpu_contiguous"]


def cpu_contiguous(x):
    """Theano's ``cpu_contiguous``: ``x`` itself.  symgraph's kernels take
    strided arrays, so no contiguous copy is ever needed."""
    return x
