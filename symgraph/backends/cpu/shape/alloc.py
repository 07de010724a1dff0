"""Native kernels of the ops that make new arrays: ``Alloc`` (a value
broadcast to a shape), ``Eye`` and ``ARange``.  Error messages repeat the
ops' ``perform`` messages word for word."""

import dataclasses

import numpy as np

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.cpu.shape.codegen import (all_have_c_types, itemsize, kernel,
                                                   read_int)


def alloc_kernel(op, node):
    """Alloc: the value broadcast into a new array of the requested shape."""
    if not all_have_c_types(node):
        return None
    value = node.inputs[0]
    ndim, vdim = len(node.inputs) - 1, value.ndim
    lead = ndim - vdim
    sizes = "\n".join(f"    o[{d}] = {read_int(v.dtype, f'in[{d + 1}].data')};"
                      for d, v in enumerate(node.inputs[1:]))
    bcast = "{" + ", ".join("1" if b else "0" for b in value.type.broadcastable) + "}"
    shape = f"""    int64_t *o = out_shapes;
{sizes}
    for (int d = 0; d < {ndim}; d++) {{
        if (o[d] >= 0) continue;
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
        sg_sh_put(&m, "Alloc: negative size in the requested shape ");
        sg_sh_put_shape(&m, o, {ndim});
        return 1;
    }}"""
    if vdim:
        shape += f"""
    static const int bcast[] = {bcast};
    for (int d = 0; d < {vdim}; d++) {{
        if (in[0].shape[d] == o[{lead} + d] || bcast[d]) continue;
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
        sg_sh_put(&m, "Alloc: cannot broadcast %s of shape ", {c_string(value, quote=True)});
        sg_sh_put_shape(&m, in[0].shape, {vdim});
        sg_sh_put(&m, " to ");
        sg_sh_put_shape(&m, o, {ndim});
        sg_sh_put(&m, ": dimension %d has size %lld and is not declared broadcastable",
                  d, (long long)in[0].shape[d]);
        return 1;
    }}"""
    run = f"""    int64_t ss[{max(ndim, 1)}];
    for (int d = 0; d < {ndim}; d++) ss[d] = 0;
    for (int d = 0; d < {vdim}; d++)
        ss[{lead} + d] = in[0].shape[d] == out[0].shape[{lead} + d] ? in[0].strides[d] : 0;
    sg_sh_assign(out[0].data, out[0].strides, in[0].data, ss, out[0].shape, {ndim},
                 {itemsize(value.dtype)});"""
    return kernel(run, shape=shape)


def eye_kernel(op, node):
    """Eye: zeros with ones on diagonal k."""
    if not all_have_c_types(node):
        return None
    n, m, k = (read_int(v.dtype, f"in[{i}].data") for i, v in enumerate(node.inputs))
    ctype = c_type(op.dtype)
    shape = f"""    int64_t n = {n}, m = {m};
    if (n < 0 || m < 0) SG_FAIL(err, SG_ERR_VALUE, "%s: negative size (%lld, %lld)",
                                {c_string(op, quote=True)}, (long long)n, (long long)m);
    out_shapes[0] = n; out_shapes[1] = m;"""
    run = f"""    int64_t n = out[0].shape[0], m = out[0].shape[1], k = {k};
    const {ctype} zero = ({ctype})0, one = ({ctype})1;
    int64_t zs[2] = {{0, 0}};
    sg_sh_assign(out[0].data, out[0].strides, (const char *)&zero, zs, out[0].shape, 2,
                 sizeof({ctype}));
    if (k >= m || k <= -n) return 0;  /* no diagonal (and no overflow below) */
    for (int64_t i = k >= 0 ? 0 : -k; i < n && i + k < m; i++)
        memcpy(out[0].data + i * out[0].strides[0] + (i + k) * out[0].strides[1], &one,
               sizeof({ctype}));"""
    return kernel(run, shape=shape)


