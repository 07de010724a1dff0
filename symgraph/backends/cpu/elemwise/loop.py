"""Native kernels for Elemwise nodes (any scalar op, fused Composites included).

A kernel has two functions (ABI: ``c_src/sg_kernel.h``):

``SG_FN(shape)``: the broadcast of the input shapes.  Only dimensions that the
node's input types declare broadcastable may be 1 and broadcast; any other
mismatch fails with the Python ``perform``'s message (ShapeMismatchError's
text, raised as ValueError by the runtime).

``SG_FN(run)``: one element function (the scalar op's ``c_body``) in two loops:

* a contiguous fast path, taken when every input is C-contiguous with the
  output's size (or is a scalar: a type broadcastable in every dimension,
  read once before the loop) and the outputs are C-contiguous: a flat loop
  over restrict pointers that GCC vectorizes;
* a general path for any strides (negative, zero, broadcast): size-1
  dimensions are dropped and neighbours merged where every array steps
  through them as one (``sg_ew_collapse``), then nested loops with byte
  strides, the last dimension innermost.  A broadcast input has stride 0
  there.

Vector math: glibc's libmvec has SIMD versions of expf, tanhf, logf, ... but
math.h only declares them under ``-ffast-math``, which symgraph never uses
(it breaks isnan, isinf and NaN propagation).  ``MVEC_SUPPORT`` declares
them itself (``__attribute__((simd("notinbranch")))``, what glibc's header
would do), so the loops call ``_ZGVdN8v_expf`` and friends while everything
else stays IEEE.  It is guarded by ``SG_USE_MVEC``: the library must then be
linked with ``-lmvec`` (or libmvec loaded RTLD_GLOBAL before it), so whoever
compiles defines the macro when it links libmvec.  Measured on this machine
(AVX-512, gcc 12, float32, 1e6 elements, one thread): ``exp(-x*x)*y +
tanh(z)*0.5`` takes 31 ms with scalar libm calls and 1.0 ms with libmvec.
libmvec is accurate to 4 ulp (float32 results within rtol 1e-6 of NumPy's).

OpenMP: the loop driver (``sg_ew_loop``, in the shared support library,
which is compiled with OpenMP) shares a kernel's element loop out between
threads when its size is at least its ``minpar`` argument:
``config.openmp_elemwise_minsize`` with ``config.openmp``, -1 (never)
without.  The kernel's own code has no OpenMP in it, so its library is
compiled without.

Errors an op flags per element (an integer to a negative power) are OR-ed
into one int during the loop and reported after it, as NumPy raises after
looking at the whole array.
"""

import os
import platform

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type, has_c_type
from symgraph.backends.native.kernel import COMPUTE, INPLACE, CKernel
from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY
from symgraph.backends.c_family.scalar_base import c_exact
from symgraph.backends.c_family.scalar_c import c_body, c_error_messages, c_input_dtypes, c_support
from symgraph.backends.c_family.c_files import c_file

__all__ = ["elemwise_kernel", "MVEC_SUPPORT", "EW_SUPPORT", "element_code"]

KERNEL_VERSION = 4

# ---------------------------------------------------------------------------
# libmvec declarations

_MVEC_BASE = ("sin", "cos", "log", "exp", "pow")  # glibc >= 2.22
_MVEC_MORE = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosh",
              "erf", "erfc", "exp10", "exp2", "expm1", "hypot", "log10", "log1p", "log2",
              "sinh", "tan", "tanh")  # glibc >= 2.35
_TWO_ARGS = ("pow", "atan2", "hypot")


def _glibc_version():
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return (0, 0)
    try:
        major, minor = text.split()[-1].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


def _mvec_functions():
    if platform.machine() not in ("x86_64", "AMD64") or platform.system() != "Linux":
        return ()
    version = _glibc_version()
    if version < (2, 22):
        return ()
    return _MVEC_BASE + (_MVEC_MORE if version >= (2, 35) else ())


