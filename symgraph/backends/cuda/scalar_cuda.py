"""The scalar ops' C where CUDA differs from C (``c_family/scalar_c.py``'s
``cuda`` language): the helper functions of integer division, modulo,
integer powers, sigmoid, softplus, log1mexp and gammaln, compiled for the
device too (``__host__ __device__``), so that element-wise kernels using them
(shape arithmetic fused into a composite, most often) run on the GPU.

The special functions (erfinv, psi, trigamma) are the C helpers with their
coefficient tables in device memory: device-only functions (host code never
calls them in a CUDA library).
"""

from symgraph.backends.c_family.scalar_base import c_exact
from symgraph.backends.c_family.scalar_basic import _C_DIVMOD, _C_IPOW
from symgraph.backends.c_family.scalar_c import attr, c_method, c_support, language
from symgraph.ops.scalar_basic import IntDiv, Mod, Pow
from symgraph.ops.scalar_math import _Special, _Unary

__all__ = ["device_helpers", "device_only", "has_device_helpers"]


def device_helpers(code):
    """C helper definitions made callable from device code (a literal 0 given
    to copysign becomes the argument's type: nvcc would pick a host-only
    overload for an int)."""
    return code.replace("static inline ", "static inline __host__ __device__ ").replace(
        "copysign##S(0,", "copysign##S((T)0,")


_DIVMOD = ("sg_cuda_divmod_v1", c_exact(device_helpers(_C_DIVMOD)))

# As the C helpers (scalar_math._C_MATH), with CUDA's lgamma: the device has no
# lgamma_r (lgamma is thread-safe there).
_MATH = ("sg_cuda_math_v1", c_exact(r"""
#define SG_DEF_MATH(T, S) \
static inline __host__ __device__ T sg_sigmoid##S(T x) { \
    T e = exp##S(-fabs##S(x)); \
    T pos = (T)1 / ((T)1 + e), neg = e / ((T)1 + e); \
    return x >= 0 ? pos : neg; } \
static inline __host__ __device__ T sg_softplus##S(T x) { \
    return log1p##S(exp##S(-fabs##S(x))) + (x > 0 ? x : (x == x ? (T)0 : x)); } \
static inline __host__ __device__ T sg_log1mexp##S(T x) { \
    T a = log##S(-expm1##S(x)), b = log1p##S(-exp##S(x)); \
    return x > (T)-0.6931471805599453 ? a : b; } \
static inline __host__ __device__ T sg_lgamma##S(T x) { \
    return isinf(x) && x < 0 ? x : lgamma##S(x); }
SG_DEF_MATH(float, f) SG_DEF_MATH(double, )
"""))


@c_method(IntDiv, "c_support", language="cuda")
def _int_div_support(op):
    return (_DIVMOD,)


@c_method(Mod, "c_support", language="cuda")
def _mod_support(op):
    return (_DIVMOD,)


@c_method(Pow, "c_support", language="cuda")
def _pow_support(op):
    return (("sg_cuda_ipow_v1", c_exact(device_helpers(_C_IPOW))),)


def device_only(code):
    """C helpers and their constant tables placed in device memory (callable
    from kernels only)."""
    return code.replace("static inline ", "static inline __device__ ").replace(
        "static const double ", "static __device__ const double ")


@c_method(_Special, "c_support", language="cuda")
def _special_support(op):
    from symgraph.backends.c_family.scalar_math import _C_SPECIAL

    return (("sg_cuda_special_v1", c_exact(device_only(_C_SPECIAL))),)


@c_method(_Unary, "c_support", language="cuda")
def _unary_support(op):
    return (_MATH,) if attr(op, "c_helper") else ()


def has_device_helpers(scalar_op):
    """Whether every helper the C of ``scalar_op`` calls has a device version."""
    with language("cuda"):
        return all(key.startswith("sg_cuda_") for key, _ in c_support(scalar_op))
