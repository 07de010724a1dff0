"""The special functions of Theano's tensor module that ``scalar_math`` lacks:
``erfcx``, ``erfcinv``, ``chi2sf``, the incomplete gamma functions
(``gammainc``, ``gammaincc``, ``gammau``, ``gammal``) and the Bessel functions
(``j0``, ``j1``, ``jv``, ``i0``, ``i1``, ``iv``).

Each is an Elemwise of a float scalar op whose values are scipy's.  Their
gradients are exact expressions of other ops; a derivative with respect to
an order or a shape parameter (``k`` of ``chi2sf``/``gammainc``, ``v`` of
``jv``/``iv``) is not implemented, as in Theano.  None has native code yet:
the element-wise loop calls scipy.
"""

import math

from symgraph.ops.lazy_scipy import ScipyFunction, special as _special

from symgraph.ops.elemwise import Elemwise
from symgraph.ops.scalar import FloatScalarOp

__all__ = ["erfcx", "erfcinv", "chi2sf", "gammainc", "gammaincc", "gammau", "gammal",
           "j0", "j1", "jv", "i0", "i1", "iv",
           "Erfcx", "Erfcinv", "Chi2SF", "GammaInc", "GammaIncC", "GammaU", "GammaL",
           "J0", "J1", "Jv", "I0", "I1", "Iv"]


def _m():
    from symgraph.ops import math as user_math

    return user_math


def _not_implemented(op, index, x, why):
    from symgraph.graph.gradient_markers import grad_not_implemented

    return grad_not_implemented(op, index, x, why)


class _Unary(FloatScalarOp):
    nin = 1


class _Binary(FloatScalarOp):
    nin = 2


class Erfcx(_Unary):
    """The scaled complementary error function, exp(x**2) * erfc(x)."""

    ufunc = ScipyFunction("scipy.special", "erfcx")

    def grad(self, inputs, outputs, output_grads):
        (x,), (y,), (gz,) = inputs, outputs, output_grads
        return [gz * (2.0 * x * y - 2.0 / math.sqrt(math.pi))]


class Erfcinv(_Unary):
    """The inverse of erfc on (0, 2)."""

    ufunc = ScipyFunction("scipy.special", "erfcinv")

    def grad(self, inputs, outputs, output_grads):
        (y,), (gz,) = outputs, output_grads
        return [gz * (-math.sqrt(math.pi) / 2.0) * _m().exp(_m().sqr(y))]


def _gamma_density(k, x):
    """exp(-x) * x ** (k - 1) / Gamma(k), the derivative of gammainc in x."""
    m = _m()
    return m.exp((k - 1.0) * m.log(x) - x - m.gammaln(k))


class Chi2SF(_Binary):
    """The survival function of the chi-squared distribution: ``chi2sf(x, k)``
    is the probability that a chi-squared variable of ``k`` degrees of freedom
    exceeds ``x``."""

    @staticmethod
    def ufunc(x, k):
        return _special().chdtrc(k, x)

    def grad(self, inputs, outputs, output_grads):
        (x, k), (gz,) = inputs, output_grads
        return [-gz * 0.5 * _gamma_density(k / 2.0, x / 2.0),
                _not_implemented(self, 1, k, "chi2sf's derivative in k")]


class GammaInc(_Binary):
    """The regularized lower incomplete gamma function P(k, x)."""

    ufunc = ScipyFunction("scipy.special", "gammainc")

    def grad(self, inputs, outputs, output_grads):
        (k, x), (gz,) = inputs, output_grads
        return [_not_implemented(self, 0, k, "gammainc's derivative in k"),
                gz * _gamma_density(k, x)]


class GammaIncC(_Binary):
    """The regularized upper incomplete gamma function Q(k, x) = 1 - P(k, x)."""

    ufunc = ScipyFunction("scipy.special", "gammaincc")

    def grad(self, inputs, outputs, output_grads):
        (k, x), (gz,) = inputs, output_grads
        return [_not_implemented(self, 0, k, "gammaincc's derivative in k"),
                -gz * _gamma_density(k, x)]


def _unregularized_density(k, x):
    m = _m()
    return m.exp((k - 1.0) * m.log(x) - x)


