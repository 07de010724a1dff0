"""RandomStreams: symbolic random numbers that advance on every function call.

The methods and their argument order are Theano's (``RandomStreamsBase``)::

    >>> srng = RandomStreams(seed=234)
    >>> u = srng.uniform((2, 2))                 # size first, then low=0.0, high=1.0
    >>> z = srng.normal((2, 2), avg=1.0, std=3.0)
    >>> f = symgraph.function([], u)
    >>> f(), f()                                 # different numbers each call

Each draw creates its own shared generator state (``u.rng``) and sets its
``default_update`` to the random op's next state, so every compiled function
that uses the sample advances that state after each call (unless
``no_default_updates=True`` or an explicit update is given).  The states are
seeded from one ``numpy.random.SeedSequence``: two streams built with the same
seed, asked for the same draws in the same order, give the same numbers, and
``stream.seed(s)`` resets every state as a fresh ``RandomStreams(s)`` would.

Where symgraph differs from Theano: the states are NumPy ``Generator``\\s
(PCG64), not ``RandomState``\\s, so the numbers differ from Theano's for the
same seed; they keep the ``seed``, ``get_state`` and ``set_state`` methods
that Theano's tutorial calls on ``u.rng.get_value()``.
"""

import copy

import numpy as np

from symgraph.graph.basic import Variable
from symgraph.ops import random as rv
from symgraph.ops import random_vector as rvv
from symgraph.tensor.basic import as_tensor_variable, is_python_scalar

__all__ = ["RandomStreams", "RandomStream", "SeedableGenerator"]


class SeedableGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` with the ``RandomState`` methods that Theano
    programs call on a stream's state: ``seed``, ``get_state``, ``set_state``."""

    def seed(self, seed=None):
        """Restart the bit generator as if it had been created from ``seed``."""
        self.bit_generator.state = type(self.bit_generator)(seed).state

    def get_state(self):
        """A copy of the bit generator's state (pass it to :meth:`set_state`)."""
        return copy.deepcopy(self.bit_generator.state)

    def set_state(self, state):
        """Restore a state returned by :meth:`get_state`."""
        self.bit_generator.state = state

    def __reduce__(self):
        # Generator's own reduce rebuilds a plain Generator; the random ops
        # deep-copy states, and the copy must keep these methods.
        return (type(self), (self.bit_generator,))


class RandomStreams:
    """A source of symbolic random variables (Theano's ``RandomStreams``).

    ``seed`` (an int, a sequence of ints, or None for fresh OS entropy)
    seeds every generator state this stream creates.  ``state_updates``
    lists ``(shared_state, next_state)`` pairs, one per draw, in creation
    order; ``updates()`` returns it as a list.  ``srng[u.rng]`` reads a
    state and ``srng[u.rng] = generator`` replaces it.

    ``size`` is a tuple of ints or symbolic integer scalars, an int, or a
    symbolic integer vector (give ``ndim`` when its length is not static);
    ``-1`` in a tuple takes that dimension from the parameters.  ``None``
    draws one sample per element of the parameters broadcast together.
    """

    def __init__(self, seed=None):
        self.default_instance_seed = seed
        self.state_updates = []
        self._seed_seq = np.random.SeedSequence(seed)

    # -- state ---------------------------------------------------------------

    def seed(self, seed=None):
        """Re-seed every generator state of this stream from ``seed`` (the
        constructor's seed when None): the draws then repeat those of a fresh
        ``RandomStreams(seed)``."""
        if seed is None:
            seed = self.default_instance_seed
        self._seed_seq = np.random.SeedSequence(seed)
        for state, _ in self.state_updates:
            state.set_value(self._new_generator(), borrow=True)

    def updates(self):
        """The ``(shared_state, next_state)`` pairs of every draw made so far."""
        return list(self.state_updates)

    def __getitem__(self, item):
        """The current generator of the state variable ``item`` (not a copy)."""
        return self._own_state(item).get_value(borrow=True)

    def __setitem__(self, item, value):
        """Replace the generator of the state variable ``item``."""
        self._own_state(item).set_value(value, borrow=True)

    def _own_state(self, item):
        if not any(item is state for state, _ in self.state_updates):
            raise KeyError(f"{item} is not a generator state of this RandomStreams "
                           f"(use the .rng attribute of one of its samples)")
        return item

    def _new_generator(self):
        (child,) = self._seed_seq.spawn(1)
        return SeedableGenerator(np.random.PCG64(child))

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
        sample.rng = state  # Theano's attribute: the state to read or reset
        sample.update = (state, next_state)
        self.state_updates.append((state, next_state))
        return sample

    # -- distributions -------------------------------------------------------

    def uniform(self, size=None, low=0.0, high=1.0, ndim=None, dtype=None):
        """Floats uniform in ``[low, high)``.  ``dtype`` defaults to the
        upcast of ``floatX`` and the dtypes of symbolic ``low``/``high``."""
        dtype = _float_dtype(dtype, low, high)
        low, high = _floats(dtype, low, high)
        return self.gen(rv.UniformRV(dtype), _size(size, ndim, low, high), low, high)

    def normal(self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None):
        """Gaussian samples of mean ``avg`` and standard deviation ``std``."""
        dtype = _float_dtype(dtype, avg, std)
        avg, std = _floats(dtype, avg, std)
        return self.gen(rv.NormalRV(dtype), _size(size, ndim, avg, std), avg, std)

    def binomial(self, size=None, n=1, p=0.5, ndim=None, dtype="int64", prob=None):
        """The number of successes in ``n`` trials of probability ``p``
        (``prob`` is Theano's old name for ``p``)."""
        if prob is not None:
            p = prob
        n, p = as_tensor_variable(n), _floats("floatX", p)[0]
        return self.gen(rv.BinomialRV(dtype or "int64"), _size(size, ndim, n, p), n, p)

    def random_integers(self, size=None, low=0, high=1, ndim=None, dtype="int64"):
        """Integers uniform in ``[low, high]``, both ends included."""
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        for name, bound in (("low", low), ("high", high)):
            if bound.dtype not in rv.INT_DTYPES:
                raise TypeError(f"random_integers: {name} must be an integer, got {bound} "
                                f"of type {bound.type}")
        return self.gen(rv.IntegersRV(dtype or "int64"), _size(size, ndim, low, high),
                        low, high + 1)

    def choice(self, size=None, a=2, replace=True, p=None, ndim=None, dtype=None):
        """Samples from the vector ``a`` (or from ``arange(a)`` for an integer
        ``a``), with or without replacement, with probabilities ``p``.

        ``dtype`` casts the result; by default it is ``a``'s dtype (int64 for
        an integer ``a``): Theano's default int64 would truncate float ``a``.
        """
        a = as_tensor_variable(a)
        op = rv.ChoiceRV("int64" if a.ndim == 0 else a.dtype, replace=replace)
        params = (a,) if p is None else (a, _floats("float64", p)[0])
        sample = self.gen(op, _size(size, ndim), *params)
        return _cast(sample, dtype)

    def poisson(self, size=None, lam=1.0, ndim=None, dtype="int64"):
        """Counts of a Poisson distribution of mean ``lam``."""
        lam = _floats("float64", lam)[0]
        return self.gen(rv.PoissonRV(dtype or "int64"), _size(size, ndim, lam), lam)

    def permutation(self, size=None, n=1, ndim=None, dtype="int64"):
        """Permutations of ``arange(n)``, one per entry of ``size``: the result
        has shape ``size + (n,)`` (one permutation of shape ``(n,)`` when
        ``size`` is None or ``()``)."""
        if size is None or (isinstance(size, (tuple, list)) and not size):
            if ndim not in (None, 0, 1):
                raise TypeError(f"permutation: one permutation was asked for (size "
                                f"{size!r}) but ndim={ndim}")
            size = ()
        return self.gen(rvv.PermutationsRV(dtype or "int64"), _size(size, ndim),
                        as_tensor_variable(n))

    def multinomial(self, size=None, n=1, pvals=(0.5, 0.5), ndim=None, dtype="int64"):
        """Counts of ``n`` draws among the categories of ``pvals`` (last axis),
        one vector per entry of ``size``: the result has shape
        ``size + (pvals.shape[-1],)``."""
        n = as_tensor_variable(n)
        pvals = _floats("float64", pvals)[0]
        batch = pvals[..., 0] if isinstance(pvals, Variable) else np.asarray(pvals)[..., 0]
        return self.gen(rvv.MultinomialRV(dtype or "int64"),
                        _size(size, ndim, n, as_tensor_variable(batch)), n, pvals)

    def shuffle_row_elements(self, input):
        """``input`` with the entries of every row (its last axis) shuffled
        independently; the permutations are the result's ``.permutation``."""
        x = as_tensor_variable(input)
        if x.ndim == 0:
            raise TypeError("shuffle_row_elements: the input needs at least one dimension")
        batch = tuple(x.shape[i] for i in range(x.ndim - 1))
        perm = self.permutation(size=batch or None, n=x.shape[-1])
        index = []
        for axis in range(x.ndim - 1):
            from symgraph.ops.shape import arange

            pattern = ["x"] * x.ndim
            pattern[axis] = 0
            index.append(arange(x.shape[axis]).dimshuffle(pattern))
        shuffled = x[tuple(index) + (perm,)]
        shuffled.permutation = perm
        return shuffled


RandomStream = RandomStreams  # the name PyTensor and earlier symgraph used


def _float_dtype(dtype, *params):
    """Theano's default: ``floatX`` upcast with the dtypes of the symbolic or
    array parameters (Python numbers do not count: they promote weakly)."""
    from symgraph.config import config
    from symgraph.tensor.type import TensorType, upcast

    if dtype is not None:
        return TensorType(dtype, shape=()).dtype
    dtypes = [as_tensor_variable(p).dtype for p in params if not is_python_scalar(p)]
    out = upcast(config.floatX, *dtypes)
    if out not in rv.FLOAT_DTYPES:
        raise TypeError(f"the parameters' dtypes {dtypes} give no float sample dtype; "
                        f"pass dtype=")
    return out


def _floats(dtype, *params):
    """Python-number (and list) parameters as tensors of the sample's dtype, so
    that a float32 stream builds no float64 constants; variables pass."""
    from symgraph.tensor.type import TensorType

    dtype = TensorType(dtype, shape=()).dtype
    return [p if isinstance(p, Variable) else as_tensor_variable(np.asarray(p, dtype=dtype))
            for p in params]


def _cast(x, dtype):
    if dtype is None or x.dtype == dtype:
        return x
    from symgraph.ops.math import cast

    return cast(x, dtype)


def _size(size, ndim, *params):
    """``size`` in the form the random ops take, with Theano's checks:
    ``ndim`` must match a tuple's length and gives a symbolic vector of unknown
    length its static length; ``-1`` takes a dimension from ``params``."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        size = (size,)
    if isinstance(size, (tuple, list)):
        if ndim is not None and len(size) != ndim:
            raise ValueError(f"ndim={ndim} differs from len(size)={len(size)} "
                             f"(size={size!r})")
        size = tuple(_borrowed_dim(size, i, params) if _is_minus_one(s) else s
                     for i, s in enumerate(size))
        _check_rank(len(size), params)
        return size
    if size is None:
        return None
    size = as_tensor_variable(size)
    if size.ndim == 1 and size.type.shape[0] is None and ndim is not None:
        from symgraph.ops.shape import specify_shape

        size = specify_shape(size, (ndim,))
    elif size.ndim == 1 and ndim is not None and size.type.shape[0] != ndim:
        raise ValueError(f"ndim={ndim} differs from the length {size.type.shape[0]} of "
                         f"size {size}")
    if size.ndim == 1 and size.type.shape[0] is not None:
        _check_rank(size.type.shape[0], params)
    return size


def _is_minus_one(s):
    return isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s == -1


def _borrowed_dim(size, i, params):
    """Theano's ``-1`` in ``size``: the length of dimension ``i`` (counted from
    the right, as broadcasting aligns) of a parameter that is not
    broadcastable there, else 1."""
    overlapping = False
    for p in params:
        p = as_tensor_variable(p)
        k = i - (len(size) - p.ndim)
        if k >= 0:
            overlapping = True
            if not p.broadcastable[k]:
                return p.shape[k]
    if not overlapping:
        raise ValueError(f"size {size!r}: the -1 at position {i} overlaps no dimension of "
                         f"the parameters, so its length is unknown")
    return 1


def _check_rank(ndim, params):
    needed = max((as_tensor_variable(p).ndim for p in params), default=0)
    if needed > ndim:
        raise ValueError(f"size has {ndim} dimensions but the parameters need {needed} "
                         f"(their shapes must broadcast to size)")
