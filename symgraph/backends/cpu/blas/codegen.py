"""Native code for the BLAS ops: Dot, BatchedDot, Gemm, Gemv and Ger.

Floats call SciPy's BLAS through the helpers of ``blas_support`` (which
read transposed contiguous operands in place and copy other layouts).
float16 is computed in float32 (converted into a workspace, sgemm, converted
back); operands of another dtype than the result are converted the same
way.  Integer and bool products are plain loops (i-k-j order) in unsigned
arithmetic, which wraps as NumPy's integer dot does.  Complex: no native
code (None).
"""

from symgraph.backends.cpu.blas.support import (
    BLAS_PREFIX, blas_available, blas_symbols, cname, common_support, load_support,
    store_support, typed_support)
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import COMPUTE, INPLACE, CKernel

#: Bump when the generated code changes in a way its text would not show.
VERSION = 2

_FLOAT_COMPUTE = {"float16": "float", "float32": "float", "float64": "double"}
_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
# Integer products are accumulated in unsigned types, whose overflow wraps
# (signed overflow is undefined in C); narrow types in uint32_t, so that C's
# promotion to int never multiplies two large values as signed.  Truncating
# to the result type at the end gives NumPy's wrapped result.
_UNSIGNED = {"int8": "uint32_t", "int16": "uint32_t", "int32": "uint32_t",
             "int64": "uint64_t", "uint8": "uint32_t", "uint16": "uint32_t",
             "uint32": "uint32_t", "uint64": "uint64_t", "bool": "uint8_t"}


# -- operand descriptions ---------------------------------------------------------------

def _as_matrix(i, ndim, transpose=False):
    """C expressions (data, rows, cols, rs, cs) of ``in[i]`` viewed as a matrix
    (a vector is one row; a 0-d array one element)."""
    a = f"in[{i}]"
    if ndim == 2:
        m = [f"{a}.data", f"{a}.shape[0]", f"{a}.shape[1]", f"{a}.strides[0]", f"{a}.strides[1]"]
    elif ndim == 1:
        m = [f"{a}.data", "1", f"{a}.shape[0]", "0", f"{a}.strides[0]"]
    else:
        m = [f"{a}.data", "1", "1", "0", "0"]
    if transpose:
        m = [m[0], m[2], m[1], m[4], m[3]]
    return m


def _out_matrix(ndim):
    """(rows, cols, rs, cs) of out[0] as a matrix; a vector result is one column
    (the layout gemv writes), a 0-d result one element."""
    if ndim == 2:
        return ["out[0].shape[0]", "out[0].shape[1]", "out[0].strides[0]", "out[0].strides[1]"]
    if ndim == 1:
        return ["out[0].shape[0]", "1", "out[0].strides[0]", "0"]
    return ["1", "1", "0", "0"]


def _shape_check(lhs_dim, rhs_dim, op_name, lhs, rhs, what):
    """C code failing with the op's 'not aligned' message when two dims differ;
    ``what`` is the text after the shapes, with two %lld for the sizes."""
    return f"""
    if ({lhs_dim} != {rhs_dim}) {{
        char s0[128], s1[128];
        sg_blas_shape_str(&in[{lhs}], s0, sizeof s0); sg_blas_shape_str(&in[{rhs}], s1, sizeof s1);
        SG_FAIL(err, SG_ERR_VALUE, "{op_name}: shapes %s and %s {what}",
                s0, s1, (long long)({lhs_dim}), (long long)({rhs_dim}));
    }}"""


def _shape_fn(checks, out_dims):
    fills = "\n".join(f"    out_shapes[{d}] = {e};" for d, e in enumerate(out_dims))
    return (f"int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{"
            f"{''.join(checks)}\n{fills}\n    (void)in; (void)err;\n    return 0;\n}}\n")


