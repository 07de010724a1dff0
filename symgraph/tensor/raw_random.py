"""Theano's ``tensor.raw_random``: random draws in functional form.

Each function takes a generator state variable and returns ``(new_state,
sample)``; the program threads the state itself, for instance through
``In(rng, value=numpy.random.default_rng(seed), update=new_state)``.
``RandomStreams`` (``RandomStreamsBase`` here) does that threading for you
with shared states; both build the same random ops (``symgraph.ops.random``).

The state is a ``numpy.random.Generator`` (Theano's was a
``numpy.random.RandomState``): ``RandomStateType`` is symgraph's generator
type, and ``random_state_type()`` makes a state variable.  The arguments of
each function are those of the ``RandomStreams`` method of the same name,
after the state.
"""

import copy

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.ops.random import (RandomGeneratorType, as_random_generator,  # noqa: F401
                                 normalize_size)
from symgraph.tensor.random import RandomStreams
from symgraph.tensor.type import TensorType

RandomStreamsBase = RandomStreams

#: Theano's name of the state type; its values are ``numpy.random.Generator``.
RandomStateType = RandomGeneratorType

#: The state type's instance: ``random_state_type()`` is a new state variable.
random_state_type = RandomGeneratorType()

__all__ = ["RandomStreamsBase", "RandomStateType", "random_state_type", "RandomFunction",
           "uniform", "normal", "binomial", "random_integers", "poisson", "permutation",
           "multinomial"]


class _GivenState(RandomStreams):
    """A stream whose draws use one given state and return ``(new_state,
    sample)``, so that the functions below share ``RandomStreams``'
    argument handling instead of repeating it."""

    def __init__(self, state, who):
        super().__init__(0)
        self._state = as_random_generator(state, f"raw_random.{who}")

    def gen(self, op, *args, **kwargs):
        node = op.make_node(self._state, *args, **kwargs)
        return tuple(node.outputs)


def uniform(random_state, size=None, low=0.0, high=1.0, ndim=None, dtype=None):
    """``(new_state, sample)``: floats uniform in ``[low, high)``."""
    return _GivenState(random_state, "uniform").uniform(size, low, high, ndim, dtype)


def normal(random_state, size=None, avg=0.0, std=1.0, ndim=None, dtype=None):
    """``(new_state, sample)``: Gaussian samples of mean ``avg`` and standard
    deviation ``std``."""
    return _GivenState(random_state, "normal").normal(size, avg, std, ndim, dtype)


def binomial(random_state, size=None, n=1, p=0.5, ndim=None, dtype="int64", prob=None):
    """``(new_state, sample)``: successes in ``n`` trials of probability ``p``
    (``prob`` is Theano's old name of ``p``)."""
    return _GivenState(random_state, "binomial").binomial(size, n, p, ndim, dtype, prob)


def random_integers(random_state, size=None, low=0, high=1, ndim=None, dtype="int64"):
    """``(new_state, sample)``: integers uniform in ``[low, high]``, both ends
    included."""
    return _GivenState(random_state, "random_integers").random_integers(size, low, high, ndim,
                                                                        dtype)


def poisson(random_state, size=None, lam=1.0, ndim=None, dtype="int64"):
    """``(new_state, sample)``: Poisson counts of mean ``lam``."""
    return _GivenState(random_state, "poisson").poisson(size, lam, ndim, dtype)


def permutation(random_state, size=None, n=1, ndim=None, dtype="int64"):
    """``(new_state, sample)``: permutations of ``arange(n)``, one per entry
    of ``size`` (shape ``size + (n,)``)."""
    return _GivenState(random_state, "permutation").permutation(size, n, ndim, dtype)


def multinomial(random_state, size=None, n=1, pvals=(0.5, 0.5), ndim=None, dtype="int64"):
    """``(new_state, sample)``: counts of ``n`` draws among the categories of
    ``pvals`` (last axis), shape ``size + (len(pvals),)``."""
    return _GivenState(random_state, "multinomial").multinomial(size, n, pvals, ndim, dtype)


