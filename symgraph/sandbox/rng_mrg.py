"""MRG_RandomStreams: Theano's recommended random streams, on MRG31k3p.

>>> from symgraph.sandbox.rng_mrg import MRG_RandomStreams
>>> srng = MRG_RandomStreams(seed=1234)
>>> mask = srng.binomial(size=(100, 50), p=0.8, dtype="float32")
>>> noise = srng.normal((100, 50), std=0.1)

The generator and the way streams are laid out are Theano's, so the same seed
gives the same numbers as Theano's ``MRG_RandomStreams``: the stream object
holds a 6-integer state (``rstate``); every draw takes the next *stream*
(``2**134`` steps further) and splits it into ``nstreams`` *substreams*
(``2**72`` steps apart), which become the rows of an int32 shared matrix.
That matrix is the draw's state: each compiled call advances it through its
``default_update``, and ``seed()`` rebuilds every state from a new seed.

Samples are built from uniforms as in Theano: ``normal`` by Box-Muller,
``binomial`` by comparing uniforms with ``p``, ``multinomial`` and ``choice``
by inverting each row's cumulative probabilities.
"""

import warnings

import numpy as np

from symgraph.graph.basic import Op, Variable
from symgraph.ops import mrg
from symgraph.tensor.basic import as_tensor_variable, constant

__all__ = ["MRG_RandomStreams", "guess_n_streams", "multMatVect", "DotModulo"]

_MAX_STREAMS = 60 * 256  # Theano's cap (sized for GPUs of its day)