def _dot_checks(x_ndim, y_ndim, name="Dot"):
    # The message of Dot.perform.
    return [_shape_check(f"in[0].shape[{x_ndim - 1}]", "in[1].shape[0]", name, 0, 1,
                         f"are not aligned: dimension {x_ndim - 1} of the first (%lld) "
                         f"!= dimension 0 of the second (%lld)")]


def _dot_out_dims(x_ndim, y_ndim):
    return ([f"in[0].shape[0]"] if x_ndim == 2 else []) + \
        ([f"in[1].shape[1]"] if y_ndim == 2 else [])


# -- Dot ------------------------------------------------------------------------------------

def dot_lowering(op, node):
    """The lowering of a ``Dot`` node (see ``dot_kernel``)."""
    x, y = node.inputs
    return dot_kernel(x.dtype, y.dtype, node.outputs[0].dtype, x.ndim, y.ndim)


def batched_dot_lowering(op, node):
    """The lowering of a ``BatchedDot`` node: float32/float64 with one dtype
    throughout, a BLAS call per batch entry; None otherwise."""
    x, y = node.inputs
    if not x.dtype == y.dtype == node.outputs[0].dtype:
        return None
    return batched_dot_kernel(x.dtype, op.nbatch, x.ndim, y.ndim,
                              x.type.broadcastable, y.type.broadcastable)


def blas_update_lowering(op, node):
    """The lowering of a ``Gemm``, ``Gemv`` or ``Ger`` node."""
    return blas_update_kernel(type(op).__name__, node.outputs[0].dtype, inplace=op.inplace)


def dot_kernel(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim):
    """The CKernel of ``Dot`` for these dtypes and ranks (1 or 2), or None."""
    x_dtype, y_dtype, out_dtype = str(x_dtype), str(y_dtype), str(out_dtype)
    if x_ndim not in (1, 2) or y_ndim not in (1, 2):
        return None
    shape = _shape_fn(_dot_checks(x_ndim, y_ndim), _dot_out_dims(x_ndim, y_ndim))
    if out_dtype in _FLOAT_COMPUTE:
        if not blas_available():
            return None
        return _float_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape)
    if out_dtype in _INT_DTYPES or out_dtype == "bool":
        return _int_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape)
    return None


def _float_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape):
    T = _FLOAT_COMPUTE[out_dtype]
    p = BLAS_PREFIX[T]
    support = list(typed_support(T))
    x = _as_matrix(0, x_ndim)
    y = _as_matrix(1, y_ndim)
    lines = [f"char *d0 = {x[0]}, *d1 = {y[0]};",
             f"int64_t r0 = {x[1]}, c0 = {x[2]}, rs0 = {x[3]}, cs0 = {x[4]};",
             f"int64_t r1 = {y[1]}, c1 = {y[2]}, rs1 = {y[3]}, cs1 = {y[4]};",
             f"{T} *w0 = NULL, *w1 = NULL, *wout = NULL, *c = NULL;",
             "int64_t ldc = 1;", "int rc = 1;"]
    for i, dtype in ((0, x_dtype), (1, y_dtype)):
        if c_type(dtype) != T:   # another dtype (float16 included): convert first
            S = c_type(dtype)
            support.append(load_support(S, T))
            lines.append(f"if (sg_blas_load_{cname(S)}_{cname(T)}(&d{i}, r{i}, c{i}, "
                         f"&rs{i}, &cs{i}, &w{i}, err)) goto done;")
    rows, cols, ors, ocs = _out_matrix(x_ndim + y_ndim - 2)
    direct = int(c_type(out_dtype) == T)
    lines.append(f"if (sg_blas_{p}_target(out[0].data, {rows}, {cols}, {ors}, {ocs}, {direct}, "
                 f"&c, &ldc, &wout, err)) goto done;")
    if x_ndim == 2 and y_ndim == 2:
        call = f"sg_blas_{p}_gemm(r0, c1, c0, 1, d0, rs0, cs0, d1, rs1, cs1, 0, c, ldc, err)"
    elif x_ndim == 2:
        call = f"sg_blas_{p}_gemv(r0, c0, 1, d0, rs0, cs0, d1, cs1, 0, c, ldc, err)"
    elif y_ndim == 2:   # x . Y = Y^T . x: Y read with its strides swapped
        call = f"sg_blas_{p}_gemv(c1, r1, 1, d1, cs1, rs1, d0, cs0, 0, c, ldc, err)"
    else:
        call = f"sg_blas_{p}_dot(c0, d0, cs0, d1, cs1, c, err)"
    lines.append(f"if ({call}) goto done;")
    O = c_type(out_dtype)
    support.append(store_support(T, O))
    lines.append(f"if (wout) sg_blas_store_{cname(T)}_{cname(O)}(c, ldc, {rows}, {cols}, "
                 f"out[0].data, {ors}, {ocs});")
    lines.append("rc = 0;")
    body = "\n    ".join(lines)
    run = (f"int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{\n    {body}\n"
           f"done:\n    free(w0); free(w1); free(wout);\n    return rc;\n}}\n")
    return CKernel(source=shape + run, support=tuple(support), symbols=blas_symbols(T),
                   version=VERSION)


