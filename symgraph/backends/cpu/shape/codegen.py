"""Native kernels for the shape ops: views, allocation, ranges and joins.

Views (``DimShuffle``, ``SpecifyShape``, ``Unbroadcast``, ``Split``) only
compute new strides into their input: no data moves.  The others are compute
kernels that write every element of C-contiguous (or reused) outputs.  Data
moves go through ``sg_sh_plan``: a copy described once (size-1 dimensions
dropped, dimensions merged where both sides step through them as one), so a
contiguous block is one ``memcpy`` whatever its rank.  Moves copy bytes by
element size, so they do not depend on the dtype.

``Reshape`` is a "view or copy" kernel (VIEW_OR_COPY): the input's layout is
known only at run time, so its view function decides on each call, as NumPy's
``reshape`` does, whether the new shape can be a view of the input (the same
shape, a contiguous input, or strides that NumPy's no-copy reshape can
regroup); when not, the runtime allocates a C-contiguous output and the run
function copies.

Error messages repeat the ops' ``perform`` messages word for word; the
variable names in them are fixed when the kernel is generated.
"""


import numpy as np

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type, has_c_type
from symgraph.backends.native.kernel import COMPUTE, VIEW, VIEW_OR_COPY, CKernel
from symgraph.backends.c_family.c_files import c_file

# ---------------------------------------------------------------------------
# Support code shared by the shape and index kernels

SUPPORT_KEY = "sg_sh_support_v2"

SUPPORT_CODE = c_file("cpu/shape/support.inc")

SUPPORT = ((SUPPORT_KEY, SUPPORT_CODE),)


def read_int(dtype, ptr):
    """A C expression: the integer of ``dtype`` at ``ptr`` as int64_t."""
    dtype = str(dtype)
    if dtype == "uint64":
        return f"sg_sh_u64(*(const uint64_t *)({ptr}))"
    return f"((int64_t)*(const {c_type(dtype)} *)({ptr}))"


def all_have_c_types(node):
    """True when every input and output of ``node`` has a C type (not complex)."""
    return all(has_c_type(v.type.dtype) for v in list(node.inputs) + list(node.outputs))


def itemsize(dtype):
    """The size in bytes of one element of ``dtype``."""
    return np.dtype(dtype).itemsize


def kernel(run, shape=None, kind=COMPUTE, view=None, **kw):
    """A CKernel from the bodies of its run, (compute kernels) shape and
    (view-or-copy kernels) view functions.

    The bodies see ``in``, ``out``/``out_shapes`` and ``err``; ``return 0`` is
    appended.
    """
    src = []
    if kind != VIEW:
        src.append("int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {\n"
                   "    (void)in; (void)out_shapes; (void)err;\n"
                   f"{shape or ''}\n    return 0;\n}}\n")
    if kind == VIEW_OR_COPY:
        src.append("int SG_FN(view)(const sg_array *in, const int64_t *out_shapes, sg_array *out,"
                   " sg_error *err) {\n    (void)in; (void)out_shapes; (void)out; (void)err;\n"
                   f"{view}\n    return 0;\n}}\n")
    src.append("int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {\n"
               "    (void)in; (void)out; (void)err;\n"
               f"{run}\n    return 0;\n}}\n")
    kw.setdefault("support", SUPPORT)
    return CKernel(source="\n".join(src), kind=kind, **kw)


# ---------------------------------------------------------------------------
# Views


def dimshuffle_kernel(op, node):
    """DimShuffle: permute, add ('x') and drop size-1 dimensions by strides."""
    if not all_have_c_types(node):
        return None
    lines = []
    for d in op.drop:
        lines.append(f"    if (in[0].shape[{d}] != 1) SG_FAIL(err, SG_ERR_VALUE, "
                     f"\"%s: dimension {d} has size %lld, not 1\", {c_string(op, quote=True)}, "
                     f"(long long)in[0].shape[{d}]);")
    lines.append(f"    out[0].data = in[0].data;\n    out[0].ndim = {len(op.new_order)};")
    for i, d in enumerate(op.new_order):
        if d == "x":
            lines.append(f"    out[0].shape[{i}] = 1; out[0].strides[{i}] = 0;")
        else:
            lines.append(f"    out[0].shape[{i}] = in[0].shape[{d}]; "
                         f"out[0].strides[{i}] = in[0].strides[{d}];")
    return kernel("\n".join(lines), kind=VIEW, view_of=(0,))


