"""Random variables: ops that draw samples from a NumPy generator state.

A random op takes a generator state (a ``numpy.random.Generator``), a ``size``
vector and the distribution's parameters, and returns ``(next_state, sample)``
(PyTensor's design).  ``perform`` draws from a *copy* of the input generator,
so the input state is never mutated and evaluating a node twice on the same
state gives the same numbers: randomness advances only through the state that
a compiled function writes back (``shared_rng.default_update``, set by
``symgraph.tensor.random.RandomStream``).

``size`` is an int64 vector of static length.  An empty ``size`` means "the
shape of the parameters broadcast together" (NumPy's ``size=None``), which for
scalar parameters is a single draw of shape ``()``.
"""

import copy

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Type, Variable
from symgraph.ops.elemwise import broadcast_static_shapes, broadcast_symbolic_shapes
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["RandomGeneratorType", "RandomGeneratorVariable", "RandomVariable", "UniformRV",
           "NormalRV", "BinomialRV", "PoissonRV", "IntegersRV", "ChoiceRV", "PermutationRV",
           "as_random_generator", "normalize_size"]


# ---------------------------------------------------------------------------
# The generator-state type


class RandomGeneratorType(Type):
    """The type of a ``numpy.random.Generator`` state.

    Values are compared by their bit generator's state, so two generators
    that would produce the same numbers are equal.
    """

    def filter(self, value, strict=False, allow_downcast=None):
        if isinstance(value, np.random.Generator):
            return value
        raise TypeError(f"{self}: expected a numpy.random.Generator, got "
                        f"{type(value).__name__} (make one with numpy.random.default_rng)")

    def values_eq(self, a, b):
        return _states_equal(a.bit_generator.state, b.bit_generator.state)

    @property
    def variable_class(self):
        return RandomGeneratorVariable

    @property
    def constant_class(self):
        return RandomGeneratorConstant

    def __str__(self):
        return "RandomGeneratorType"

    __repr__ = __str__


