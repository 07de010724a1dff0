"""RandomStream: symbolic random numbers that advance on every function call.

>>> srng = RandomStream(seed=234)
>>> u = srng.uniform(size=(2, 3))
>>> f = symgraph.function([], u)
>>> f(), f()          # different numbers each call

Each draw method creates its own shared generator state and sets the state's
``default_update`` to the random op's next-state output, so every compiled
function that uses the sample advances that state after each call (unless
``no_default_updates=True`` or an explicit update is given).  The states are
seeded from one ``numpy.random.SeedSequence``: two streams built with the same
seed, asked for the same draws in the same order, give the same numbers, and
``stream.seed(s)`` resets every state as a fresh ``RandomStream(s)`` would.

Compared with Theano's ``RandomStreams`` the distribution parameters come
before ``size`` (PyTensor's order, as NumPy's): write ``size=`` by keyword
when porting ``srng.uniform((2, 3))``.
"""

import numpy as np

from symgraph.graph.basic import Variable
from symgraph.ops import random as rv
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["RandomStream"]


class RandomStream:
    """A source of symbolic random variables, backed by NumPy Generators.

    ``seed`` (an int, a sequence of ints, or None for fresh OS entropy)
    seeds every generator state this stream creates.  ``state_updates``
    lists ``(shared_state, next_state)`` pairs, one per draw, in creation
    order (Theano's attribute); ``updates()`` returns it as a list.
    """

    def __init__(self, seed=None):
        self.default_instance_seed = seed
        self.state_updates = []
        self._seed_seq = np.random.SeedSequence(seed)

    # -- state ---------------------------------------------------------------

    def seed(self, seed=None):
        """Re-seed every generator state of this stream from ``seed`` (the
        constructor's seed when None): the draws then repeat those of a fresh
        ``RandomStream(seed)``."""
        if seed is None:
            seed = self.default_instance_seed
        self._seed_seq = np.random.SeedSequence(seed)
        for state, _ in self.state_updates:
            state.set_value(self._new_generator(), borrow=True)

    def updates(self):
        """The ``(shared_state, next_state)`` pairs of every draw made so far."""
        return list(self.state_updates)

    def _new_generator(self):
        (child,) = self._seed_seq.spawn(1)
        return np.random.default_rng(child)

    def gen(self, op, *args, **kwargs):
        """Apply the random ``op`` to a new shared state of this stream and
        return the sample; the state's ``default_update`` is the next state.

        ``args`` are the op's inputs after the state: ``size`` then the
        distribution's parameters.
        """
        from symgraph.compile.shared import SharedVariable

        state = SharedVariable(rv.RandomGeneratorType(), self._new_generator(),
                               name=f"{op.name}_rng", borrow=True)
        node = op.make_node(state, *args, **kwargs)
        next_state, sample = node.outputs
        state.default_update = next_state
        # The sample remembers its state so users can find (and reset) it.
        sample.rng = state
        sample.update = (state, next_state)
        self.state_updates.append((state, next_state))
        return sample

    # -- distributions -------------------------------------------------------

    def uniform(self, low=0.0, high=1.0, size=None, dtype="floatX", ndim=None):
        """Floats uniform in ``[low, high)``; ``size`` a tuple (ints or
        symbolic scalars) or a symbolic vector (give ``ndim`` when its length
        is not static)."""
        dtype = dtype or "floatX"
        return self.gen(rv.UniformRV(dtype), _size(size, ndim), *_floats(dtype, low, high))

    def normal(self, loc=0.0, scale=1.0, size=None, dtype="floatX", ndim=None, avg=None,
               std=None):
        """Gaussian samples of mean ``loc`` and standard deviation ``scale``
        (``avg``/``std`` are the names Theano's MRG streams used)."""
        loc = _alias(loc, 0.0, avg, "loc", "avg")
        scale = _alias(scale, 1.0, std, "scale", "std")
        dtype = dtype or "floatX"
        return self.gen(rv.NormalRV(dtype), _size(size, ndim), *_floats(dtype, loc, scale))

    def binomial(self, n=1, p=0.5, size=None, dtype="int64", ndim=None, prob=None):
        """Successes in ``n`` trials of probability ``p`` (``prob`` is Theano's
        MRG name for ``p``)."""
        p = _alias(p, 0.5, prob, "p", "prob")
        return self.gen(rv.BinomialRV(dtype or "int64"), _size(size, ndim), n, p)

    def integers(self, low, high=None, size=None, dtype="int64", ndim=None):
        """Integers uniform in ``[low, high)``; ``integers(high)`` draws from
        ``[0, high)`` as NumPy's ``Generator.integers``."""
        if high is None:
            low, high = 0, low
        return self.gen(rv.IntegersRV(dtype or "int64"), _size(size, ndim), *_ints(low, high))

    def random_integers(self, low=0, high=1, size=None, dtype="int64", ndim=None):
        """Theano's name: integers in ``[low, high]``, both ends included."""
        low, high = _ints(low, high)
        return self.integers(low, high + 1, size=size, dtype=dtype, ndim=ndim)

    def choice(self, a, size=None, replace=True, p=None, dtype=None, ndim=None):
        """Samples from the vector ``a`` (or from ``arange(a)`` for an integer
        ``a``), with or without replacement, with probabilities ``p``."""
        a = as_tensor_variable(a)
        if dtype is not None and a.ndim == 1 and a.dtype != dtype:
            from symgraph.ops.math import cast

            a = cast(a, dtype)
        op = rv.ChoiceRV("int64" if a.ndim == 0 else a.dtype, replace=replace)
        params = (a,) if p is None else (a, p)
        return self.gen(op, _size(size, ndim), *params)

    def permutation(self, x=None, n=None):
        """A random permutation of ``arange(x)`` for an integer ``x``, else of
        ``x``'s entries along its first axis (``n=`` is Theano's keyword)."""
        if x is None:
            if n is None:
                raise TypeError("permutation() needs x (or n)")
            x = n
        x = as_tensor_variable(x)
        return self.gen(rv.PermutationRV("int64" if x.ndim == 0 else x.dtype), x)


def _alias(value, default, alias, name, alias_name):
    """Resolve a keyword that has a Theano alias; giving both is an error."""
    if alias is None:
        return value
    if value is not default:
        raise TypeError(f"give {name} or {alias_name}, not both")
    return alias


def _size(size, ndim):
    """Give a symbolic size vector of unknown length the static length ``ndim``."""
    if isinstance(size, Variable) and ndim is not None:
        size = as_tensor_variable(size)
        if size.ndim == 1 and size.type.shape[0] is None:
            from symgraph.ops.shape import specify_shape

            size = specify_shape(size, (ndim,))
    return size


def _floats(dtype, *params):
    """Python-number parameters of a float distribution, at the sample's dtype
    (so a float32 stream does not build float64 constants)."""
    from symgraph.tensor.type import TensorType

    dtype = TensorType(dtype, shape=()).dtype
    return [as_tensor_variable(p, dtype=dtype) if _is_number(p) else p for p in params]


def _ints(*params):
    """Integer parameters as tensors (Python ints become int64 constants)."""
    return [as_tensor_variable(p) for p in params]


def _is_number(p):
    return isinstance(p, (int, float, np.number)) and not isinstance(p, bool)
