"""Native kernels for indexing: Subtensor (a view), IncSubtensor, and the common
forms of AdvancedSubtensor / AdvancedIncSubtensor.

Basic indexing follows NumPy exactly: ints wrap once when negative, slices
clamp as ``slice.indices`` does, an empty slice has start 0 and step 1 (so the
view's data pointer never leaves the input), and errors are checked left to
right.  Advanced indexing covers one run of adjacent advanced entries (int
arrays of any rank, broadcast together, and ints) with full slices around
them: ``x[iv]``, ``x[iv, jv]``, ``x[:, iv]``, ``x[iv, 3]``.  Other forms
(boolean masks, non-adjacent arrays, partial slices beside arrays) return None
and run in Python.  As NumPy, the checks go: ints, then the broadcast of the
arrays, then every array element (only when the broadcast is not empty).

Error messages repeat ``perform``'s; an index array of more than 10 elements
is printed as ``array([...])`` without NumPy's column alignment and dtype.
"""

from symgraph.compile.native.c_types import c_type
from symgraph.compile.native.kernel import COMPUTE, INPLACE, VIEW
from symgraph.compile.native.shape_codegen import (SUPPORT, all_have_c_types, c_str, itemsize,
                                                   kernel, read_int)
from symgraph.ops.subtensor import FULL_SLICE, SYMBOLIC, SliceSpec
from symgraph.tensor.type import INT_DTYPES

INDEX_SUPPORT_KEY = "sg_ix_support_v1"

INDEX_SUPPORT_CODE = r"""
/* ---- symgraph index kernels: printing indices ---- */
typedef int64_t (*sg_ix_reader)(const char *);

/* An int array as Python prints arr.tolist(): nested lists. */
static void sg_ix_put_list(sg_sh_msg *m, const sg_array *a, sg_ix_reader rd, int dim,
                           const char *p) {
    if (dim == a->ndim) { sg_sh_put(m, "%lld", (long long)rd(p)); return; }
    sg_sh_put(m, "[");
    for (int64_t i = 0; i < a->shape[dim]; i++) {
        if (i) sg_sh_put(m, ", ");
        sg_ix_put_list(m, a, rd, dim + 1, p + i * a->strides[dim]);
    }
    sg_sh_put(m, "]");
}

/* An index array as perform shows it: tolist() up to 10 elements. */
static void sg_ix_put_array(sg_sh_msg *m, const sg_array *a, sg_ix_reader rd) {
    int big = sg_size(a) > 10;
    if (big) sg_sh_put(m, "array(");
    sg_ix_put_list(m, a, rd, 0, a->data);
    if (big) sg_sh_put(m, ")");
}

/* A shape as NumPy prints it in broadcast errors: (2,3) (4,) (). */
static void sg_ix_put_shape_compact(sg_sh_msg *m, const int64_t *shape, int ndim) {
    sg_sh_put(m, "(");
    for (int d = 0; d < ndim; d++) sg_sh_put(m, d ? ",%lld" : "%lld", (long long)shape[d]);
    sg_sh_put(m, ndim == 1 ? ",)" : ")");
}

/* The first element of index array a (C order) outside [-n, n), in *bad. */
static int sg_ix_find_oob(const sg_array *a, sg_ix_reader rd, int64_t n, int64_t *bad) {
    int64_t total = sg_size(a), idx[SG_MAXDIMS] = {0};
    const char *p = a->data;
    for (int64_t e = 0; e < total; e++) {
        int64_t v = rd(p);
        if (v < -n || v >= n) { *bad = v; return 1; }
        for (int k = a->ndim - 1; k >= 0; k--) {
            p += a->strides[k];
            if (++idx[k] < a->shape[k]) break;
            p -= a->strides[k] * a->shape[k];
            idx[k] = 0;
        }
    }
    return 0;
}
"""


def _reader_support(dtype):
    """(key, code) of ``sg_ix_rd_<dtype>``: an index of ``dtype`` as int64."""
    body = f"return {read_int(dtype, 'p')};"
    return (f"sg_ix_rd_{dtype}", f"static int64_t sg_ix_rd_{dtype}(const char *p) {{ {body} }}\n")