def _mvec_code(functions):
    lines = ["/* libmvec: SIMD variants of libm functions (see elemwise_codegen.py) */",
             "#if defined(SG_USE_MVEC) && defined(__x86_64__)",
             "#define SG_SIMD_DECL __attribute__((__simd__(\"notinbranch\")))"]
    for name in functions:
        for ctype, suffix in (("double", ""), ("float", "f")):
            args = ", ".join([ctype] * (2 if name in _TWO_ARGS else 1))
            lines.append(f"SG_SIMD_DECL {ctype} {name}{suffix}({args});")
    lines.append("#endif")
    return "\n".join(lines)


#: Support entry declaring libmvec's SIMD functions; list it before any
#: helper that calls libm so that inlined calls vectorize too.
MVEC_SUPPORT = ("sg_mvec_v1:" + ",".join(_mvec_functions()), _mvec_code(_mvec_functions()))

# ---------------------------------------------------------------------------
# Shape checks and stride plans shared by every element-wise kernel

EW_SUPPORT = ("sg_ew_support_v1", c_file("cpu/elemwise/loop_support.inc"))



# ---------------------------------------------------------------------------
# Code generation

def _ctype(dtype):
    from symgraph.backends.c_family.scalar_base import c_ctype

    return c_ctype(dtype)


def _convert(expr, have, need):
    """``expr`` (a value of dtype ``have``, read from storage) as ``need``."""
    if need == "bool" and have != "bool":
        return f"({expr} != 0)"
    return f"({_ctype(need)})({expr})"


def element_code(scalar_op, in_dtypes, out_dtypes, loads, stores, error_flag=None):
    """The C block computing one element, or None when the op has no C.

    ``loads[i]``: a C expression reading input i from its storage type;
    ``stores[k]``: a function of a value expression giving the statement that
    writes output k.  Returns (code, error messages).
    """
    want = c_input_dtypes(scalar_op, *in_dtypes)
    if not all(has_c_type(d) for d in want):
        return None
    lines = [f"const {_ctype(w)} a{i} = {_convert(load, have, w)};"
             for i, (load, have, w) in enumerate(zip(loads, in_dtypes, want))]
    outs = [f"r{k}" for k in range(len(out_dtypes))]
    messages = c_error_messages(scalar_op, want) if error_flag else ()
    body = c_body(scalar_op, [f"a{i}" for i in range(len(loads))], list(want), outs,
                            list(out_dtypes), error_flag=error_flag if messages else None)
    if body is None:
        return None
    lines += [f"{_ctype(d)} {r};" for r, d in zip(outs, out_dtypes)]
    lines.append(body)
    lines += [store(r) for store, r in zip(stores, outs)]
    return "{\n" + "\n".join(lines) + "\n}", messages


def elemwise_lowering(op, node):
    """The lowering of an ``Elemwise`` node (see ``elemwise_kernel``)."""
    return elemwise_kernel(node)


