"""Checking symbolic gradients against finite differences (``verify_grad``).

``verify_grad(fun, pt, rng=...)`` builds symbolic inputs of the types of the
arrays in ``pt``, takes a random projection of ``fun``'s output (so that one
scalar summarizes it: ``sum(out * r)``), and compares the symbolic gradient of
that projection with central finite differences of the compiled function.
"""

import numpy as np

__all__ = ["GradientError", "numeric_grad", "verify_grad"]

# Tolerances on the gradient, per input dtype (Theano's).
_TYPE_TOL = {"float16": 5e-2, "float32": 1e-2, "float64": 1e-4}


class GradientError(Exception):
    """The symbolic gradient and the finite-difference one disagree.

    ``arg``: the index of the input; ``err_pos``: the flat position of the
    worst element; ``val1``/``val2``: the analytic and numeric values there;
    ``analytic``/``numeric``: the two whole gradients.
    """

    def __init__(self, arg, err_pos, shape, val1, val2, abs_err, rel_err, abs_tol, rel_tol,
                 analytic=None, numeric=None):
        super().__init__(arg, err_pos, shape, val1, val2, abs_err, rel_err, abs_tol, rel_tol)
        self.arg = arg
        self.err_pos = err_pos
        self.shape = shape
        self.val1 = val1
        self.val2 = val2
        self.abs_err = abs_err
        self.rel_err = rel_err
        self.abs_tol = abs_tol
        self.rel_tol = rel_tol
        self.analytic = analytic
        self.numeric = numeric

    def __str__(self):
        index = np.unravel_index(self.err_pos, self.shape) if self.shape else ()
        text = (f"the gradient with respect to input {self.arg} (shape {self.shape}) does "
                f"not match finite differences: at index {tuple(int(i) for i in index)} "
                f"the symbolic gradient is {self.val1!r} and the numeric one {self.val2!r}; "
                f"max abs error {self.abs_err:.3g} (tolerance {self.abs_tol:g}), max rel "
                f"error {self.rel_err:.3g} (tolerance {self.rel_tol:g})")
        if self.analytic is not None:
            text += (f"\nsymbolic gradient:\n{_show(self.analytic)}"
                     f"\nnumeric gradient:\n{_show(self.numeric)}")
        return text


def _show(array):
    return np.array2string(np.asarray(array), threshold=200, precision=6)


class numeric_grad:
    """The gradient of a scalar function of arrays by central finite differences.

    ``f(*arrays) -> scalar``; ``pt``: an array or a list of arrays (``gf``
    has the same form); ``eps``: the step (default by the most precise input
    dtype: 1e-7 for float64, 3e-4 for float32, 1e-1 for float16).
    ``out_type`` is accepted for Theano compatibility and unused.  ``f`` must
    not keep references to the arrays it is given (they change between calls).
    """

    type_eps = {"float64": 1e-7, "float32": 3e-4, "float16": 1e-1}

    def __init__(self, f, pt, eps=None, out_type=None):
        packed = not isinstance(pt, (list, tuple))
        points = [np.array(p) for p in ([pt] if packed else pt)]
        if eps is None:
            eps = max(self.type_eps.get(str(p.dtype), 1e-7) for p in points)
        self.eps = eps
        self.gf = []
        for p in points:
            g = np.zeros(p.shape, dtype="float64")
            flat = p.reshape(-1)  # a view: p is perturbed in place, then restored
            for j in range(p.size):
                original = flat[j]
                flat[j] = original + eps
                high, f_high = float(flat[j]), float(f(*points))
                flat[j] = original - eps
                low, f_low = float(flat[j]), float(f(*points))
                flat[j] = original
                # Divide by the step actually taken, after rounding to p's dtype.
                g.flat[j] = (f_high - f_low) / (high - low)
            self.gf.append(g)
        if packed:
            self.gf = self.gf[0]

    @staticmethod
    def abs_rel_err(a, b):
        """Element-wise absolute error and error relative to ``|a| + |b|``."""
        a = np.asarray(a, dtype="float64")
        b = np.asarray(b, dtype="float64")
        with np.errstate(invalid="ignore"):
            abs_err = np.abs(a - b)
            rel_err = abs_err / np.maximum(np.abs(a) + np.abs(b), 1e-8)
        # A non-finite value anywhere counts as a total mismatch, unless both agree.
        bad = ~(np.isfinite(a) & np.isfinite(b)) & ~((a == b) | (np.isnan(a) & np.isnan(b)))
        abs_err = np.where(bad, np.inf, np.nan_to_num(abs_err))
        rel_err = np.where(bad, np.inf, np.nan_to_num(rel_err))
        return abs_err, rel_err

    def abs_rel_errors(self, g_pt):
        """[(abs_err, rel_err)] for each input, against the gradients ``g_pt``."""
        gf = self.gf if isinstance(self.gf, list) else [self.gf]
        g_pt = g_pt if isinstance(g_pt, (list, tuple)) else [g_pt]
        if len(g_pt) != len(gf):
            raise ValueError(f"expected {len(gf)} gradients, got {len(g_pt)}")
        out = []
        for i, (a, b) in enumerate(zip(g_pt, gf)):
            if np.shape(a) != np.shape(b):
                raise ValueError(f"the symbolic gradient of input {i} has shape "
                                 f"{np.shape(a)}, but the input has shape {np.shape(b)}")
            out.append(self.abs_rel_err(a, b))
        return out

    def max_err(self, g_pt, abs_tol, rel_tol):
        """(input index, flat position, abs error, rel error) of the worst element,
        the worst being the one whose smaller error relative to its tolerance is
        largest (an element fails only when both errors exceed their tolerance)."""
        best = (0, 0, 0.0, 0.0)
        best_scaled = -1.0
        for arg, (abs_err, rel_err) in enumerate(self.abs_rel_errors(g_pt)):
            if abs_err.size == 0:
                continue
            with np.errstate(invalid="ignore"):
                scaled = np.minimum(abs_err / abs_tol, rel_err / rel_tol).ravel()
            pos = int(np.argmax(scaled))
            if scaled[pos] > best_scaled:
                best_scaled = scaled[pos]
                best = (arg, pos, float(abs_err.flat[pos]), float(rel_err.flat[pos]))
        return best