def _inc_support(dtype):
    """(key, code) of ``sg_ix_inc1_<dtype>`` (one element) and ``sg_ix_inc_<dtype>``
    (a plan): dst += src as NumPy adds (ints wrap, bools or, float16 via float)."""
    t = c_type(dtype)
    if dtype == "bool":
        expr = "(uint8_t)(a | b)"
    elif dtype == "float16":
        expr = "(_Float16)((float)a + (float)b)"
    elif dtype.startswith("float"):
        expr = "a + b"
    else:  # unsigned arithmetic: wraps without C's signed-overflow UB
        expr = f"({t})((uint64_t)a + (uint64_t)b)"
    code = f"""
static inline void sg_ix_inc1_{dtype}(char *d, const char *s) {{
    {t} a, b;
    memcpy(&a, d, sizeof a); memcpy(&b, s, sizeof b);
    a = {expr};
    memcpy(d, &a, sizeof a);
}}
static void sg_ix_inc_{dtype}(const sg_sh_plan *p, char *dst, const char *src) {{
    SG_SH_ROWS(p, dst, src,
        for (int64_t i = 0; i < n; i++) sg_ix_inc1_{dtype}(d + i * dstep, s + i * sstep));
}}
"""
    return (f"sg_ix_inc_{dtype}", code)


def _join_tuple(puts):
    """C statements printing a tuple from the statements printing its items."""
    return ' sg_sh_put(&m, ", "); '.join(puts) + (' sg_sh_put(&m, ",");' if len(puts) == 1 else "")


def _support(*extra):
    """The support code of an index kernel: shared helpers, then ``extra``."""
    return SUPPORT + ((INDEX_SUPPORT_KEY, INDEX_SUPPORT_CODE),) + tuple(extra)


# ---------------------------------------------------------------------------
# Basic indexing


def _basic_index(op, node, first, base, x_name):
    """C that sets the sg_array ``view`` to ``base[idx]`` for ``op.idx_list``, the
    ``'?'`` values read from ``in[first]``, ... (errors as perform's)."""
    values = [read_int(v.dtype, f"in[{first + i}].data")
              for i, v in enumerate(node.inputs[first:])]
    lines = [f"    int64_t q[{max(len(values), 1)}];"]
    lines += [f"    q[{i}] = {v};" for i, v in enumerate(values)]
    parts, q = [], iter(range(len(values)))

    def part(p):
        if p == SYMBOLIC:
            return f"q[{next(q)}]"
        return None if p is None else f"{int(p)}LL"

    for entry in op.idx_list:
        if isinstance(entry, SliceSpec):
            parts.append(("slice", [part(p) for p in entry]))
        else:
            parts.append(("int", part(entry)))
    # The index tuple as Python prints it, for error messages.
    put = []
    for kind, value in parts:
        items = value if kind == "slice" else [value]
        fmt = ", ".join("None" if v is None else "%lld" for v in items)
        args = "".join(f", (long long){v}" for v in items if v is not None)
        text = f"slice({fmt})" if kind == "slice" else fmt
        put.append(f'sg_sh_put(&m, "{text}"{args});')
    put_index = _join_tuple(put)
    lines.append(f"    char *data = {base}->data;\n    int od = 0;")
    for dim, (kind, value) in enumerate(parts):
        lines.append(f"    {{\n        int64_t n = {base}->shape[{dim}];")
        if kind == "int":
            lines.append(f"""        int64_t i = {value};
        if (i < -n || i >= n) {{
            sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_INDEX);
            sg_sh_put(&m, "%s: index (", {c_str(op)}); {put_index}
            sg_sh_put(&m, ") is out of bounds for %s of shape ", {x_name});
            sg_sh_put_shape(&m, {base}->shape, {base}->ndim);
            sg_sh_put(&m, " (index %lld is out of bounds for axis {dim} with size %lld)",
                      (long long)i, (long long)n);
            return 1;
        }}
        data += (i < 0 ? i + n : i) * {base}->strides[{dim}];
    }}""")
            continue
        start, stop, step = value
        lines.append(f"        int64_t step = {step or '1'}, start, stop, len;")
        if step is not None:
            lines.append('        if (step == 0) SG_FAIL(err, SG_ERR_VALUE, '
                         '"slice step cannot be zero");\n'
                         '        if (step < -INT64_MAX) step = -INT64_MAX;')
        for name, v, low, high in (("start", start, "0", "n - 1"), ("stop", stop, "n", "-1")):
            if v is None:
                default = f"step < 0 ? {high} : {low}" if name == "start" else \
                    "step < 0 ? -1 : n"
                lines.append(f"        {name} = {default};")
            else:
                lines.append(f"""        {name} = {v};
        if ({name} < 0) {{ {name} += n; if ({name} < 0) {name} = step < 0 ? -1 : 0; }}
        else if ({name} >= n) {name} = step < 0 ? n - 1 : n;""")
        lines.append(f"""        if (step < 0) len = stop < start ? (start - stop - 1) / -step + 1 : 0;
        else len = start < stop ? (stop - start - 1) / step + 1 : 0;
        if (len == 0) {{ start = 0; step = 1; }}
        data += start * {base}->strides[{dim}];
        view.shape[od] = len;
        view.strides[od] = step * {base}->strides[{dim}];
        od++;
    }}""")
    lines.append(f"""    for (int d = {len(parts)}; d < {base}->ndim; d++) {{
        view.shape[od] = {base}->shape[d];
        view.strides[od] = {base}->strides[d];
        od++;
    }}
    view.ndim = od;
    view.data = data;""")
    return "\n".join(lines)