def elemwise_kernel(node):
    """The CKernel of an Elemwise node, or None (a dtype or member without C)."""
    from symgraph.config import config

    op = node.op
    scalar_op = op.scalar_op
    in_dtypes = [str(v.dtype) for v in node.inputs]
    out_dtypes = [str(v.dtype) for v in node.outputs]
    if not all(has_c_type(d) for d in in_dtypes + out_dtypes):
        return None
    inplace = dict(op.inplace_pattern)
    if inplace and set(inplace) != set(range(len(out_dtypes))):
        return None  # some outputs in place, others not: the ABI has no such kind
    nin, nout = len(in_dtypes), len(out_dtypes)
    nd = node.outputs[0].ndim
    bcast = [tuple(v.type.broadcastable) for v in node.inputs]
    scalars = [i for i in range(nin) if all(bcast[i])]
    arrays = [i for i in range(nin) if i not in scalars]
    tin = [c_type(d) for d in in_dtypes]
    tout = [c_type(d) for d in out_dtypes]

    code = element_code(
        scalar_op, in_dtypes, out_dtypes,
        [f"s{i}" if i in scalars else f"p{i}[i]" for i in range(nin)],
        [lambda r, k=k: f"o{k}[i] = ({tout[k]}){r};" for k in range(nout)],
        error_flag="bad")
    if code is None:
        return None
    body, messages = code

    src = []
    # -- shape ------------------------------------------------------------------
    bc_flags = ", ".join("1" if b else "0" for flags in bcast for b in flags) or "0"
    src.append(f"static const unsigned char SG_FN(bc)[] = {{{bc_flags}}};")
    src.append("int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {")
    src.append(f"    return sg_ew_shape(in, {nin}, {nd}, SG_FN(bc), {c_string(str(op), limit=160, quote=True)}, {nout}, "
               f"out_shapes, err);\n}}")

    # -- the element loop (all the per-node code; sg_ew_loop drives it) -----------
    # In-place kernels read and write the same memory: no restrict there
    # (ivdep still lets the compiler vectorize: elements are independent).
    restrict = "" if inplace else " restrict"
    block = ["static int SG_FN(block)(int64_t n, char *const *p, const char *const *s) {"]
    for k, i in enumerate(arrays):
        block.append(f"    const {tin[i]} *{restrict} p{i} = (const {tin[i]} *)p[{k}];")
    for k in range(nout):
        block.append(f"    {tout[k]} *{restrict} o{k} = ({tout[k]} *)p[{len(arrays) + k}];")
    for i in scalars:
        block.append(f"    const {tin[i]} s{i} = *(const {tin[i]} *)s[{i}];")
    block.append("    int bad = 0;")
    block.append("    #pragma GCC ivdep")
    block.append("    for (int64_t i = 0; i < n; i++) " + _indent(body, 4))
    block.append("    return bad;\n}")
    src.append(c_exact("\n".join(block)))  # no FMA contraction: NumPy's rounding

    # -- run ----------------------------------------------------------------------
    openmp = bool(config.openmp)
    minpar = int(config.openmp_elemwise_minsize) if openmp else -1
    scalar_flags = ", ".join("1" if i in scalars else "0" for i in range(nin)) or "0"
    sizes = ", ".join(f"sizeof({t})" for t in tin + tout)
    src.append("int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {")
    src.append(f"    static const unsigned char scalar[] = {{{scalar_flags}}};")
    src.append(f"    static const int size[] = {{{sizes}}};")
    src.append(f"    int bad = sg_ew_loop(in, out, {nin}, {nout}, scalar, size, SG_FN(block), "
               f"{minpar});")
    if messages:
        src.append(f"    if (bad) SG_FAIL(err, SG_ERR_VALUE, \"%s\", "
                   f"{c_string(' '.join(messages), limit=400, quote=True)});")
    else:
        src.append("    (void)bad; (void)err;")
    src.append("    return 0;\n}")

    # The loop driver (and its OpenMP regions) is in the shared support library,
    # compiled once with OpenMP: a kernel carries only its element loop, which
    # the driver calls through a pointer, with the size from which the driver
    # shares the work out (minpar; -1 with the openmp flag off: never), so the
    # kernel's own library needs no OpenMP.  A copy of the driver
    # in every library cost GCC about 0.15 s per library.
    source = "\n".join(src)
    support = [MVEC_SUPPORT, SUPPORT_ENTRY] + list(c_support(scalar_op))
    if inplace:
        kind, inplace_of = INPLACE, tuple(inplace[k] for k in range(nout))
    else:
        kind, inplace_of = COMPUTE, ()
    return CKernel(source=source, kind=kind, inplace_of=inplace_of,
                   support=tuple(support), version=KERNEL_VERSION,
                   extra={"libraries": ("mvec",)} if _mvec_functions() else {})


def _indent(block, spaces):
    """``block`` (a ``{ ... }`` C block) indented to follow a ``for`` header."""
    lines = block.split("\n")
    pad = " " * spaces
    return "\n".join([lines[0]] + [pad + "    " + line for line in lines[1:-1]] +
                     [pad + lines[-1]])