_SAME_VIEW = """    out[0].data = in[0].data;
    out[0].ndim = in[0].ndim;
    for (int d = 0; d < in[0].ndim; d++) {
        out[0].shape[d] = in[0].shape[d];
        out[0].strides[d] = in[0].strides[d];
    }"""


def unbroadcast_kernel(op, node):
    """Unbroadcast: the input itself (only the type changes)."""
    if not all_have_c_types(node):
        return None
    return kernel(_SAME_VIEW, kind=VIEW, view_of=(0,))


def specify_shape_kernel(op, node):
    """SpecifyShape: check the sizes, then the input itself."""
    if not all_have_c_types(node):
        return None
    ndim = len(op.shape)
    want, extra = [], 1
    for s in op.shape:
        if s == "?":
            want.append(read_int(node.inputs[extra].dtype, f"in[{extra}].data"))
            extra += 1
        else:
            want.append("-1" if s is None else f"{int(s)}LL")
    lines = [f"    int64_t want[{max(ndim, 1)}];"]
    lines += [f"    want[{d}] = {w};" for d, w in enumerate(want)]
    known = [d for d, s in enumerate(op.shape) if s is not None]
    if known:
        lines.append(f"""    static const int known[] = {{{', '.join(map(str, known))}}};
    for (int k = 0; k < {len(known)}; k++) {{
        int dim = known[k];
        if (in[0].shape[dim] == want[dim]) continue;
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_ASSERTION);
        sg_sh_put(&m, "SpecifyShape: %s was specified to have shape (", {c_string(node.inputs[0], quote=True)});
        for (int d = 0; d < {ndim}; d++) {{
            if (d) sg_sh_put(&m, ", ");
            if ({_none_mask(op)}[d]) sg_sh_put(&m, "'?'");
            else sg_sh_put(&m, "%lld", (long long)want[d]);
        }}
        sg_sh_put(&m, "{',' if ndim == 1 else ''}), but got shape ");
        sg_sh_put_shape(&m, in[0].shape, {ndim});
        sg_sh_put(&m, " (dimension %d differs)", dim);
        return 1;
    }}""")
    return kernel("\n".join(lines) + "\n" + _SAME_VIEW, kind=VIEW, view_of=(0,))


def _none_mask(op):
    """A C array literal: 1 where the specified shape has None."""
    return "((const int[]){" + ", ".join("1" if s is None else "0" for s in op.shape) + "})"


def split_kernel(op, node):
    """Split: each piece is a view of the input along ``axis``."""
    if not all_have_c_types(node):
        return None
    n, axis = op.len_splits, op.axis
    size = read_int(node.inputs[1].dtype, "in[1].data + i * in[1].strides[0]")
    run = f"""    const sg_array *x = &in[0];
    if (in[1].shape[0] != {n}) SG_FAIL(err, SG_ERR_VALUE, "%s: got %lld split sizes, expected %d",
                                       {c_string(op, quote=True)}, (long long)in[1].shape[0], {n});
    int64_t total = 0, bad = 0;
    for (int64_t i = 0; i < {n}; i++) {{
        int64_t s = {size};
        if (s < 0) bad = 1;
        total += s;
    }}
    if (bad || total != x->shape[{axis}]) {{
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
        sg_sh_put(&m, "%s: split sizes [", {c_string(op, quote=True)});
        for (int64_t i = 0; i < {n}; i++) sg_sh_put(&m, i ? ", %lld" : "%lld", (long long){size});
        sg_sh_put(&m, "] do not add up to the size %lld of dimension {axis} of %s",
                  (long long)x->shape[{axis}], {c_string(node.inputs[0], quote=True)});
        return 1;
    }}
    int64_t start = 0;
    for (int64_t i = 0; i < {n}; i++) {{
        int64_t s = {size};
        out[i] = *x;
        out[i].data = x->data + start * x->strides[{axis}];
        out[i].shape[{axis}] = s;
        start += s;
    }}"""
    return kernel(run, kind=VIEW, view_of=(0,) * n)


# ---------------------------------------------------------------------------
# Shapes


def shape_kernel(op, node):
    """Shape: the input's shape as an int64 vector."""
    if not all_have_c_types(node):
        return None
    ndim = node.inputs[0].ndim
    run = f"""    for (int d = 0; d < {ndim}; d++)
        memcpy(out[0].data + d * out[0].strides[0], &in[0].shape[d], 8);"""
    return kernel(run, shape=f"    out_shapes[0] = {ndim};")