def subtensor_kernel(op, node):
    """Subtensor: a view of ``x`` by strides."""
    if not all_have_c_types(node):
        return None
    run = "    sg_array view;\n" + _basic_index(op, node, 1, "(&in[0])", c_str(node.inputs[0])) + \
        "\n    out[0] = view;"
    return kernel(run, kind=VIEW, view_of=(0,), support=_support())


def _value_check(op, node, target_shape, target_ndim):
    """C raising perform's ValueError when ``y`` (in[1]) broadcasts where it was not
    declared broadcastable, and setting ``ys``: y's strides over the target dims."""
    y = node.inputs[1]
    bcast = ", ".join("1" if b else "0" for b in y.type.broadcastable) or "0"
    return f"""    const int ybc[] = {{{bcast}}};
    int lead = {target_ndim} - {y.ndim};
    int64_t ys[SG_MAXDIMS];
    for (int d = 0; d < lead; d++) ys[d] = 0;
    for (int d = 0; d < {y.ndim}; d++) {{
        int64_t want = {target_shape}[lead + d];
        ys[lead + d] = in[1].shape[d] == want ? in[1].strides[d] : 0;
        if (in[1].shape[d] == want || ybc[d]) continue;
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
        sg_sh_put(&m, "%s: the value %s has shape ", {c_str(op)}, {c_str(y)});
        sg_sh_put_shape(&m, in[1].shape, {y.ndim});
        sg_sh_put(&m, ", which does not match the indexed shape ");
        sg_sh_put_shape(&m, {target_shape}, {target_ndim});
        sg_sh_put(&m, " (dimension %d; only dimensions declared broadcastable may broadcast)", d);
        return 1;
    }}"""


def _copy_input(node, kind):
    """C copying x (in[0]) into the output, unless the op works in place."""
    if kind == INPLACE:
        return ""
    return (f"    sg_sh_assign(out[0].data, out[0].strides, in[0].data, in[0].strides, "
            f"in[0].shape, {node.inputs[0].ndim}, {itemsize(node.inputs[0].dtype)});")


def _update_kind(op):
    """The kernel kind of an update op and its CKernel aliasing arguments."""
    return (INPLACE, {"inplace_of": (0,)}) if op.inplace else (COMPUTE, {})


def inc_subtensor_kernel(op, node):
    """IncSubtensor: x copied (unless in place), then y added to or stored into
    the view ``out[idx]``."""
    if not all_have_c_types(node):
        return None
    dtype, size = str(node.inputs[0].dtype), itemsize(node.inputs[0].dtype)
    kind, kw = _update_kind(op)
    sub_ndim = node.inputs[0].ndim - sum(1 for e in op.idx_list if not isinstance(e, SliceSpec))
    if op.set_instead_of_inc:
        apply = f"sg_sh_copy(&plan, view.data, in[1].data, {size});"
    else:
        apply = f"sg_ix_inc_{dtype}(&plan, view.data, in[1].data);"
    run = f"""{_copy_input(node, kind)}
    sg_array view;
{_basic_index(op, node, 2, "(&out[0])", c_str(node.inputs[0]))}
{_value_check(op, node, "view.shape", sub_ndim)}
    sg_sh_plan plan;
    sg_sh_plan_init(&plan, {sub_ndim}, view.shape, view.strides, ys);
    {apply}"""
    shape = f"    for (int d = 0; d < {node.inputs[0].ndim}; d++) out_shapes[d] = in[0].shape[d];"
    return kernel(run, shape=shape, kind=kind, support=_support(_inc_support(dtype)), **kw)


