"""The MRG31k3p generator of L'Ecuyer and Touzin (2000), as Theano's ``rng_mrg``.

A stream's state is six integers: three of the first component, which
follows ``x[n] = (2**22 x[n-2] + (2**7 + 1) x[n-3]) mod m1``, and three of
the second, ``x[n] = (2**15 x[n-1] + (2**15 + 1) x[n-3]) mod m2``.  A sample
is ``(x1 - x2) mod m1`` scaled into (0, 1); it is never 0 or 1.

The state of a random op is an int32 matrix with one stream per row (no
counter: the state alone says what comes next).  Sample ``i`` of a draw comes
from stream ``i % n_streams``, and every stream used advances by one step per
sample, exactly as Theano's ``mrg_uniform``; so the same state gives the same
numbers here and in Theano.  Streams are made ``2**72`` steps apart by the
jump matrices below (``jump``), computed from the recurrences at import.

Also here: the ops that turn uniforms into multinomial counts and into
choices (Theano's ``sandbox.multinomial``).
"""

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["M1", "M2", "jump", "JUMP_SUBSTREAM", "JUMP_STREAM", "mrg_next",
           "MRGUniform", "MultinomialFromUniform", "ChoiceFromUniform"]

M1 = 2147483647  # 2**31 - 1
M2 = 2147462579  # 2**31 - 21069
_A1 = ((0, 4194304, 129), (1, 0, 0), (0, 1, 0))     # first component, one step
_A2 = ((32768, 0, 32769), (1, 0, 0), (0, 1, 0))     # second component, one step


def _matmul_mod(a, b, m):
    return tuple(tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3))
                 for i in range(3))


def _power_of_two_steps(a, log2, m):
    for _ in range(log2):
        a = _matmul_mod(a, a, m)
    return a


#: ``(A1**(2**72) mod m1, A2**(2**72) mod m2)``: from a stream to its next substream.
JUMP_SUBSTREAM = (_power_of_two_steps(_A1, 72, M1), _power_of_two_steps(_A2, 72, M2))
#: The same for ``2**134`` steps: from one stream (a draw) to the next.
JUMP_STREAM = (_power_of_two_steps(_A1, 134, M1), _power_of_two_steps(_A2, 134, M2))


def jump(state, matrices):
    """``state`` (six ints) moved ahead by ``matrices`` (``JUMP_SUBSTREAM`` or
    ``JUMP_STREAM``), as a tuple of Python ints (exact: no overflow)."""
    s = [int(v) for v in state]
    out = []
    for a, part, m in ((matrices[0], s[:3], M1), (matrices[1], s[3:], M2)):
        out.extend(sum(a[i][k] * part[k] for k in range(3)) % m for i in range(3))
    return tuple(out)


def mrg_next(states):
    """Advance every row of ``states`` (int64, shape ``(k, 6)``) by one step in
    place and return the row's raw output ``(x1 - x2) mod m1`` in [1, m1]."""
    x11, x12, x13, x21, x22, x23 = (states[:, i].copy() for i in range(6))
    y1 = (4194304 * x12 + 129 * x13) % M1      # < 2**53: exact in int64
    y2 = (32768 * x21 + 32769 * x23) % M2
    for i, column in enumerate((y1, x11, x12, y2, x21, x22)):
        states[:, i] = column
    diff = y1 - y2
    return np.where(diff <= 0, diff + M1, diff)


# Theano's scalings of the raw output per dtype: float64 divides by 2**31;
# float32 uses a factor just below 2**-31 so that m1 never rounds to 1.0;
# float16 keeps 15 bits, offset by one so that 0 cannot occur.
_SCALE = {"float64": (0xFFFFFFFF, 0, 4.656612873077392578125e-10),
          "float32": (0xFFFFFFFF, 0, float(np.float32(4.6566126e-10))),
          "float16": (0x7FFF, 1, float(np.float16(3.0458e-05)))}