def _states_equal(a, b):
    """Deep equality of bit-generator state dicts (which may hold arrays)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_states_equal(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


class RandomGeneratorVariable(Variable):
    """A symbolic generator state (the input or the next-state output of a random op)."""


class RandomGeneratorConstant(Constant):
    """A fixed generator state: every evaluation draws the same numbers."""

    def signature(self):
        # Generators are mutable objects: merge constants only when they are one object.
        return (self.type, id(self.data))


def _is_generator_type(type_):
    """True for RandomGeneratorType and for a generic object type holding Generators."""
    if isinstance(type_, RandomGeneratorType):
        return True
    cls = getattr(type_, "cls", None)
    return isinstance(cls, type) and issubclass(cls, np.random.Generator)


def as_random_generator(rng, op_name="random op"):
    """``rng`` as a generator-state variable: a Variable passes through, a
    ``numpy.random.Generator`` becomes a constant; anything else is a TypeError."""
    if isinstance(rng, Variable):
        if not _is_generator_type(rng.type):
            raise TypeError(f"{op_name}: the rng input must be a generator state "
                            f"(RandomGeneratorType), got {rng} of type {rng.type}")
        return rng
    if isinstance(rng, np.random.Generator):
        return RandomGeneratorType().make_constant(rng)
    raise TypeError(f"{op_name}: the rng input must be a numpy.random.Generator or a "
                    f"generator-state variable, got {type(rng).__name__}")


# ---------------------------------------------------------------------------
# Sizes


def normalize_size(size, op_name="random op"):
    """``size`` (None, an int or an int scalar variable, a tuple of ints or
    symbolic scalars, or a symbolic vector of static length) as an int64
    vector variable."""
    if size is None:
        return constant(np.zeros((0,), dtype="int64"))
    if isinstance(size, (int, np.integer)):
        size = (size,)
    if isinstance(size, (tuple, list)):
        if not size:
            return constant(np.zeros((0,), dtype="int64"))
        if not any(isinstance(s, Variable) for s in size):
            values = np.asarray(size)
            if values.dtype.kind not in "iu" or (values < 0).any():
                raise TypeError(f"{op_name}: size must hold non-negative ints, got {size!r}")
            return constant(values.astype("int64"))
        entries = []
        for s in size:
            s = as_tensor_variable(s)
            if s.ndim != 0 or s.dtype not in INT_DTYPES:
                raise TypeError(f"{op_name}: each entry of size must be an integer scalar, "
                                f"got {s} of type {s.type}")
            entries.append(s)
        size = as_tensor_variable(entries)  # stacks the scalars into a vector
    size = as_tensor_variable(size)
    if size.ndim == 0 and size.dtype in INT_DTYPES:
        size = as_tensor_variable([size])  # one symbolic length: a 1-d sample
    if size.ndim != 1 or size.dtype not in INT_DTYPES:
        raise TypeError(f"{op_name}: size must be an integer vector, got {size} of type "
                        f"{size.type}")
    if size.type.shape[0] is None:
        raise TypeError(f"{op_name}: the length of the symbolic size {size} is not known; "
                        f"pass ndim= (or use specify_shape) so the output's rank is known")
    if size.dtype != "int64":
        from symgraph.ops.math import cast

        size = cast(size, "int64")
    return size


def _static_size(size):
    """The static entries of a size vector (None where unknown)."""
    if isinstance(size, Constant):
        return tuple(int(s) for s in np.asarray(size.data))
    return (None,) * size.type.shape[0]


def _size_shape(size):
    """The symbolic entries of a size vector, for infer_shape."""
    static = _static_size(size)
    return tuple(constant(s, dtype="int64") if s is not None else size[i]
                 for i, s in enumerate(static))


def _copy_generator(gen):
    """An independent copy: drawing from it leaves ``gen`` untouched."""
    return copy.deepcopy(gen)


# ---------------------------------------------------------------------------
# The ops


class RandomVariable(Op):
    """Base of the random ops: inputs ``(rng, size, *params)``, outputs
    ``(next_rng, sample)``; calling the op returns the sample.

    Subclasses set ``name`` (used in errors), ``param_names`` and implement
    ``rng_fn(generator, params, size)`` with NumPy; ``dtype`` (a prop) is the
    sample's dtype.  The base handles scalar distributions whose parameters
    broadcast elementwise against ``size``.
    """

    __props__ = ("dtype",)
    default_output = 1
    name = "random"
    param_names = ()

    def __init__(self, dtype):
        self.dtype = TensorType(dtype, shape=()).dtype

    def __str__(self):
        return f"{type(self).__name__}{{{self.dtype}}}"

    __repr__ = __str__

    def make_node(self, rng, size, *params):
        rng = as_random_generator(rng, str(self))
        size = normalize_size(size, str(self))
        params = self._make_params(params)
        sample_type = TensorType(self.dtype, shape=self._static_shape(size, params))
        return Apply(self, [rng, size] + params, [rng.type(), sample_type()])

    def _make_params(self, params):
        if len(params) != len(self.param_names):
            raise TypeError(f"{self} takes parameters {', '.join(self.param_names)}, "
                            f"got {len(params)}")
        return [as_tensor_variable(p) for p in params]

    def _static_shape(self, size, params):
        """The sample's static shape: ``size`` when given, else the params'."""
        if size.type.shape[0]:
            return _static_size(size)
        names = ", ".join(self.param_names)
        return broadcast_static_shapes([p.type.shape for p in params],
                                       f"{self}: parameters {names} cannot broadcast")

    def perform(self, node, inputs, output_storage):
        gen, size, params = inputs[0], inputs[1], inputs[2:]
        gen = _copy_generator(gen)
        np_size = tuple(int(s) for s in size) if len(size) else None
        try:
            sample = self.rng_fn(gen, params, np_size)
        except ValueError as exc:
            raise ValueError(f"{self} (size={np_size}, parameter shapes "
                             f"{[np.shape(p) for p in params]}): {exc}") from exc
        output_storage[0][0] = gen
        output_storage[1][0] = np.asarray(sample, dtype=self.dtype)

    def rng_fn(self, gen, params, size):
        raise NotImplementedError(f"{type(self).__name__} has no rng_fn")

    def infer_shape(self, fgraph, node, input_shapes):
        size, params = node.inputs[1], node.inputs[2:]
        if size.type.shape[0]:
            return [None, _size_shape(size)]
        return [None, broadcast_symbolic_shapes(input_shapes[2:],
                                                [p.broadcastable for p in params])]

    def connection_pattern(self, node):
        # The next state depends on the state; the sample is treated as
        # disconnected from everything (see L_op).
        return [[True, False]] + [[False, False] for _ in node.inputs[1:]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for, grad_undefined

        # No gradient flows through a draw: undefined for the generator state,
        # disconnected for size and the distribution parameters (so grad()
        # reports a parameter reached only through samples as disconnected
        # rather than silently returning zero).
        return [grad_undefined(self, 0, inputs[0], "no gradient through a random state")] + \
            [disconnected_grad_for(x) for x in inputs[1:]]

    def R_op(self, inputs, eval_points):
        return [None, None]

    def do_constant_folding(self, fgraph, node):
        return False


class _FloatRV(RandomVariable):
    """A distribution of floats: ``dtype`` (default floatX) must be a float dtype."""

    def __init__(self, dtype="floatX"):
        super().__init__(dtype)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{type(self).__name__}: dtype must be a float dtype, "
                            f"got {self.dtype}")


class UniformRV(_FloatRV):
    """Floats drawn uniformly from ``[low, high)``."""

    name = "uniform"
    param_names = ("low", "high")

    def rng_fn(self, gen, params, size):
        low, high = params
        return gen.uniform(low, high, size)


class NormalRV(_FloatRV):
    """Gaussian samples with mean ``loc`` and standard deviation ``scale``."""

    name = "normal"
    param_names = ("loc", "scale")

    def rng_fn(self, gen, params, size):
        loc, scale = params
        return gen.normal(loc, scale, size)


class BinomialRV(RandomVariable):
    """The number of successes in ``n`` trials of probability ``p``."""

    name = "binomial"
    param_names = ("n", "p")

    def __init__(self, dtype="int64"):
        super().__init__(dtype)

    def rng_fn(self, gen, params, size):
        n, p = params
        return gen.binomial(n, p, size)


class PoissonRV(RandomVariable):
    """Counts of a Poisson distribution of mean ``lam``."""

    name = "poisson"
    param_names = ("lam",)

    def __init__(self, dtype="int64"):
        super().__init__(dtype)

    def rng_fn(self, gen, params, size):
        (lam,) = params
        return gen.poisson(lam, size)


class IntegersRV(RandomVariable):
    """Integers drawn uniformly from ``[low, high)`` (``Generator.integers``)."""

    name = "integers"
    param_names = ("low", "high")

    def __init__(self, dtype="int64"):
        super().__init__(dtype)
        if self.dtype not in INT_DTYPES:
            raise TypeError(f"IntegersRV: dtype must be an integer dtype, got {self.dtype}")

    def _make_params(self, params):
        params = super()._make_params(params)
        for name, p in zip(self.param_names, params):
            if p.dtype not in INT_DTYPES and p.dtype != "bool":
                raise TypeError(f"{self}: {name} must be an integer tensor, got {p} of "
                                f"type {p.type}")
        return params

    def rng_fn(self, gen, params, size):
        low, high = params
        return gen.integers(low, high, size, dtype=self.dtype)


class ChoiceRV(RandomVariable):
    """Draws from the elements of a vector ``a`` (or from ``arange(a)`` when
    ``a`` is an integer scalar), with or without replacement, with optional
    probabilities ``p``.  Inputs: ``(rng, size, a)`` or ``(rng, size, a, p)``;
    the sample has the shape ``size`` (a scalar for an empty size)."""

    __props__ = ("dtype", "replace")
    name = "choice"
    param_names = ("a", "p")

    def __init__(self, dtype, replace=True):
        super().__init__(dtype)
        self.replace = bool(replace)

    def __str__(self):
        return f"ChoiceRV{{{self.dtype}, replace={self.replace}}}"

    __repr__ = __str__

    def _make_params(self, params):
        if len(params) not in (1, 2):
            raise TypeError(f"{self} takes a and optionally p, got {len(params)} parameters")
        a = as_tensor_variable(params[0])
        if a.ndim > 1:
            raise TypeError(f"{self}: a must be an integer scalar or a vector, got {a} "
                            f"with {a.ndim} dimensions")
        if a.ndim == 0 and a.dtype not in INT_DTYPES:
            raise TypeError(f"{self}: a scalar a must be an integer, got {a.type}")
        if a.ndim == 1 and a.dtype != self.dtype or a.ndim == 0 and self.dtype != "int64":
            raise TypeError(f"{self}: the dtype {self.dtype} does not match a ({a.type})")
        if len(params) == 1:
            return [a]
        p = as_tensor_variable(params[1])
        if p.ndim != 1 or p.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self}: p must be a float vector, got {p} of type {p.type}")
        return [a, p]

    def _static_shape(self, size, params):
        return _static_size(size)

    def rng_fn(self, gen, params, size):
        a = params[0]
        if a.ndim == 0:
            a = int(a)
        p = params[1] if len(params) > 1 else None
        return gen.choice(a, size=size, replace=self.replace, p=p)

    def infer_shape(self, fgraph, node, input_shapes):
        return [None, _size_shape(node.inputs[1])]


class PermutationRV(RandomVariable):
    """A random permutation: of ``arange(x)`` for an integer scalar ``x``, else
    of ``x``'s entries along its first axis.  Inputs: ``(rng, x)``."""

    name = "permutation"

    def __init__(self, dtype="int64"):
        super().__init__(dtype)

    def make_node(self, rng, x):
        rng = as_random_generator(rng, str(self))
        x = as_tensor_variable(x)
        if x.ndim == 0:
            if x.dtype not in INT_DTYPES:
                raise TypeError(f"{self}: a scalar argument must be an integer, got {x.type}")
            n = int(x.data) if isinstance(x, Constant) else None
            out_type = TensorType("int64", shape=(n,))
        else:
            out_type = x.type
        if out_type.dtype != self.dtype:
            raise TypeError(f"{self}: the dtype {self.dtype} does not match the output "
                            f"{out_type}")
        return Apply(self, [rng, x], [rng.type(), out_type()])

    def perform(self, node, inputs, output_storage):
        gen, x = inputs
        gen = _copy_generator(gen)
        sample = gen.permutation(int(x) if x.ndim == 0 else x)
        output_storage[0][0] = gen
        output_storage[1][0] = np.asarray(sample, dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        x = node.inputs[1]
        if x.ndim == 0:
            from symgraph.ops.math import cast

            return [None, (cast(x, "int64"),)]
        return [None, tuple(input_shapes[1])]

    def connection_pattern(self, node):
        return [[True, False], [False, False]]