def shape_i_kernel(op, node):
    """Shape_i: one dimension of the input's shape, as an int64 scalar."""
    if not all_have_c_types(node):
        return None
    return kernel(f"    memcpy(out[0].data, &in[0].shape[{op.i}], 8);")


_NOCOPY_RESHAPE_KEY = "sg_sh_nocopy_reshape_v1"

_NOCOPY_RESHAPE = c_file("cpu/shape/nocopy_reshape.inc")


def _reshape_view(ndim, size):
    """C of Reshape's view function: NumPy's cases for a view, in its order
    (the same shape keeps the strides; a contiguous input gets C strides;
    otherwise the no-copy regrouping), else SG_NO_VIEW."""
    return f"""    out[0].data = in[0].data;
    out[0].ndim = {ndim};
    int same = in[0].ndim == {ndim};
    for (int d = 0; d < {ndim}; d++) {{
        out[0].shape[d] = out_shapes[d];
        same = same && in[0].shape[d] == out_shapes[d];
    }}
    if (same) {{
        for (int d = 0; d < {ndim}; d++) out[0].strides[d] = in[0].strides[d];
        return 0;
    }}
    if (sg_sh_viewable_contiguous(&in[0], {size})) {{
        sg_sh_c_strides({ndim}, out_shapes, {size}, out[0].strides);
        return 0;
    }}
    if (!sg_sh_nocopy_strides(&in[0], {ndim}, out_shapes, {size}, out[0].strides))
        return SG_NO_VIEW;"""


def reshape_kernel(op, node, copy=None, support=()):
    """Reshape: a view of the input when NumPy gives one, else a copy into the
    new shape (a VIEW_OR_COPY kernel, see the module docstring).  ``copy``
    (C, given ``size``, the item size) replaces the host copy: a device
    backend copies its own memory; ``support`` adds its helpers."""
    if not all_have_c_types(node):
        return None
    ndim, shp_dtype = op.ndim, str(node.inputs[1].dtype)
    entry = read_int(shp_dtype, "in[1].data + i * in[1].strides[0]")
    shape = f"""    int64_t n = in[1].shape[0];
    if (n != {ndim}) {{
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
        sg_sh_put(&m, "%s: the shape (", {c_string(op, quote=True)});
        for (int64_t i = 0; i < n; i++)  /* perform prints NumPy scalars */
            sg_sh_put(&m, "%snp.{shp_dtype}(%lld)", i ? ", " : "", (long long){entry});
        sg_sh_put(&m, "%s has %lld entries, expected {ndim}", n == 1 ? ",)" : ")", (long long)n);
        return 1;
    }}
    int64_t *o = out_shapes, known = 1;
    int unknown = -1, bad = 0;
    for (int64_t i = 0; i < n; i++) {{
        o[i] = {entry};
        if (o[i] < 0) {{
            if (unknown >= 0) bad = 1;
            unknown = (int)i;
        }} else if (__builtin_mul_overflow(known, o[i], &known)) {{
            bad = 1;
        }}
    }}
    int64_t total = sg_size(&in[0]);
    if (!bad && unknown >= 0) {{
        if (known == 0 || total % known != 0) bad = 1;
        else o[unknown] = total / known;
    }} else if (!bad && known != total) {{
        bad = 1;
    }}
    if (bad) {{
        sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
        sg_sh_put(&m, "%s: cannot reshape %s of shape ", {c_string(op, quote=True)}, {c_string(node.inputs[0], quote=True)});
        sg_sh_put_shape(&m, in[0].shape, in[0].ndim);
        sg_sh_put(&m, " (%lld elements) to (", (long long)total);
        for (int64_t i = 0; i < n; i++) sg_sh_put(&m, i ? ", %lld" : "%lld", (long long){entry});
        sg_sh_put(&m, n == 1 ? ",)" : ")");
        return 1;
    }}"""
    size = itemsize(node.inputs[0].dtype)
    run = (copy or "    sg_sh_copy_flat(&out[0], &in[0], {size});").format(size=size)
    return kernel(run, shape=shape, kind=VIEW_OR_COPY, view=_reshape_view(ndim, size),
                  view_of=(0,),
                  support=SUPPORT + ((_NOCOPY_RESHAPE_KEY, _NOCOPY_RESHAPE),) + tuple(support))
