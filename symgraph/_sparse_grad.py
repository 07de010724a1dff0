"""Theano's ``sparse_grad``: mark an integer-vector indexing for a sparse
gradient.

Theano stored the gradient of ``x[idx]`` with respect to ``x`` as a sparse
matrix when asked.  symgraph has no sparse tensors: its gradient of an
advanced indexing is a dense ``inc_subtensor`` (only the indexed rows are
written, so the work is proportional to ``len(idx)`` rows plus one zero-fill
of ``x``).  ``sparse_grad`` checks its argument as Theano did and returns it
unchanged.
"""

__all__ = ["sparse_grad"]


def sparse_grad(var):
    """``var``, the result of ``tensor[int_vector]``, unchanged: its gradient
    stays dense in symgraph (see the module docstring).  Raises TypeError for
    any other variable, as Theano accepted only such an indexing."""
    from symgraph.ops.advanced_subtensor import AdvancedSubtensor

    owner = getattr(var, "owner", None)
    if owner is None or not isinstance(owner.op, AdvancedSubtensor) or not _one_int_vector(
            owner.inputs[1:]):
        raise TypeError(f"sparse_grad: {var} must be the result of indexing a tensor by one "
                        f"integer vector (a_tensor[an_int_vector]), as in Theano")
    return var


def _one_int_vector(indices):
    from symgraph.tensor.type import INT_DTYPES

    return (len(indices) == 1 and getattr(indices[0], "ndim", None) == 1
            and indices[0].dtype in INT_DTYPES)