# Names of RandomState methods that numpy.random.Generator spells otherwise.
_RANDOMSTATE_NAMES = {
    "random_integers": lambda gen, low, high, size: gen.integers(low, high, size=size,
                                                                 endpoint=True),
    "randint": lambda gen, low, high, size: gen.integers(low, high, size=size),
    "random_sample": lambda gen, size: gen.random(size=size),
    "rand": lambda gen, size: gen.random(size=size),
}


class RandomFunction(Op):
    """Theano's op around one sampling method: ``RandomFunction(fn,
    outtype)(state, shape, *args)`` returns ``[new_state, sample]``.

    ``fn``: the name of a ``numpy.random.Generator`` method (a few
    ``RandomState`` names too: ``random_integers``, ``randint``,
    ``random_sample``, ``rand``), called as ``method(*args, size=shape)``,
    or a function called as ``fn(generator, *args, shape)``.  ``shape``: the
    sample's shape (a tuple or an int vector of known length; empty means
    NumPy's ``size=None``).  ``outtype``: the sample's TensorType; its rank
    must be ``len(shape) + ndim_added`` (``ndim_added``: the dimensions the
    method adds, 1 for ``multinomial``).  ``inplace`` is accepted for
    Theano's signature: the input state is never modified.
    """

    __props__ = ("fn", "outtype", "inplace", "ndim_added")

    def __init__(self, fn, outtype, inplace=False, ndim_added=0):
        if not (isinstance(fn, str) or callable(fn)):
            raise TypeError(f"RandomFunction: fn must be a method name or a function, got "
                            f"{fn!r}")
        if isinstance(fn, str) and fn not in _RANDOMSTATE_NAMES and \
                not callable(getattr(np.random.Generator, fn, None)):
            raise ValueError(f"RandomFunction: numpy.random.Generator has no method {fn!r}")
        if not isinstance(outtype, TensorType):
            raise TypeError(f"RandomFunction: outtype must be a TensorType, got {outtype!r}")
        self.fn = fn
        self.outtype = outtype
        self.inplace = bool(inplace)
        self.ndim_added = int(ndim_added)

    def __str__(self):
        name = self.fn if isinstance(self.fn, str) else getattr(self.fn, "__name__", "fn")
        return f"RandomFunction{{{name}}}"

    __repr__ = __str__

    def make_node(self, r, shape, *args):
        from symgraph.tensor.basic import as_tensor_variable

        r = as_random_generator(r, str(self))
        shape = normalize_size(shape, str(self))
        length = shape.type.shape[0]
        if length and self.outtype.ndim != length + self.ndim_added:
            raise ValueError(f"{self}: outtype {self.outtype} has {self.outtype.ndim} "
                             f"dimensions but shape gives {length} and ndim_added "
                             f"{self.ndim_added}")
        args = [as_tensor_variable(a) for a in args]
        return Apply(self, [r, shape] + args, [r.type(), self.outtype()])

    def perform(self, node, inputs, output_storage):
        gen = copy.deepcopy(inputs[0])  # the input state stays as it was
        shape, args = inputs[1], inputs[2:]
        size = tuple(int(s) for s in shape) if len(shape) else None
        if callable(self.fn):
            sample = self.fn(gen, *args, size)
        elif self.fn in _RANDOMSTATE_NAMES:
            sample = _RANDOMSTATE_NAMES[self.fn](gen, *args, size)
        else:
            sample = getattr(gen, self.fn)(*args, size=size)
        sample = np.asarray(sample, dtype=self.outtype.dtype)
        if sample.ndim != self.outtype.ndim:
            raise ValueError(f"{self}: the sample has {sample.ndim} dimensions (shape "
                             f"{sample.shape}) but outtype {self.outtype} has "
                             f"{self.outtype.ndim}")
        output_storage[0][0] = gen
        output_storage[1][0] = sample

    def connection_pattern(self, node):
        return [[True, False]] + [[False, False] for _ in node.inputs[1:]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for, grad_undefined

        return [grad_undefined(self, 0, inputs[0], "no gradient through a random state")] + \
            [disconnected_grad_for(x) for x in inputs[1:]]

    def do_constant_folding(self, fgraph, node):
        return False