# ---------------------------------------------------------------------------
# Advanced indexing


def _advanced_entries(op, node, first):
    """(p, entries) for the supported forms: entries describe the run of advanced
    indices starting at dimension p, each ('const', value), ('scalar', input) or
    ('array', input); None for other forms."""
    inputs = iter(range(first, len(node.inputs)))
    kinds = []
    for entry in op.idx_list:
        if isinstance(entry, SliceSpec):
            if entry != FULL_SLICE:
                return None
            kinds.append(None)
            continue
        if entry != SYMBOLIC:
            kinds.append(("const", int(entry)))
            continue
        i = next(inputs)
        var = node.inputs[i]
        if var.dtype not in INT_DTYPES:  # boolean masks run in Python
            return None
        kinds.append(("array" if var.ndim else "scalar", i))
    positions = [d for d, k in enumerate(kinds) if k is not None]
    if not positions or positions != list(range(positions[0], positions[-1] + 1)):
        return None
    entries = [kinds[d] for d in positions]
    if not any(k == "array" for k, _ in entries):
        return None
    return positions[0], entries


def _advanced_prelude(op, node, first, p, entries, base):
    """C checking the ints and the broadcast of the arrays (perform's errors) and
    setting ``fixed`` (the ints' byte offset into ``base``), ``bshape``/``nb``
    and ``bsize``."""
    x_ndim = node.inputs[0].ndim
    arrays = [(j, i) for j, (k, i) in enumerate(entries) if k == "array"]
    nb = max(node.inputs[i].ndim for _, i in arrays)
    # Printing the whole index (for the IndexError of perform).
    put = []
    for dim, entry in enumerate(op.idx_list):
        if isinstance(entry, SliceSpec):
            put.append('sg_sh_put(&m, "slice(None, None, None)");')
            continue
        kind, value = entries[dim - p]
        if kind == "const":
            put.append(f'sg_sh_put(&m, "{value}");')
        elif kind == "scalar":
            v = read_int(node.inputs[value].dtype, f"in[{value}].data")
            put.append(f'sg_sh_put(&m, "%lld", (long long){v});')
        else:
            put.append(f"sg_ix_put_array(&m, &in[{value}], "
                       f"sg_ix_rd_{node.inputs[value].dtype});")
    put_index = _join_tuple(put)
    fail = f"""sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_INDEX);
            sg_sh_put(&m, "%s: index (", {c_str(op)}); {put_index}
            sg_sh_put(&m, ") is out of bounds for %s of shape ", {c_str(node.inputs[0])});
            sg_sh_put_shape(&m, in[0].shape, {x_ndim});
            sg_sh_put(&m, " (");"""
    lines = ["    int64_t fixed = 0;"]
    for j, (kind, value) in enumerate(entries):
        if kind == "array":
            continue
        v = f"{value}LL" if kind == "const" else read_int(node.inputs[value].dtype,
                                                         f"in[{value}].data")
        lines.append(f"""    {{
        int64_t i = {v}, n = in[0].shape[{p + j}];
        if (i < -n || i >= n) {{
            {fail}
            sg_sh_put(&m, "index %lld is out of bounds for axis {p + j} with size %lld)",
                      (long long)i, (long long)n);
            return 1;
        }}
        fixed += (i < 0 ? i + n : i) * {base}->strides[{p + j}];
    }}""")
    lines.append(f"    int64_t bshape[{nb}];\n    const int nb = {nb};\n    int mismatch = 0;")
    lines.append(f"    for (int b = 0; b < {nb}; b++) bshape[b] = 1;")
    for _, i in arrays:
        nd = node.inputs[i].ndim
        lines.append(f"""    for (int d = 0; d < {nd}; d++) {{
        int64_t s = in[{i}].shape[d], *t = &bshape[{nb - nd} + d];
        if (s == 1) continue;
        if (*t == 1) *t = s; else if (*t != s) mismatch = 1;
    }}""")
    shapes = " ".join(f'sg_ix_put_shape_compact(&m, in[{i}].shape, {node.inputs[i].ndim}); '
                      f'sg_sh_put(&m, " ");' for _, i in arrays)
    lines.append(f"""    if (mismatch) {{
            {fail}
            sg_sh_put(&m, "shape mismatch: indexing arrays could not be broadcast "
                          "together with shapes ");
            {shapes}
            sg_sh_put(&m, ")");
            return 1;
    }}
    int64_t bsize = 1;
    for (int b = 0; b < nb; b++) bsize *= bshape[b];
    (void)fixed; (void)bsize;""")
    check = []
    for j, i in arrays:
        reader = f"sg_ix_rd_{node.inputs[i].dtype}"
        check.append(f"""        if (sg_ix_find_oob(&in[{i}], {reader}, in[0].shape[{p + j}], &bad)) {{
            {fail}
            sg_sh_put(&m, "index %lld is out of bounds for axis {p + j} with size %lld)",
                      (long long)bad, (long long)in[0].shape[{p + j}]);
            return 1;
        }}""")
    bounds = "    if (bsize > 0) {\n        int64_t bad;\n" + "\n".join(check) + "\n    }"
    return "\n".join(lines), bounds, nb