class MRGUniform(Op):
    """Uniform floats in (0, 1) from MRG31k3p stream states.

    Inputs ``(rstate, size)``: an int32 matrix with one stream state per row
    (6 columns) and an int64 vector of static length; outputs
    ``(new_rstate, sample)``.  The input state is never modified.
    """

    __props__ = ("dtype",)
    default_output = 1

    def __init__(self, dtype):
        self.dtype = TensorType(dtype, shape=()).dtype
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"MRGUniform: dtype must be a float dtype, got {self.dtype}")

    def make_node(self, rstate, size):
        rstate = as_tensor_variable(rstate)
        if rstate.ndim != 2 or rstate.dtype != "int32":
            raise TypeError(f"{self}: the state must be an int32 matrix (streams x 6), "
                            f"got {rstate} of type {rstate.type}")
        size = as_tensor_variable(size)
        if size.ndim != 1 or size.dtype not in INT_DTYPES or size.type.shape[0] is None:
            raise TypeError(f"{self}: size must be an integer vector of known length, got "
                            f"{size} of type {size.type} (give ndim=)")
        if isinstance(size, Constant):
            shape = tuple(int(s) for s in size.data)
        else:
            shape = (None,) * size.type.shape[0]
        return Apply(self, [rstate, size], [rstate.type(), TensorType(self.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        rstate, size = inputs
        shape = tuple(int(s) for s in size)
        n = int(np.prod(shape, dtype=np.int64))
        if rstate.ndim != 2 or rstate.shape[1] != 6 or rstate.shape[0] == 0:
            raise ValueError(f"{self}: the state must have shape (streams, 6), got "
                             f"{rstate.shape}")
        states = rstate.astype(np.int64)
        n_streams = states.shape[0]
        raw = np.empty(n, dtype=np.int64)
        for start in range(0, n, n_streams):
            # the last round advances only the streams it uses, as Theano does
            used = min(n_streams, n - start)
            raw[start:start + used] = mrg_next(states[:used])
        mask, offset, scale = _SCALE[self.dtype]
        sample = ((raw & mask) + offset) * scale
        output_storage[0][0] = states.astype(np.int32)
        output_storage[1][0] = sample.astype(self.dtype).reshape(shape)

    def infer_shape(self, fgraph, node, input_shapes):
        size = node.inputs[1]
        return [input_shapes[0], tuple(size[i] for i in range(size.type.shape[0]))]

    def connection_pattern(self, node):
        return [[True, False], [False, False]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import grad_undefined

        return [grad_undefined(self, i, x, "no gradient through random sampling")
                for i, x in enumerate(inputs)]

    def R_op(self, inputs, eval_points):
        return [None, None]

    def do_constant_folding(self, fgraph, node):
        return False


def _check_from_uniform_inputs(op, pvals, unis, n):
    pvals, unis, n = as_tensor_variable(pvals), as_tensor_variable(unis), as_tensor_variable(n)
    if pvals.ndim != 2 or pvals.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: pvals must be a float matrix (one distribution per row), "
                        f"got {pvals} of type {pvals.type}")
    if unis.ndim != 1 or unis.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: unis must be a float vector, got {unis.type}")
    if n.ndim != 0 or n.dtype not in INT_DTYPES:
        raise TypeError(f"{op}: n must be an integer scalar, got {n} of type {n.type}")
    return pvals, unis, n


def _first_above(cumulative, unis):
    """Per row, the first column whose cumulative probability exceeds the
    row's uniform, and whether there is one (rows summing to less than the
    uniform have none)."""
    above = cumulative > unis[:, None]
    return above.argmax(axis=1), above.any(axis=1)


class MultinomialFromUniform(Op):
    """Counts of ``n`` draws from each row of ``pvals``, using the uniforms
    ``unis`` (``n * rows`` of them; draw ``c`` of row ``r`` uses
    ``unis[c * rows + r]``).  The output has ``pvals``' shape."""

    __props__ = ("dtype",)

    def __init__(self, dtype="int64"):
        self.dtype = TensorType(dtype, shape=()).dtype

    def make_node(self, pvals, unis, n=1):
        pvals, unis, n = _check_from_uniform_inputs(self, pvals, unis, n)
        return Apply(self, [pvals, unis, n], [TensorType(self.dtype, shape=pvals.type.shape)()])

    def perform(self, node, inputs, output_storage):
        pvals, unis, n = inputs
        rows = pvals.shape[0]
        n = int(n)
        if unis.shape[0] != rows * n:
            raise ValueError(f"{self}: {unis.shape[0]} uniforms for {rows} rows and "
                             f"n={n} (need rows * n)")
        cumulative = np.cumsum(pvals, axis=1, dtype=np.float64)
        out = np.zeros(pvals.shape, dtype=self.dtype)
        for c in range(n):
            col, found = _first_above(cumulative, unis[c * rows:(c + 1) * rows])
            np.add.at(out, (np.nonzero(found)[0], col[found]), 1)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import grad_undefined

        return [grad_undefined(self, i, x, "no gradient through random sampling")
                for i, x in enumerate(inputs)]


class ChoiceFromUniform(MultinomialFromUniform):
    """``n`` category indices per row of ``pvals`` (output ``(rows, n)``),
    using ``unis`` as :class:`MultinomialFromUniform`.  Without replacement a
    chosen category's probability becomes 0 and the row is renormalised;
    a draw that finds no category (a row summing to less than its uniform)
    gives -1."""

    __props__ = ("dtype", "replace")

    def __init__(self, dtype="int64", replace=False):
        super().__init__(dtype)
        self.replace = bool(replace)

    def make_node(self, pvals, unis, n=1):
        pvals, unis, n = _check_from_uniform_inputs(self, pvals, unis, n)
        cols = int(n.data) if isinstance(n, Constant) else None
        out = TensorType(self.dtype, shape=(pvals.type.shape[0], cols))
        return Apply(self, [pvals, unis, n], [out()])

    def perform(self, node, inputs, output_storage):
        pvals, unis, n = inputs
        rows, n = pvals.shape[0], int(n)
        if unis.shape[0] != rows * n:
            raise ValueError(f"{self}: {unis.shape[0]} uniforms for {rows} rows and "
                             f"n={n} (need rows * n)")
        if not self.replace and n > pvals.shape[1]:
            raise ValueError(f"{self}: cannot draw {n} categories without replacement "
                             f"from {pvals.shape[1]}")
        p = np.array(pvals, dtype=np.float64)
        out = np.full((rows, n), -1, dtype=self.dtype)
        every_row = np.arange(rows)
        for c in range(n):
            col, found = _first_above(np.cumsum(p, axis=1), unis[c * rows:(c + 1) * rows])
            out[found, c] = col[found]
            if not self.replace:
                p[every_row[found], col[found]] = 0.0
                with np.errstate(invalid="ignore", divide="ignore"):
                    p /= p.sum(axis=1, keepdims=True)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import cast

        return [(input_shapes[0][0], cast(node.inputs[2], "int64"))]