def _int_accumulate(out_dtype, target, a, b):
    """C statement: target += a * b in out_dtype, wrapping (bool: target |= a && b)."""
    O, U = c_type(out_dtype), _UNSIGNED[out_dtype]
    if out_dtype == "bool":
        return f"{target} = (uint8_t)({target} | (({a}) != 0 && ({b}) != 0));"
    return f"{target} = ({O})(({U}){target} + ({U})({a}) * ({U})({b}));"


def _elem(i, ctype, ndim, idx):
    """C expression: element idx (tuple of C index expressions) of in[i]."""
    offset = " + ".join(f"({e}) * in[{i}].strides[{d}]" for d, e in enumerate(idx)) or "0"
    return f"(*(const {ctype} *)(in[{i}].data + {offset}))"


def _out_elem(ndim, idx):
    offset = " + ".join(f"({e}) * out[0].strides[{d}]" for d, e in enumerate(idx)) or "0"
    return offset


def _int_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape):
    if x_dtype not in _INT_DTYPES + ("bool",) or y_dtype not in _INT_DTYPES + ("bool",):
        return None
    X, Y, O = c_type(x_dtype), c_type(y_dtype), c_type(out_dtype)
    m = "in[0].shape[0]" if x_ndim == 2 else "1"
    n = "in[1].shape[1]" if y_ndim == 2 else "1"
    k = "in[1].shape[0]"
    xi = ("i", "p") if x_ndim == 2 else ("p",)
    yi = ("p", "j") if y_ndim == 2 else ("p",)
    oi = (("i",) if x_ndim == 2 else ()) + (("j",) if y_ndim == 2 else ())
    o = f"*(({O} *)(out[0].data + {_out_elem(len(oi), oi)}))"
    acc = _int_accumulate(out_dtype, "*o", "a", _elem(1, Y, y_ndim, yi))
    run = f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    const int64_t m = {m}, n = {n}, k = {k};
    (void)err;
    /* i-k-j order: the innermost loop walks a row of the right operand. */
    for (int64_t i = 0; i < m; i++) {{
        for (int64_t j = 0; j < n; j++) {o} = 0;
        for (int64_t p = 0; p < k; p++) {{
            const {X} a = {_elem(0, X, x_ndim, xi)};
            for (int64_t j = 0; j < n; j++) {{
                {O} *o = ({O} *)(out[0].data + {_out_elem(len(oi), oi)});
                {acc}
            }}
        }}
    }}
    return 0;
}}
"""
    return CKernel(source=shape + run, support=(common_support(),), version=VERSION)


# -- Gemm, Gemv, Ger --------------------------------------------------------------------

def _scalar(i, T):
    return f"(*(const {T} *)in[{i}].data)"


def _same_shape_check(op_name, z, other_dims, what):
    """C: in[z] must have dims other_dims (C expressions)."""
    checks = []
    for d, e in enumerate(other_dims):
        checks.append(f"""
    if (in[{z}].shape[{d}] != {e}) {{
        char s[128]; sg_blas_shape_str(&in[{z}], s, sizeof s);
        SG_FAIL(err, SG_ERR_VALUE,
                "{op_name}: z has shape %s, but {what} has %lld in dimension {d}",
                s, (long long)({e}));
    }}""")
    return checks


def blas_update_kernel(op_name, dtype, inplace=False):
    """The CKernel of Gemm, Gemv or Ger (``op_name``) for ``dtype``, or None.

    Gemm(z, a, x, y, b) = b*z + a*dot(x, y) with matrices x, y;
    Gemv(z, a, A, x, b) = b*z + a*dot(A, x) with a matrix A and vector x;
    Ger(z, a, x, y) = z + a*outer(x, y).  All inputs have ``dtype``.
    ``inplace``: an INPLACE kernel whose output is z itself (the runtime
    hands it z's array; it never calls the shape function, so ``run`` makes
    the same checks first).
    """
    dtype = str(dtype)
    if dtype in ("float32", "float64"):
        if not blas_available():
            return None
        return _float_update(op_name, _FLOAT_COMPUTE[dtype], inplace)
    if dtype in _INT_DTYPES:
        return _int_update(op_name, dtype, inplace)
    return None


def _update_shape(op_name):
    if op_name == "Gemm":
        checks = [_shape_check("in[2].shape[1]", "in[3].shape[0]", op_name, 2, 3,
                               "of x and y are not aligned (%lld != %lld)")]
        checks += _same_shape_check(op_name, 0, ["in[2].shape[0]", "in[3].shape[1]"],
                                    "dot(x, y)")
        return _shape_fn(checks, ["in[0].shape[0]", "in[0].shape[1]"])
    if op_name == "Gemv":
        checks = [_shape_check("in[2].shape[1]", "in[3].shape[0]", op_name, 2, 3,
                               "of A and x are not aligned (%lld != %lld)")]
        checks += _same_shape_check(op_name, 0, ["in[2].shape[0]"], "dot(A, x)")
        return _shape_fn(checks, ["in[0].shape[0]"])
    checks = _same_shape_check(op_name, 0, ["in[2].shape[0]", "in[3].shape[0]"],
                               "outer(x, y)")
    return _shape_fn(checks, ["in[0].shape[0]", "in[0].shape[1]"])


def _update_kind(inplace):
    """(kind, CKernel aliasing arguments, C of run's first lines): an in-place
    kernel checks the shapes itself, through the shape function."""
    if not inplace:
        return COMPUTE, {}, ""
    check = ("    { int64_t shapes[SG_MAXDIMS];\n"
             "      if (SG_FN(shape)(in, shapes, err)) return 1; }\n")
    return INPLACE, {"inplace_of": (0,)}, check


def _float_call(op_name, p, T):
    """C: the BLAS helper call adding alpha * the product into c (row stride
    ldc), and the same for c holding the TRANSPOSED result (row stride ldc)."""
    if op_name == "Gemm":
        call = (f"sg_blas_{p}_gemm(in[2].shape[0], in[3].shape[1], in[2].shape[1], alpha, "
                "in[2].data, in[2].strides[0], in[2].strides[1], "
                "in[3].data, in[3].strides[0], in[3].strides[1], 1, c, ldc, err)")
        # (x . y)^T = y^T . x^T: each operand read with its strides swapped.
        call_t = (f"sg_blas_{p}_gemm(in[3].shape[1], in[2].shape[0], in[2].shape[1], alpha, "
                  "in[3].data, in[3].strides[1], in[3].strides[0], "
                  "in[2].data, in[2].strides[1], in[2].strides[0], 1, c, ldc, err)")
    elif op_name == "Gemv":
        call = (f"sg_blas_{p}_gemv(in[2].shape[0], in[2].shape[1], alpha, "
                "in[2].data, in[2].strides[0], in[2].strides[1], "
                "in[3].data, in[3].strides[0], 1, c, ldc, err)")
        call_t = None   # a vector z: the target helper takes any positive stride
    else:
        call = (f"sg_blas_{p}_ger(in[2].shape[0], in[3].shape[0], alpha, "
                "in[2].data, in[2].strides[0], in[3].data, in[3].strides[0], c, ldc, err)")
        call_t = (f"sg_blas_{p}_ger(in[3].shape[0], in[2].shape[0], alpha, "
                  "in[3].data, in[3].strides[0], in[2].data, in[2].strides[0], c, ldc, err)")
    return call, call_t


def _float_update(op_name, T, inplace=False):
    p = BLAS_PREFIX[T]
    support = list(typed_support(T)) + [store_support(T, T)]
    out_ndim = 1 if op_name == "Gemv" else 2
    rows, cols, ors, ocs = _out_matrix(out_ndim)
    z = _as_matrix(0, 2) if out_ndim == 2 else ["in[0].data", "in[0].shape[0]", "1",
                                                   "in[0].strides[0]", "0"]
    kind, alias, check = _update_kind(inplace)
    call, call_t = _float_call(op_name, p, T)
    beta = _scalar(4, T) if op_name != "Ger" else f"({T})1"
    scaled = 0 if op_name == "Ger" else 1
    # In place, when z's layout suits BLAS as it is, the result is written
    # straight into z: nothing to copy when beta is 1 (an SGD update), else z
    # scaled where it lies (as NumPy's z * b, NaN * 0 included).  A matrix z
    # with contiguous columns (a transposed array) holds the transposed
    # result, computed with the operands swapped.  Other layouts go through
    # the workspace path below, as the out-of-place kernel does.
    direct = ""
    if inplace:
        direct = f"""
    if (sg_blas_{p}_target(out[0].data, rows, cols, zrs, zcs, 1, &c, &ldc, &wout, err))
        return 1;
    if (!wout) {{
        if (beta != 1) sg_blas_{p}_scale(c, ldc, rows, cols, beta);
        return {call};
    }}
    free(wout); wout = NULL;"""
        if call_t is not None:
            direct += f"""
    if (sg_blas_{p}_target(out[0].data, cols, rows, zcs, zrs, 1, &c, &ldc, &wout, err))
        return 1;
    if (!wout) {{
        if (beta != 1) sg_blas_{p}_scale(c, ldc, cols, rows, beta);
        return {call_t};
    }}
    free(wout); wout = NULL;"""
    run = f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
{check}    const {T} alpha = {_scalar(1, T)}, beta = {beta};
    const int64_t rows = {rows}, cols = {cols}, zrs = {z[3]}, zcs = {z[4]};
    {T} *c = NULL, *wout = NULL;
    int64_t ldc = 1;
    (void)beta; (void)zrs; (void)zcs;{direct}
    if (sg_blas_{p}_target(out[0].data, rows, cols, {ors}, {ocs}, {int(not inplace)}, &c, &ldc,
                           &wout, err))
        return 1;
    /* The result starts as beta * z (as NumPy computes it, NaN * 0 included);
       BLAS then adds alpha * the product with beta = 1. */
    sg_blas_{p}_load_scaled(c, ldc, rows, cols, in[0].data, zrs, zcs, beta, {scaled});
    int rc = {call};
    if (!rc && wout)
        sg_blas_store_{T}_{T}(c, ldc, rows, cols, out[0].data, {ors}, {ocs});
    free(wout);
    return rc;
}}
"""
    return CKernel(source=_update_shape(op_name) + run, kind=kind, support=tuple(support),
                   symbols=blas_symbols(T), version=VERSION, **alias)


def _int_update(op_name, dtype, inplace=False):
    O, U = c_type(dtype), _UNSIGNED[dtype]
    kind, alias, check = _update_kind(inplace)

    def rd(i, idx):
        return _elem(i, O, len(idx), idx)

    def at(idx):
        return f"(({O} *)(out[0].data + {_out_elem(len(idx), idx)}))"

    alpha, beta = f"(({U}){rd(1, ())})", f"(({U}){rd(4, ())})"
    # Every element of z is read before the same element of the result is
    # written (and never again after), so out[0] may be z itself.
    if op_name == "Gemm":
        body = f"""
    const int64_t m = in[2].shape[0], n = in[3].shape[1], k = in[2].shape[1];
    for (int64_t i = 0; i < m; i++) {{
        for (int64_t j = 0; j < n; j++)
            *{at(("i", "j"))} = ({O})({beta} * ({U}){rd(0, ("i", "j"))});
        for (int64_t p = 0; p < k; p++) {{
            const {U} a = {alpha} * ({U}){rd(2, ("i", "p"))};
            for (int64_t j = 0; j < n; j++) {{
                {O} *o = {at(("i", "j"))};
                *o = ({O})(({U})*o + a * ({U}){rd(3, ("p", "j"))});
            }}
        }}
    }}"""
    elif op_name == "Gemv":
        body = f"""
    const int64_t m = in[2].shape[0], k = in[2].shape[1];
    for (int64_t i = 0; i < m; i++) {{
        {U} acc = 0;
        for (int64_t p = 0; p < k; p++) acc += ({U}){rd(2, ("i", "p"))} * ({U}){rd(3, ("p",))};
        *{at(("i",))} = ({O})({beta} * ({U}){rd(0, ("i",))} + {alpha} * acc);
    }}"""
    else:
        body = f"""
    const int64_t m = in[2].shape[0], n = in[3].shape[0];
    for (int64_t i = 0; i < m; i++) {{
        const {U} a = {alpha} * ({U}){rd(2, ("i",))};
        for (int64_t j = 0; j < n; j++)
            *{at(("i", "j"))} = ({O})(({U}){rd(0, ("i", "j"))} + a * ({U}){rd(3, ("j",))});
    }}"""
    run = (f"int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{\n"
           f"{check}    (void)err;{body}\n    return 0;\n}}\n")
    return CKernel(source=_update_shape(op_name) + run, kind=kind,
                   support=(common_support(),), version=VERSION, **alias)


# -- BatchedDot -----------------------------------------------------------------------------

def batched_dot_kernel(dtype, nbatch, x_ndim, y_ndim, x_broadcastable, y_broadcastable):
    """The CKernel of ``BatchedDot`` for float32/float64 inputs and result all of
    ``dtype``, or None (other dtypes run in Python).

    A gemm, gemv or dot per batch entry; batch dims declared broadcastable
    (static size 1) repeat their one entry.
    """
    dtype = str(dtype)
    if dtype not in ("float32", "float64") or nbatch < 1 or not blas_available():
        return None
    T = _FLOAT_COMPUTE[dtype]
    p = BLAS_PREFIX[T]
    nb = nbatch
    xc, yc = x_ndim - nb, y_ndim - nb   # core ranks, 1 or 2
    checks, out_dims = [], []
    for d in range(nb):
        xb, yb = x_broadcastable[d], y_broadcastable[d]
        if xb and yb:
            out_dims.append("1")
        elif xb or yb:
            out_dims.append(f"in[{1 if xb else 0}].shape[{d}]")
        else:
            out_dims.append(f"in[0].shape[{d}]")
            checks.append(f"""
    if (in[0].shape[{d}] != in[1].shape[{d}]) {{   /* BatchedDot.perform's message */
        char s0[128], s1[128];
        sg_blas_shape_str(&in[0], s0, sizeof s0); sg_blas_shape_str(&in[1], s1, sizeof s1);
        SG_FAIL(err, SG_ERR_VALUE, "BatchedDot: batch dimension {d} differs: shapes %s and %s",
                s0, s1);
    }}""")
    checks.append(_shape_check(f"in[0].shape[{x_ndim - 1}]", f"in[1].shape[{nb}]",
                               "BatchedDot", 0, 1,
                               f"are not aligned: dimension {x_ndim - 1} of the first (%lld) "
                               f"!= dimension {nb} of the second (%lld)"))
    out_dims += ([f"in[0].shape[{nb}]"] if xc == 2 else []) + \
        ([f"in[1].shape[{nb + 1}]"] if yc == 2 else [])
    shape = _shape_fn(checks, out_dims)

    def core(i, rank):   # (rows, cols, rs, cs) of one batch entry of in[i] as a matrix
        if rank == 2:
            return [f"in[{i}].shape[{nb}]", f"in[{i}].shape[{nb + 1}]",
                    f"in[{i}].strides[{nb}]", f"in[{i}].strides[{nb + 1}]"]
        return ["1", f"in[{i}].shape[{nb}]", "0", f"in[{i}].strides[{nb}]"]

    (r0, c0, rs0, cs0), (r1, c1, rs1, cs1) = core(0, xc), core(1, yc)
    out_rank = xc + yc - 2
    if out_rank == 2:
        rows, cols, ors, ocs = ("out[0].shape[%d]" % nb, "out[0].shape[%d]" % (nb + 1),
                                "out[0].strides[%d]" % nb, "out[0].strides[%d]" % (nb + 1))
    elif out_rank == 1:
        rows, cols, ors, ocs = ("out[0].shape[%d]" % nb, "1", "out[0].strides[%d]" % nb, "0")
    else:
        rows, cols, ors, ocs = "1", "1", "0", "0"
    if xc == 2 and yc == 2:
        call = (f"sg_blas_{p}_gemm({r0}, {c1}, {c0}, 1, bx, {rs0}, {cs0}, by, {rs1}, {cs1}, "
                f"0, c, ldc, err)")
    elif xc == 2:
        call = f"sg_blas_{p}_gemv({r0}, {c0}, 1, bx, {rs0}, {cs0}, by, {cs1}, 0, c, ldc, err)"
    elif yc == 2:
        call = f"sg_blas_{p}_gemv({c1}, {r1}, 1, by, {cs1}, {rs1}, bx, {cs0}, 0, c, ldc, err)"
    else:
        call = f"sg_blas_{p}_dot({c0}, bx, {cs0}, by, {cs1}, c, err)"
    x_steps = " ".join(f"xs[{d}] = {0 if x_broadcastable[d] else f'in[0].strides[{d}]'};"
                       for d in range(nb))
    y_steps = " ".join(f"ys[{d}] = {0 if y_broadcastable[d] else f'in[1].strides[{d}]'};"
                       for d in range(nb))
    run = f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    enum {{ NB = {nb} }};
    int64_t idx[NB], xs[NB], ys[NB], total = 1;
    {x_steps}
    {y_steps}
    for (int d = 0; d < NB; d++) {{ idx[d] = 0; total *= out[0].shape[d]; }}
    for (int64_t b = 0; b < total; b++) {{
        char *bx = in[0].data, *by = in[1].data, *bo = out[0].data;
        for (int d = 0; d < NB; d++) {{
            bx += idx[d] * xs[d]; by += idx[d] * ys[d]; bo += idx[d] * out[0].strides[d];
        }}
        {T} *c = NULL, *wout = NULL;
        int64_t ldc = 1;
        if (sg_blas_{p}_target(bo, {rows}, {cols}, {ors}, {ocs}, 1, &c, &ldc, &wout, err))
            return 1;
        int rc = {call};
        if (!rc && wout) sg_blas_store_{T}_{T}(c, ldc, {rows}, {cols}, bo, {ors}, {ocs});
        free(wout);
        if (rc) return 1;
        for (int d = NB - 1; d >= 0; d--) {{   /* next batch index */
            if (++idx[d] < out[0].shape[d]) break;
            idx[d] = 0;
        }}
    }}
    return 0;
}}
"""
    support = tuple(typed_support(T)) + (store_support(T, T),)
    return CKernel(source=shape + run, support=support, symbols=blas_symbols(T), version=VERSION)