def _advanced_loop(node, p, entries, nb, xside, dense, gather, body1, body):
    """C iterating the outer dims (< p) and the broadcast index dims: at each
    position ``xp`` points into ``xside`` (an array of x's shape) at the indexed
    element and ``dp`` into the data ``dense`` (laid out in the indexed shape,
    strides ``dstr``); ``body1``/``body`` (element / plan forms) use them.  The
    inner plan writes ``dense`` when ``gather``, else ``xside``."""
    x_ndim, k = node.inputs[0].ndim, len(entries)
    arrays = [(j, i) for j, (kind, i) in enumerate(entries) if kind == "array"]
    inner = x_ndim - p - k
    nit = p + nb
    arr_decl, arr_off, arr_step, arr_back = [], [], [], []
    for a, (j, i) in enumerate(arrays):
        nd = node.inputs[i].ndim
        # Array a's strides over the iteration dims (0 outside its dims, and where it broadcasts).
        arr_decl.append(f"""    const char *ap{a} = in[{i}].data;
    int64_t as{a}[{nit}];
    for (int d = 0; d < {nit}; d++) as{a}[d] = 0;
    for (int d = 0; d < {nd}; d++)
        if (in[{i}].shape[d] != 1) as{a}[{p + nb - nd} + d] = in[{i}].strides[d];""")
        n_j = f"{xside}->shape[{p + j}]"
        arr_off.append(f"{{ int64_t v = sg_ix_rd_{node.inputs[i].dtype}(ap{a}); "
                       f"off += (v < 0 ? v + {n_j} : v) * {xside}->strides[{p + j}]; }}")
        arr_step.append(f"ap{a} += as{a}[k];")
        arr_back.append(f"ap{a} -= as{a}[k] * cnt_shape[k];")
    return f"""    int64_t cnt_shape[{max(nit, 1)}], xs[{max(nit, 1)}], cnt[{max(nit, 1)}];
    for (int d = 0; d < {p}; d++) {{
        cnt_shape[d] = {xside}->shape[d];
        xs[d] = {xside}->strides[d];
    }}
    for (int b = 0; b < {nb}; b++) {{ cnt_shape[{p} + b] = bshape[b]; xs[{p} + b] = 0; }}
    int64_t total = 1;
    for (int d = 0; d < {nit}; d++) {{ total *= cnt_shape[d]; cnt[d] = 0; }}
{chr(10).join(arr_decl)}
    sg_sh_plan plan;
    sg_sh_plan_init(&plan, {inner}, {xside}->shape + {p + k},
                    {_plan_strides(gather, xside, p, k, nb)});
    char *xo = {xside}->data + fixed;
    char *dp = (char *)({dense});
    for (int64_t e = 0; e < total; e++) {{
        int64_t off = 0;
        {" ".join(arr_off)}
        char *xp = xo + off;
        if (plan.ndim == 0) {{ {body1} }} else {{ {body} }}
        for (int k = {nit} - 1; k >= 0; k--) {{
            xo += xs[k]; dp += dstr[k]; {" ".join(arr_step)}
            if (++cnt[k] < cnt_shape[k]) break;
            xo -= xs[k] * cnt_shape[k]; dp -= dstr[k] * cnt_shape[k]; {" ".join(arr_back)}
            cnt[k] = 0;
        }}
    }}"""