class GammaU(_Binary):
    """The upper incomplete gamma function Gamma(k) * Q(k, x)."""

    @staticmethod
    def ufunc(k, x):
        return _special().gammaincc(k, x) * _special().gamma(k)

    def grad(self, inputs, outputs, output_grads):
        (k, x), (gz,) = inputs, output_grads
        return [_not_implemented(self, 0, k, "gammau's derivative in k"),
                -gz * _unregularized_density(k, x)]


class GammaL(_Binary):
    """The lower incomplete gamma function Gamma(k) * P(k, x)."""

    @staticmethod
    def ufunc(k, x):
        return _special().gammainc(k, x) * _special().gamma(k)

    def grad(self, inputs, outputs, output_grads):
        (k, x), (gz,) = inputs, output_grads
        return [_not_implemented(self, 0, k, "gammal's derivative in k"),
                gz * _unregularized_density(k, x)]


class J0(_Unary):
    """The Bessel function of the first kind of order 0."""

    ufunc = ScipyFunction("scipy.special", "j0")

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] * j1(inputs[0])]


class J1(_Unary):
    """The Bessel function of the first kind of order 1."""

    ufunc = ScipyFunction("scipy.special", "j1")

    def grad(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [output_grads[0] * (j0(x) - jv(2.0, x)) / 2.0]


class Jv(_Binary):
    """The Bessel function of the first kind of real order v: ``jv(v, x)``."""

    ufunc = ScipyFunction("scipy.special", "jv")

    def grad(self, inputs, outputs, output_grads):
        (v, x), (gz,) = inputs, output_grads
        return [_not_implemented(self, 0, v, "jv's derivative in the order"),
                gz * (jv(v - 1.0, x) - jv(v + 1.0, x)) / 2.0]


class I0(_Unary):
    """The modified Bessel function of the first kind of order 0."""

    ufunc = ScipyFunction("scipy.special", "i0")

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * i1(inputs[0])]


class I1(_Unary):
    """The modified Bessel function of the first kind of order 1."""

    ufunc = ScipyFunction("scipy.special", "i1")

    def grad(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [output_grads[0] * (i0(x) + iv(2.0, x)) / 2.0]


class Iv(_Binary):
    """The modified Bessel function of the first kind of real order v: ``iv(v, x)``."""

    ufunc = ScipyFunction("scipy.special", "iv")

    def grad(self, inputs, outputs, output_grads):
        (v, x), (gz,) = inputs, output_grads
        return [_not_implemented(self, 0, v, "iv's derivative in the order"),
                gz * (iv(v - 1.0, x) + iv(v + 1.0, x)) / 2.0]


def _make(op_class, name, doc):
    op = Elemwise(op_class())

    def apply(*inputs):
        return op(*inputs)

    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = doc
    apply.op = op
    return apply


erfcx = _make(Erfcx, "erfcx", "exp(x**2) * erfc(x), computed without overflow for large x.")
erfcinv = _make(Erfcinv, "erfcinv", "The inverse complementary error function of each "
                                    "element (defined on [0, 2]).")
chi2sf = _make(Chi2SF, "chi2sf", "chi2sf(x, k): the chi-squared survival function "
                                 "P(X > x) for k degrees of freedom.")
gammainc = _make(GammaInc, "gammainc", "gammainc(k, x): the regularized lower incomplete "
                                       "gamma function.")
gammaincc = _make(GammaIncC, "gammaincc", "gammaincc(k, x): the regularized upper "
                                          "incomplete gamma function.")
gammau = _make(GammaU, "gammau", "gammau(k, x): the upper incomplete gamma function "
                                 "(not regularized).")
gammal = _make(GammaL, "gammal", "gammal(k, x): the lower incomplete gamma function "
                                 "(not regularized).")
j0 = _make(J0, "j0", "The Bessel function of the first kind, order 0.")
j1 = _make(J1, "j1", "The Bessel function of the first kind, order 1.")
jv = _make(Jv, "jv", "jv(v, x): the Bessel function of the first kind of order v.")
i0 = _make(I0, "i0", "The modified Bessel function of the first kind, order 0.")
i1 = _make(I1, "i1", "The modified Bessel function of the first kind, order 1.")
iv = _make(Iv, "iv", "iv(v, x): the modified Bessel function of the first kind of order v.")
