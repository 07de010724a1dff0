"""Native kernels for basic indexing: Subtensor (a view) and IncSubtensor, and
the support code that the advanced-indexing kernels share with them.

Basic indexing follows NumPy exactly: ints wrap once when negative, slices
clamp as ``slice.indices`` does, an empty slice has start 0 and step 1 (so the
view's data pointer never leaves the input), and errors are checked left to
right.

Advanced indexing and Nonzero: ``advanced_index_codegen``.

Error messages repeat ``perform``'s word for word, index arrays included
(``tolist()`` up to 10 elements, else NumPy's ``repr``), up to the 511 bytes
that a kernel's message holds.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import COMPUTE, INPLACE, VIEW
from symgraph.backends.cpu.shape.codegen import (SUPPORT, all_have_c_types, itemsize,
                                                   kernel, read_int)
from symgraph.ops.subtensor import SYMBOLIC, SliceSpec
from symgraph.backends.c_family.c_files import c_file

INDEX_SUPPORT_KEY = "sg_ix_support_v2"

INDEX_SUPPORT_CODE = c_file("cpu/index/support.inc")


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


def _nonzero_support(dtype):
    """(key, code) of ``sg_ix_count_nonzero_<dtype>`` and ``sg_ix_nonzero_<dtype>``
    (each output k gets dimension k's index of every non-zero element, in C order).
    NaN counts as non-zero and -0.0 as zero, as in NumPy."""
    t = c_type(dtype)
    code = f"""
static inline int sg_ix_nz_{dtype}(const char *p) {{
    {t} v;
    memcpy(&v, p, sizeof v);
    return v != 0;
}}
static int64_t sg_ix_count_nonzero_{dtype}(const sg_array *a) {{
    if (sg_size(a) == 0) return 0;
    int last = a->ndim - 1;
    int64_t n = a->shape[last], step = a->strides[last], idx[SG_MAXDIMS] = {{0}}, off = 0;
    int64_t count = 0, none[SG_MAXDIMS] = {{0}};
    const char *row = a->data;
    do {{
        for (int64_t i = 0; i < n; i++) count += sg_ix_nz_{dtype}(row + i * step);
    }} while (sg_ix_next_row(a, idx, &row, none, &off));
    return count;
}}
static void sg_ix_nonzero_{dtype}(const sg_array *a, sg_array *out) {{
    if (sg_size(a) == 0) return;
    int last = a->ndim - 1;
    int64_t n = a->shape[last], step = a->strides[last], idx[SG_MAXDIMS] = {{0}}, off = 0;
    int64_t e = 0, none[SG_MAXDIMS] = {{0}};
    const char *row = a->data;
    do {{
        for (int64_t i = 0; i < n; i++) {{
            if (!sg_ix_nz_{dtype}(row + i * step)) continue;
            idx[last] = i;
            for (int d = 0; d <= last; d++)
                memcpy(out[d].data + e * out[d].strides[0], &idx[d], sizeof idx[d]);
            e++;
        }}
        idx[last] = 0;
    }} while (sg_ix_next_row(a, idx, &row, none, &off));
}}
"""
    return (f"sg_ix_nonzero_{dtype}", code)


def _join_tuple(puts):
    """C statements printing a tuple from the statements printing its items."""
    return ' sg_sh_put(&m, ", "); '.join(puts) + (' sg_sh_put(&m, ",");' if len(puts) == 1 else "")


def _support(*extra):
    """The support code of an index kernel: shared helpers, then ``extra``."""
    return SUPPORT + ((INDEX_SUPPORT_KEY, INDEX_SUPPORT_CODE),) + tuple(extra)


# ---------------------------------------------------------------------------
# Basic indexing


def _put_slice_or_int(kind, value):
    """The C statement printing an int (a C expression) or a slice (three C
    expressions, None where absent) as Python prints it in an index tuple."""
    items = value if kind == "slice" else [value]
    fmt = ", ".join("None" if v is None else "%lld" for v in items)
    args = "".join(f", (long long){v}" for v in items if v is not None)
    text = f"slice({fmt})" if kind == "slice" else fmt
    return f'sg_sh_put(&m, "{text}"{args});'


def _slice_c(start, stop, step):
    """C lines declaring ``step``, ``start``, ``stop`` and ``len`` for the slice of C
    expressions (None where absent) over a dimension of size ``n`` (in scope), as
    ``slice.indices``; an empty slice gets start 0 and step 1."""
    lines = [f"        int64_t step = {step or '1'}, start, stop, len;"]
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
    lines.append("""        if (step < 0) len = stop < start ? (start - stop - 1) / -step + 1 : 0;
        else len = start < stop ? (stop - start - 1) / step + 1 : 0;
        if (len == 0) { start = 0; step = 1; }""")
    return lines


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
    put_index = _join_tuple([_put_slice_or_int(kind, value) for kind, value in parts])
    lines.append(f"    char *data = {base}->data;\n    int od = 0;")
    for dim, (kind, value) in enumerate(parts):
        lines.append(f"    {{\n        int64_t n = {base}->shape[{dim}];")
        if kind == "int":
            lines.append(f"""        int64_t i = {value};
        if (i < -n || i >= n) {{
            sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_INDEX);
            sg_sh_put(&m, "%s: index (", {c_string(op, quote=True)}); {put_index}
            sg_sh_put(&m, ") is out of bounds for %s of shape ", {x_name});
            sg_sh_put_shape(&m, {base}->shape, {base}->ndim);
            sg_sh_put(&m, " (index %lld is out of bounds for axis {dim} with size %lld)",
                      (long long)i, (long long)n);
            return 1;
        }}
        data += (i < 0 ? i + n : i) * {base}->strides[{dim}];
    }}""")
            continue
        lines += _slice_c(*value)
        lines.append(f"""        data += start * {base}->strides[{dim}];
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
    run = "    sg_array view;\n" + _basic_index(op, node, 1, "(&in[0])", c_string(node.inputs[0], quote=True)) + \
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
        sg_sh_put(&m, "%s: the value %s has shape ", {c_string(op, quote=True)}, {c_string(y, quote=True)});
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
{_basic_index(op, node, 2, "(&out[0])", c_string(node.inputs[0], quote=True))}
{_value_check(op, node, "view.shape", sub_ndim)}
    sg_sh_plan plan;
    sg_sh_plan_init(&plan, {sub_ndim}, view.shape, view.strides, ys);
    {apply}"""
    shape = f"    for (int d = 0; d < {node.inputs[0].ndim}; d++) out_shapes[d] = in[0].shape[d];"
    return kernel(run, shape=shape, kind=kind, support=_support(_inc_support(dtype)), **kw)