def guess_n_streams(size, warn=False):
    """Theano's number of substreams for a draw of ``size``: a sixth of the
    samples (all of them below 7), at most 15360; 15360 when ``size`` is
    symbolic (with a warning when ``warn``)."""
    if isinstance(size, (tuple, list)) and all(_is_int(s) for s in size):
        total = int(np.prod([int(s) for s in size], dtype=np.int64))
        return min(total // 6 if total > 6 else total, _MAX_STREAMS)
    if warn:
        warnings.warn(f"MRG_RandomStreams cannot tell the number of samples from size "
                      f"{size}; using {_MAX_STREAMS} streams", stacklevel=3)
    return _MAX_STREAMS


def _dot_mod(a, v, m):
    """``(a @ v) % m`` in exact integer arithmetic: the products of 31-bit
    entries and their sums can overflow int64."""
    a = np.asarray(a).astype(object)
    v = np.asarray(v).astype(object)
    return np.array([int(x) % int(m) for x in a.dot(v)], dtype=object)


def multMatVect(v, A, m1, B, m2):
    """Theano's MRG jump: the first half of the state ``v`` (six ints)
    multiplied by the matrix ``A`` modulo ``m1``, the second half by ``B``
    modulo ``m2``; an int32 vector of six entries.  With ``A, B`` the
    matrices of ``ops.mrg.JUMP_STREAM`` and ``m1, m2`` ``ops.mrg.M1, M2``, it
    moves a state to the next stream."""
    v = np.asarray(v)
    if v.shape != (6,):
        raise ValueError(f"multMatVect: v must be a state of 6 ints, got shape {v.shape}")
    first, second = _dot_mod(A, v[:3], m1), _dot_mod(B, v[3:], m2)
    return np.concatenate([first, second]).astype(np.int32)


class DotModulo(Op):
    """Theano's op behind ``multMatVect``: ``DotModulo()(A, s, m, A2, s2,
    m2)`` is ``concatenate([(A @ s) % m, (A2 @ s2) % m2])`` with ``s``'s
    dtype, computed exactly (NumPy ``perform``; no gradient)."""

    __props__ = ()

    def make_node(self, A, s, m, A2, s2, m2):
        from symgraph.graph.basic import Apply
        from symgraph.tensor.type import INT_DTYPES, TensorType

        inputs = [as_tensor_variable(v) for v in (A, s, m, A2, s2, m2)]
        for name, var, ndim in zip(("A", "s", "m", "A2", "s2", "m2"), inputs,
                                   (2, 1, 0, 2, 1, 0)):
            if var.ndim != ndim or var.dtype not in INT_DTYPES:
                raise TypeError(f"DotModulo: {name} must be a {ndim}-d integer tensor, got "
                                f"{var} of type {var.type}")
        return Apply(self, inputs, [TensorType(inputs[1].dtype, shape=(None,))()])

    def perform(self, node, inputs, output_storage):
        A, s, m, A2, s2, m2 = inputs
        out = np.concatenate([_dot_mod(A, s, m), _dot_mod(A2, s2, m2)])
        output_storage[0][0] = out.astype(node.outputs[0].dtype)

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import grad_undefined

        return [grad_undefined(self, i, x, "integer modular arithmetic")
                for i, x in enumerate(inputs)]


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _substreams(start, count):
    """``count`` states, the first ``start``, each ``2**72`` steps after the
    previous one (the jump unrolled: this runs for every draw)."""
    (a, b, c), (d, e, f) = mrg.JUMP_SUBSTREAM[0], mrg.JUMP_SUBSTREAM[1]
    m1, m2 = mrg.M1, mrg.M2
    x1, x2, x3, y1, y2, y3 = (int(v) for v in start)
    rows = []
    for _ in range(count):
        rows.append((x1, x2, x3, y1, y2, y3))
        x1, x2, x3 = ((a[0] * x1 + a[1] * x2 + a[2] * x3) % m1,
                      (b[0] * x1 + b[1] * x2 + b[2] * x3) % m1,
                      (c[0] * x1 + c[1] * x2 + c[2] * x3) % m1)
        y1, y2, y3 = ((d[0] * y1 + d[1] * y2 + d[2] * y3) % m2,
                      (e[0] * y1 + e[1] * y2 + e[2] * y3) % m2,
                      (f[0] * y1 + f[1] * y2 + f[2] * y3) % m2)
    return np.array(rows, dtype=np.int32)


class MRG_RandomStreams:
    """Random streams on the MRG31k3p generator (Theano's ``rng_mrg``).

    ``seed``: an int in ``[1, 2147462579)``, used for all six state words, or
    six ints (the first three below ``2**31 - 1`` and not all 0, the last
    three below 2147462579 and not all 0).  ``state_updates`` lists
    ``(state, next_state, size, nstreams)`` per draw, as Theano's.
    """

    def __init__(self, seed=12345):
        self.state_updates = []
        self.default_instance_seed = seed
        self.set_rstate(seed)

    def updates(self):
        """The ``(state, next_state, size, nstreams)`` entries of every draw."""
        return list(self.state_updates)

    # -- seeding -------------------------------------------------------------

    def set_rstate(self, seed):
        """Make ``seed`` (see the class) the start of the next draw's stream."""
        if _is_int(seed):
            if seed == 0:
                raise ValueError("MRG_RandomStreams: the seed must not be 0")
            if not 0 < seed < mrg.M2:
                raise ValueError(f"MRG_RandomStreams: an int seed must be in [1, {mrg.M2}), "
                                 f"got {seed}")
            self.rstate = np.full(6, seed, dtype=np.int32)
            return
        if not isinstance(seed, (tuple, list, np.ndarray)) or len(seed) != 6:
            raise TypeError(f"MRG_RandomStreams: the seed must be one int or six ints, "
                            f"got {seed!r}")
        words = [int(v) for v in seed]
        for part, bound in ((words[:3], mrg.M1), (words[3:], mrg.M2)):
            if not all(0 <= w < bound for w in part):
                raise ValueError(f"MRG_RandomStreams: seed words {part} must be in "
                                 f"[0, {bound})")
            if not any(part):
                raise ValueError(f"MRG_RandomStreams: seed words {part} must not all be 0")
        self.rstate = np.asarray(words, dtype=np.int32)

    def seed(self, seed=None):
        """Restart from ``seed`` (the constructor's when None): every state made
        so far gets the substreams a fresh ``MRG_RandomStreams(seed)`` would
        give it, in the order the draws were made."""
        self.set_rstate(self.default_instance_seed if seed is None else seed)
        for state, _, size, nstreams in self.state_updates:
            count = self.n_streams(size) if nstreams is None else nstreams
            state.set_value(self.get_substream_rstates(count, "float64"), borrow=True)

    def inc_rstate(self):
        """Move ``rstate`` to the start of the next stream (``2**134`` steps)."""
        self.rstate = np.asarray(mrg.jump(self.rstate, mrg.JUMP_STREAM), dtype=np.int32)

    def get_substream_rstates(self, n_streams, dtype=None, inc_rstate=True):
        """An int32 ``(n_streams, 6)`` matrix of substream states starting at
        ``rstate``, ``2**72`` steps apart; then ``inc_rstate()`` unless told
        not to.  ``dtype`` is accepted for Theano's signature and unused."""
        n_streams = int(n_streams)
        if n_streams <= 0:
            raise ValueError(f"MRG_RandomStreams: nstreams must be positive, got {n_streams}")
        states = _substreams(self.rstate, n_streams)
        if inc_rstate:
            self.inc_rstate()
        return states

    def n_streams(self, size):
        """The number of substreams a draw of ``size`` gets by default."""
        return guess_n_streams(size)

    def pretty_return(self, node_rstate, new_rstate, sample, size, nstreams):
        """Record a draw: ``sample.rstate``, ``sample.update``, the state's
        ``default_update`` and an entry of ``state_updates``."""
        sample.rstate = node_rstate
        sample.update = (node_rstate, new_rstate)
        self.state_updates.append((node_rstate, new_rstate, size, nstreams))
        node_rstate.default_update = new_rstate
        return sample

    # -- distributions -------------------------------------------------------

    def uniform(self, size, low=0.0, high=1.0, ndim=None, dtype=None, nstreams=None,
                **kwargs):
        """Floats uniform in ``(low, high)`` (neither bound is reached).

        ``size``: a tuple of positive ints or symbolic scalars, or a symbolic
        integer vector (``ndim`` gives its length when not static).  ``dtype``
        defaults to ``floatX`` upcast with symbolic ``low``/``high``.
        ``nstreams``: the number of substreams (:func:`guess_n_streams`).
        """
        from symgraph.compile.shared import shared
        from symgraph.tensor.random import _float_dtype, _floats

        _target_only(kwargs, "uniform")
        dtype = _float_dtype(dtype, low, high)
        low, high = (_cast(v, dtype) for v in _floats(dtype, low, high))
        size_vector = _size_vector(size, ndim)
        count = self.n_streams(size) if nstreams is None else nstreams
        state = shared(self.get_substream_rstates(count, dtype), name="mrg_rstate")
        state.tag.is_rng = True
        new_state, u = mrg.MRGUniform(dtype).make_node(state, size_vector).outputs
        u = self.pretty_return(state, new_state, u, size, nstreams)
        if _is_value(low, 0) and _is_value(high, 1):
            return u
        out = u * (high - low) + low
        if out.ndim != u.ndim:
            raise ValueError(f"MRG_RandomStreams.uniform: low and high ({low.ndim}-d, "
                             f"{high.ndim}-d) have more dimensions than size; give a "
                             f"size of their shape")
        return out

    def binomial(self, size=None, n=1, p=0.5, ndim=None, dtype="int64", nstreams=None,
                 **kwargs):
        """The number of successes in ``n`` trials of probability ``p``: for
        ``n=1``, a uniform compared with ``p`` (Theano's draw, the same
        numbers); for larger ``n`` (Theano raised NotImplementedError), ``n``
        uniforms per sample, compared with ``p`` and counted.  ``n``: an int
        or an int scalar; ``p`` broadcasts against ``size``."""
        from symgraph.ops.math import cast

        if size is None:
            raise TypeError("MRG_RandomStreams.binomial needs size")
        p = as_tensor_variable(p)
        if _is_int(n) and n == 1:
            u = self.uniform(size=size, ndim=ndim, nstreams=nstreams, **kwargs)
            return cast(u < p, dtype)
        if _is_int(n) and n < 0:
            raise ValueError(f"MRG_RandomStreams.binomial: n must be >= 0, got {n}")
        if not _is_int(n):
            n = as_tensor_variable(n)
            if n.ndim != 0 or not n.dtype.startswith(("int", "uint")):
                raise TypeError(f"MRG_RandomStreams.binomial: n must be an int or an int "
                                f"scalar, got {n} of type {n.type}")
        # One more axis, of the n trials, after size's axes.
        trials_size = _append_axis(size, ndim, n)
        if nstreams is None and isinstance(trials_size, tuple):
            nstreams = guess_n_streams(trials_size)
        u = self.uniform(size=trials_size, nstreams=nstreams, **kwargs)
        success = u < p.dimshuffle(list(range(p.ndim)) + ["x"])
        return cast(success.sum(axis=-1), dtype)

    def multinomial(self, size=None, n=1, pvals=None, ndim=None, dtype="int64",
                    nstreams=None, **kwargs):
        """Counts of ``n`` draws from each row of the matrix ``pvals`` (an
        output of ``pvals``' shape).  ``size`` and ``ndim`` must be None: the
        rows of ``pvals`` say how many draws are made.  ``pvals`` is not
        checked (rows should be non-negative and sum to 1)."""
        from symgraph.ops.math import mul

        pvals = self._check_matrix(pvals, size, ndim, "multinomial", "pvals")
        count = mul(pvals.shape[0], as_tensor_variable(n))
        unis = self.uniform(size=(count,), ndim=1, nstreams=nstreams, **kwargs)
        return mrg.MultinomialFromUniform(dtype)(pvals, unis, n)

    def choice(self, size=1, a=None, replace=True, p=None, ndim=None, dtype="int64",
               nstreams=None, **kwargs):
        """``size`` category indices for each row of the matrix ``p`` (an
        output of shape ``(p.shape[0], size)``), with or without replacement.

        ``a`` must be None: the categories are ``0 .. p.shape[1] - 1``.
        Theano implemented only ``replace=False``; both work here.
        """
        from symgraph.ops.math import mul

        if a is not None:
            raise TypeError("MRG_RandomStreams.choice: a must be None (the values drawn "
                            "are 0 .. p.shape[1] - 1)")
        if p is None:
            raise TypeError("MRG_RandomStreams.choice needs p, a matrix of probabilities")
        p = self._check_matrix(p, None, ndim, "choice", "p")
        count = mul(p.shape[0], as_tensor_variable(size))
        unis = self.uniform(size=(count,), ndim=1, nstreams=nstreams, **kwargs)
        return mrg.ChoiceFromUniform(dtype, replace=replace)(p, unis, size)

    def multinomial_wo_replacement(self, size=None, n=1, pvals=None, ndim=None,
                                   dtype="int64", nstreams=None, **kwargs):
        """Theano's deprecated name for ``choice(size=n, replace=False, p=pvals)``."""
        warnings.warn("MRG_RandomStreams.multinomial_wo_replacement() is deprecated; use "
                      "choice(size=n, replace=False, p=pvals)", DeprecationWarning,
                      stacklevel=2)
        if size is not None:
            raise ValueError("multinomial_wo_replacement: size must be None (n gives the "
                             "number of draws per row)")
        return self.choice(size=n, a=None, replace=False, p=pvals, ndim=ndim, dtype=dtype,
                           nstreams=nstreams, **kwargs)

    def normal(self, size, avg=0.0, std=1.0, ndim=None, dtype=None, nstreams=None,
               truncate=False, **kwargs):
        """Gaussian samples of mean ``avg`` and standard deviation ``std``,
        by the Box-Muller transform of uniforms.  ``truncate=True`` redraws
        the samples beyond two standard deviations (so the result's standard
        deviation is less than ``std``; see :meth:`truncated_normal`)."""
        import symgraph.tensor as T
        from symgraph.tensor.random import _float_dtype, _floats

        dtype = _float_dtype(dtype, avg, std)
        avg, std = (_cast(v, dtype) for v in _floats(dtype, avg, std))
        size = _size_vector(size, ndim)
        n_odd = T.prod(size, dtype="int64")
        n_even = n_odd + n_odd % 2
        uniform = self.uniform((n_even,), ndim=1, dtype=dtype, nstreams=nstreams, **kwargs)
        half = n_even // 2
        u1, u2 = uniform[:half], uniform[half:]
        radius = T.sqrt(-2.0 * T.log(u1))
        theta = constant(np.asarray(2.0 * np.pi, dtype=dtype)) * u2
        cos_theta, sin_theta = T.cos(theta), T.sin(theta)
        z0, z1 = radius * cos_theta, radius * sin_theta
        if truncate:
            samples = self._redraw_tails(z0, z1, cos_theta, sin_theta, dtype, nstreams,
                                         kwargs)
        else:
            samples = T.join(0, z0, z1)
        samples = T.reshape(samples[:n_odd], size, ndim=size.type.shape[0])
        return samples * std + avg

    def _redraw_tails(self, z0, z1, cos_theta, sin_theta, dtype, nstreams, kwargs):
        # Theano's scheme: keep the pairs' angles, redraw the radius from
        # uniforms in (e**-2, 1), which gives radii below 2.
        import symgraph.tensor as T

        bad0, bad1 = (z0 < -2.0) | (z0 > 2.0), (z1 < -2.0) | (z1 > 2.0)
        keep0, keep1 = z0[T.nonzero(~bad0)], z1[T.nonzero(~bad1)]
        fix0, fix1 = T.nonzero(bad0)[0], T.nonzero(bad1)[0]
        n0 = fix0.shape[0]
        u_fix = self.uniform((n0 + fix1.shape[0],), low=float(np.exp(-2.0)), high=1.0,
                             ndim=1, dtype=dtype, nstreams=nstreams, **kwargs)
        r_fix = T.sqrt(-2.0 * T.log(u_fix))
        return T.join(0, keep0, r_fix[:n0] * cos_theta[fix0], keep1,
                      r_fix[n0:] * sin_theta[fix1])

    def truncated_normal(self, size, avg=0.0, std=1.0, ndim=None, dtype=None,
                         nstreams=None, **kwargs):
        """Normal samples cut at two standard deviations, scaled so that their
        standard deviation is ``std``."""
        # the standard deviation of a unit normal truncated to [-2, 2]
        std = std / constant(0.87962566103423978)
        return self.normal(size=size, avg=avg, std=std, ndim=ndim, dtype=dtype,
                           nstreams=nstreams, truncate=True, **kwargs)

    @staticmethod
    def _check_matrix(pvals, size, ndim, method, name):
        if pvals is None:
            raise TypeError(f"MRG_RandomStreams.{method} needs {name}")
        if size is not None or ndim is not None:
            raise ValueError(f"MRG_RandomStreams.{method}: size and ndim must be None (the "
                             f"rows of {name} set the number of draws)")
        pvals = as_tensor_variable(pvals)
        if pvals.ndim != 2:
            raise NotImplementedError(f"MRG_RandomStreams.{method} takes a matrix {name} "
                                      f"(one distribution per row), got {pvals.ndim} dims")
        return pvals


def _target_only(kwargs, method):
    # Theano's `target` chose a GPU context; symgraph runs on the CPU.
    extra = set(kwargs) - {"target"}
    if extra:
        raise TypeError(f"MRG_RandomStreams.{method}() got unexpected keyword arguments "
                        f"{sorted(extra)}")


def _cast(x, dtype):
    from symgraph.ops.math import cast

    return x if x.dtype == dtype else cast(x, dtype)


def _is_value(x, number):
    from symgraph.graph.basic import Constant

    return isinstance(x, Constant) and x.ndim == 0 and float(x.data) == number


def _append_axis(size, ndim, length):
    """``size`` with one more entry, ``length``: a tuple stays a tuple, a
    symbolic vector gets the entry joined at its end."""
    if _is_int(size):
        size = (size,)
    if isinstance(size, (tuple, list)):
        if ndim is not None and len(size) != ndim:
            raise ValueError(f"ndim={ndim} differs from len(size)={len(size)}")
        return tuple(size) + (length,)
    from symgraph.ops.join import concatenate
    from symgraph.ops.math import cast

    vector = _size_vector(size, ndim)
    tail = as_tensor_variable([cast(as_tensor_variable(length), "int64")])
    return concatenate([vector, tail])


def _size_vector(size, ndim):
    """``size`` as an int64 vector of static length, with Theano's checks."""
    from symgraph.ops.random import normalize_size
    from symgraph.ops.shape import specify_shape

    if _is_int(size):
        size = (size,)
    if isinstance(size, (tuple, list)):
        if not all(_is_int(s) or isinstance(s, Variable) for s in size):
            raise TypeError(f"size must hold ints or symbolic scalars, got {size!r}")
        if any(_is_int(s) and s <= 0 for s in size):
            raise ValueError(f"size {tuple(size)} has a dimension that is not positive")
        if ndim is not None and len(size) != ndim:
            raise ValueError(f"ndim={ndim} differs from len(size)={len(size)}")
        return normalize_size(tuple(size), "MRG_RandomStreams")
    if not isinstance(size, Variable) or as_tensor_variable(size).ndim != 1:
        raise TypeError(f"size must be a tuple of ints or a symbolic vector, got {size!r}")
    size = as_tensor_variable(size)
    if size.type.shape[0] is None and ndim is not None:
        size = specify_shape(size, (ndim,))
    return normalize_size(size, "MRG_RandomStreams")
