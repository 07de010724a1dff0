"""Random ops whose every draw is a vector: multinomial counts and permutations.

They follow Theano's ``raw_random`` (``ndim_added=1``): ``size`` gives the
shape of the batch of draws and the sample has one more, last dimension, the
length of one draw (``len(pvals)`` categories, or ``n`` for a permutation of
``arange(n)``).  Inputs are ``(rng, size, *params)`` as for every
:class:`~symgraph.ops.random.RandomVariable`; an empty ``size`` means the
batch shape of the parameters.
"""

import numpy as np

from symgraph.graph.basic import Apply, Constant
from symgraph.ops.elemwise import broadcast_static_shapes, broadcast_symbolic_shapes
from symgraph.ops.random import (RandomVariable, _copy_generator, _size_shape, _static_size,
                                 as_random_generator, normalize_size)
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["MultinomialRV", "PermutationsRV"]


class MultinomialRV(RandomVariable):
    """Counts of ``n`` draws among the categories of ``pvals`` (last axis).

    ``n`` (integers) and ``pvals[..., 0]`` broadcast into the batch shape;
    the sample's shape is ``size + (pvals.shape[-1],)``.  Rows of ``pvals``
    whose sum exceeds 1 by rounding (float32 softmax outputs) are
    renormalised, as Theano did, instead of being refused by NumPy.
    """

    name = "multinomial"
    param_names = ("n", "pvals")

    def __init__(self, dtype="int64"):
        super().__init__(dtype)
        if self.dtype not in INT_DTYPES:
            raise TypeError(f"MultinomialRV: dtype must be an integer dtype, got {self.dtype}")

    def make_node(self, rng, size, n, pvals):
        rng = as_random_generator(rng, str(self))
        size = normalize_size(size, str(self))
        n, pvals = as_tensor_variable(n), as_tensor_variable(pvals)
        if n.dtype not in INT_DTYPES:
            raise TypeError(f"{self}: n must be an integer tensor, got {n} of type {n.type}")
        if pvals.ndim < 1 or pvals.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self}: pvals must be a float tensor of at least one "
                            f"dimension, got {pvals} of type {pvals.type}")
        if size.type.shape[0]:
            batch = _static_size(size)
            if n.ndim > len(batch) or pvals.ndim - 1 > len(batch):
                raise ValueError(f"{self}: size {batch} has fewer dimensions than the "
                                 f"batch of n ({n.ndim}-d) or pvals ({pvals.ndim - 1}-d)")
        else:
            batch = broadcast_static_shapes([n.type.shape, pvals.type.shape[:-1]],
                                            f"{self}: n and pvals[..., 0] cannot broadcast")
        out = TensorType(self.dtype, shape=batch + (pvals.type.shape[-1],))
        return Apply(self, [rng, size, n, pvals], [rng.type(), out()])

    def rng_fn(self, gen, params, size):
        n, pvals = params
        pvals = np.asarray(pvals, dtype="float64")
        total = pvals.sum(axis=-1, keepdims=True)
        over = (total > 1.0) & (total < 1.0 + 1e-5)
        pvals = np.where(over, pvals / np.where(over, total, 1.0), pvals)
        return gen.multinomial(n, pvals, size)

    def infer_shape(self, fgraph, node, input_shapes):
        size, n, pvals = node.inputs[1:]
        if size.type.shape[0]:
            batch = _size_shape(size)
        else:
            batch = broadcast_symbolic_shapes([input_shapes[2], input_shapes[3][:-1]],
                                              [n.broadcastable, pvals.broadcastable[:-1]])
        return [None, tuple(batch) + (input_shapes[3][-1],)]


class PermutationsRV(RandomVariable):
    """Independent random permutations of ``arange(n)``, one per entry of
    ``size``: the sample's shape is ``size + (n,)`` (Theano's
    ``raw_random.permutation``)."""

    name = "permutations"
    param_names = ("n",)

    def __init__(self, dtype="int64"):
        super().__init__(dtype)
        if self.dtype not in INT_DTYPES:
            raise TypeError(f"PermutationsRV: dtype must be an integer dtype, got {self.dtype}")

    def make_node(self, rng, size, n):
        rng = as_random_generator(rng, str(self))
        size = normalize_size(size, str(self))
        n = as_tensor_variable(n)
        if n.ndim != 0 or n.dtype not in INT_DTYPES:
            raise TypeError(f"{self}: n must be an integer scalar, got {n} of type {n.type}")
        length = int(n.data) if isinstance(n, Constant) else None
        out = TensorType(self.dtype, shape=_static_size(size) + (length,))
        return Apply(self, [rng, size, n], [rng.type(), out()])

    def perform(self, node, inputs, output_storage):
        gen, size, n = inputs
        gen = _copy_generator(gen)
        n = int(n)
        if n < 0:
            raise ValueError(f"{self}: n must be non-negative, got {n}")
        batch = tuple(int(s) for s in size)
        ordered = np.broadcast_to(np.arange(n, dtype=self.dtype), batch + (n,))
        output_storage[0][0] = gen
        output_storage[1][0] = gen.permuted(ordered, axis=-1)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import cast

        return [None, tuple(_size_shape(node.inputs[1])) + (cast(node.inputs[2], "int64"),)]