def arange_kernel(op, node):
    """ARange, computed as NumPy's arange does: the length is
    ceil((stop - start) / step) in the inputs' arithmetic, out[0] = start,
    out[1] = start + step, and out[i] = out[0] + i * (out[1] - out[0])."""
    dts = [str(v.dtype) for v in node.inputs]
    out_dt = op.dtype
    if not all_have_c_types(node) or "bool" in dts + [out_dt]:
        return None
    z = [np.zeros((), dtype=d) for d in dts]
    diff_dt = str((z[1] - z[0]).dtype)
    with np.errstate(all="ignore"):
        div_dt = str((np.zeros((), diff_dt) / z[2]).dtype)
    next_dt = str((z[0] + z[2]).dtype)
    start, stop, step = (f"(*(const {c_type(d)} *)in[{i}].data)" for i, d in enumerate(dts))
    shape = f"""    if ({step} == 0) SG_FAIL(err, SG_ERR_VALUE, "%s: step is zero", {c_string(op, quote=True)});
    {_arith(diff_dt, "diff", stop, start, "-")}
    {_arith(div_dt, "ratio", "diff", step, "/")}
    double len = ceil((double)ratio);
    /* NumPy: a quotient that underflowed to zero (or divided by infinity) still
       makes one element when the range is not empty. */
    if ((double)ratio == 0.0 && diff != 0) len = signbit((double)ratio) ? 0.0 : 1.0;
    if (isnan(len)) SG_FAIL(err, SG_ERR_VALUE, "arange: cannot compute length");
    if (!(len >= -9223372036854775808.0 && len < 9223372036854775808.0))
        SG_FAIL(err, SG_ERR_VALUE, "Maximum allowed size exceeded");
    out_shapes[0] = len > 0 ? (int64_t)len : 0;
    if (out_shapes[0] > INT64_MAX / {itemsize(out_dt)})
        SG_FAIL(err, SG_ERR_VALUE, "array is too big; `arr.size * arr.dtype.itemsize` is "
                "larger than the maximum possible size.");"""
    ot = c_type(out_dt)
    ct = "float" if out_dt == "float16" else ot
    if out_dt.startswith("int"):  # wrap around as NumPy's loop does, without C's UB
        fill = (f"(({ot})(uint64_t)((uint64_t)first + (uint64_t)i * (uint64_t)delta))")
    elif out_dt.startswith("uint"):
        fill = f"(({ot})((uint64_t)first + (uint64_t)i * (uint64_t)delta))"
    else:
        fill = f"(({ot})(first + ({ct})i * delta))"
    run = f"""    int64_t len = out[0].shape[0];
    char *o = out[0].data;
    int64_t os = out[0].strides[0];
    if (len == 0) return 0;
    {ot} v0 = ({ot}){start};
    memcpy(o, &v0, sizeof({ot}));
    if (len == 1) return 0;
    {_arith(next_dt, "next", start, step, "+")}
    {ot} v1 = ({ot})next;
    memcpy(o + os, &v1, sizeof({ot}));
    {_delta(out_dt, ot, ct)}
    for (int64_t i = 2; i < len; i++) {{
        {ot} v = {fill};
        memcpy(o + i * os, &v, sizeof({ot}));
    }}"""
    # No fused multiply-add: NumPy's fill rounds the product, then the sum.
    k = kernel(run, shape=shape, headers=("<math.h>",))
    return dataclasses.replace(k, source=k.source.replace(
        "int SG_FN(run)", '__attribute__((optimize("fp-contract=off")))\nint SG_FN(run)'))


def _arith(dtype, name, a, b, sign):
    """C declaring ``name`` = a (sign) b computed as NumPy computes it in ``dtype``
    (integers wrap, float16 is rounded from float32)."""
    t = c_type(dtype)
    if dtype == "float16":
        return f"_Float16 {name} = (_Float16)((float)({a}) {sign} (float)({b}));"
    if dtype.startswith("float"):
        return f"{t} {name} = ({t})({t})({a}) {sign} ({t})({b});"
    # Integers: only + and - reach here (true division makes floats).
    return f"{t} {name} = ({t})((uint64_t)({t})({a}) {sign} (uint64_t)({t})({b}));"


def _delta(out_dt, ot, ct):
    if out_dt.startswith(("int", "uint")):
        return f"{ot} first = v0, delta = ({ot})((uint64_t)v1 - (uint64_t)v0);"
    return f"{ct} first = ({ct})v0, delta = ({ct})v1 - ({ct})v0;"