def _plan_strides(gather, xside, p, k, nb):
    """The (ds, ss) arguments of the inner plan."""
    x_inner = f"{xside}->strides + {p + k}"
    d_inner = f"dstr + {p + nb}"
    return f"{d_inner}, {x_inner}" if gather else f"{x_inner}, {d_inner}"


def advanced_subtensor_kernel(op, node):
    """AdvancedSubtensor for the forms of the module docstring (None for others)."""
    if not all_have_c_types(node):
        return None
    found = _advanced_entries(op, node, 1)
    if found is None:
        return None
    p, entries = found
    prelude, bounds, nb = _advanced_prelude(op, node, 1, p, entries, "(&in[0])")
    x_ndim, k = node.inputs[0].ndim, len(entries)
    size = itemsize(node.inputs[0].dtype)
    out_ndim = p + nb + x_ndim - p - k
    shape = f"""{prelude}
    int od = 0;
    for (int d = 0; d < {p}; d++) out_shapes[od++] = in[0].shape[d];
    for (int b = 0; b < nb; b++) out_shapes[od++] = bshape[b];
    for (int d = {p + k}; d < {x_ndim}; d++) out_shapes[od++] = in[0].shape[d];"""
    loop = _advanced_loop(node, p, entries, nb, "(&in[0])", "out[0].data", True,
                          f"memcpy(dp, xp, {size});", f"sg_sh_copy(&plan, dp, xp, {size});")
    run = f"""{prelude}
{bounds}
    if (sg_size(&out[0]) == 0) return 0;
    const int64_t *dstr = out[0].strides;
    (void){out_ndim};
{loop}"""
    return kernel(run, shape=shape, support=_support(*_readers(node, entries)))


def _readers(node, entries):
    """Support code reading each index dtype of ``entries``."""
    dtypes = sorted({str(node.inputs[i].dtype) for kind, i in entries if kind != "const"})
    return [_reader_support(d) for d in dtypes]


def advanced_inc_subtensor_kernel(op, node):
    """AdvancedIncSubtensor (np.add.at, or assignment where the last repeated index
    wins) for the forms of the module docstring (None for others)."""
    if not all_have_c_types(node):
        return None
    found = _advanced_entries(op, node, 2)
    if found is None:
        return None
    p, entries = found
    dtype, size = str(node.inputs[0].dtype), itemsize(node.inputs[0].dtype)
    kind, kw = _update_kind(op)
    x_ndim, k = node.inputs[0].ndim, len(entries)
    prelude, bounds, nb = _advanced_prelude(op, node, 2, p, entries, "(&out[0])")
    t_ndim = p + nb + x_ndim - p - k
    if op.set_instead_of_inc:
        body1, body = f"memcpy(xp, dp, {size});", f"sg_sh_copy(&plan, xp, dp, {size});"
    else:
        body1, body = f"sg_ix_inc1_{dtype}(xp, dp);", f"sg_ix_inc_{dtype}(&plan, xp, dp);"
    run = f"""{_copy_input(node, kind)}
{prelude}
{bounds}
    int64_t target[SG_MAXDIMS];
    {{
        int od = 0;
        for (int d = 0; d < {p}; d++) target[od++] = in[0].shape[d];
        for (int b = 0; b < nb; b++) target[od++] = bshape[b];
        for (int d = {p + k}; d < {x_ndim}; d++) target[od++] = in[0].shape[d];
    }}
{_value_check(op, node, "target", t_ndim)}
    int64_t tsize = 1;
    for (int d = 0; d < {t_ndim}; d++) tsize *= target[d];
    if (tsize == 0) return 0;
    const int64_t *dstr = ys;
{_advanced_loop(node, p, entries, nb, "(&out[0])", "in[1].data", False, body1, body)}"""
    shape = f"    for (int d = 0; d < {x_ndim}; d++) out_shapes[d] = in[0].shape[d];"
    support = _support(_inc_support(dtype), *_readers(node, entries))
    return kernel(run, shape=shape, kind=kind, support=support, **kw)