def _as_rng(rng):
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, (int, np.integer)):
        return np.random.default_rng(int(rng))
    if isinstance(rng, (np.random.Generator, np.random.RandomState)):
        return rng
    if hasattr(rng, "random_sample"):  # the numpy.random module, as Theano's tests pass
        return rng
    raise TypeError(f"verify_grad: rng must be a numpy Generator, a RandomState, the "
                    f"numpy.random module or an int seed, got {type(rng).__name__}")


def _uniform(rng, shape):
    if isinstance(rng, np.random.Generator):
        return rng.random(shape)
    return rng.random_sample(shape)


def _is_debug_mode(mode):
    return type(mode).__name__ == "DebugMode" or mode == "DebugMode"


def verify_grad(fun, pt, n_tests=2, rng=None, eps=None, out_type=None, abs_tol=None,
                rel_tol=None, mode=None, cast_to_output_type=False, no_debug_ref=True):
    """Check ``fun``'s symbolic gradient at ``pt`` against finite differences.

    ``fun``: called with one symbolic tensor per array of ``pt`` (an Op works
    too), returns one tensor.  ``pt``: a list of float arrays.  ``rng``: a
    NumPy Generator, RandomState, the ``numpy.random`` module or an int seed
    for the random projections (None: seed 0).  ``n_tests``: how many projections to try.  ``eps``: the finite
    difference step (see numeric_grad).  ``abs_tol``/``rel_tol``: by default
    the loosest of the inputs' dtypes (float64 1e-4, float32 1e-2, float16
    5e-2).  ``mode``: the compile mode; with ``no_debug_ref`` a DebugMode is
    used only for the symbolic gradient, not for the many finite-difference
    calls.  ``cast_to_output_type`` and ``out_type`` are accepted for Theano
    compatibility (the projection is always in the output's float dtype, and
    the projected sum is always computed in float64).

    Raises GradientError, naming the input and the worst element, when an
    element differs by more than both tolerances.
    """
    from symgraph.compile.function import function
    from symgraph.gradient import grad
    from symgraph.tensor.basic import as_tensor_variable
    from symgraph.tensor.type import TensorType

    if not isinstance(pt, (list, tuple)):
        raise TypeError("verify_grad: pt must be a list (or tuple) of arrays, one per input")
    pt = [np.array(p) for p in pt]
    for i, p in enumerate(pt):
        if p.dtype.kind != "f":
            raise TypeError(f"verify_grad works only with float inputs, but input {i} has "
                            f"dtype {p.dtype}")
    if abs_tol is None:
        abs_tol = max(_TYPE_TOL[str(p.dtype)] for p in pt)
    if rel_tol is None:
        rel_tol = max(_TYPE_TOL[str(p.dtype)] for p in pt)
    rng = _as_rng(rng)

    inputs = [TensorType(str(p.dtype), shape=tuple(1 if s == 1 else None for s in p.shape))(
        f"input {i}") for i, p in enumerate(pt)]
    out = fun(*inputs)
    if isinstance(out, (list, tuple)):
        raise NotImplementedError("verify_grad: fun returned several outputs; check them "
                                  "one at a time")
    out = as_tensor_variable(out)
    proj_dtype = out.type.dtype if out.type.dtype.startswith("float") else "float64"
    projection = TensorType(proj_dtype, shape=out.type.shape)("random_projection")
    symbolic = grad(None, inputs, known_grads={out: projection}, disconnected_inputs="ignore")

    cost_mode = None if (no_debug_ref and _is_debug_mode(mode)) else mode
    forward = function(inputs, out, mode=cost_mode, on_unused_input="ignore",
                       name="verify_grad forward")
    grad_fn = function(inputs + [projection], symbolic, mode=mode, on_unused_input="ignore",
                       name="verify_grad symbolic gradient")
    out_shape = np.shape(forward(*[p.copy() for p in pt]))

    for _ in range(n_tests):
        # Not too small: tiny weights would lose the numeric gradient's precision.
        proj = (_uniform(rng, out_shape) + 0.5).astype(proj_dtype)

        def cost(*values):
            return np.sum(proj.astype("float64") * np.asarray(forward(*values), "float64"))

        numeric = numeric_grad(cost, [p.copy() for p in pt], eps)
        analytic = [np.asarray(g) for g in grad_fn(*[p.copy() for p in pt], proj)]
        arg, pos, abs_err, rel_err = numeric.max_err(analytic, abs_tol, rel_tol)
        if abs_err > abs_tol and rel_err > rel_tol:
            raise GradientError(arg, pos, analytic[arg].shape, analytic[arg].flat[pos],
                                numeric.gf[arg].flat[pos], abs_err, rel_err, abs_tol,
                                rel_tol, analytic=analytic[arg], numeric=numeric.gf[arg])


verify_grad.E_grad = GradientError
