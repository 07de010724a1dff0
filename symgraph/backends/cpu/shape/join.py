"""Native kernels of ``MakeVector`` and ``Join``: new arrays written from
several inputs through the shape kernels' copy plans."""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.cpu.shape.codegen import all_have_c_types, itemsize, kernel


def make_vector_kernel(op, node):
    """MakeVector: the scalar inputs written into a vector."""
    if not all_have_c_types(node):
        return None
    n, size = len(node.inputs), itemsize(op.dtype)
    run = "\n".join(f"    memcpy(out[0].data + {i} * out[0].strides[0], in[{i}].data, {size});"
                    for i in range(n))
    return kernel(run, shape=f"    out_shapes[0] = {n};")


def join_kernel(op, node):
    """Join: each input copied into its slab of the output along ``axis``."""
    if not all_have_c_types(node):
        return None
    n, axis, ndim = len(node.inputs), op.axis, node.inputs[0].ndim
    names = ", ".join(c_string(v, quote=True) for v in node.inputs)
    shape = f"""    static const char *names[] = {{{names}}};
    for (int pos = 0; pos < {n}; pos++) {{
        for (int d = 0; d < {ndim}; d++) {{
            if (d == {axis} || in[pos].shape[d] == in[0].shape[d]) continue;
            sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_VALUE);
            sg_sh_put(&m, "%s: input %d (%s) has shape ", {c_string(op, quote=True)}, pos, names[pos]);
            sg_sh_put_shape(&m, in[pos].shape, {ndim});
            sg_sh_put(&m, ", which differs from input 0's ");
            sg_sh_put_shape(&m, in[0].shape, {ndim});
            sg_sh_put(&m, " in dimension %d", d);
            return 1;
        }}
    }}
    for (int d = 0; d < {ndim}; d++) out_shapes[d] = in[0].shape[d];
    out_shapes[{axis}] = 0;
    for (int pos = 0; pos < {n}; pos++) out_shapes[{axis}] += in[pos].shape[{axis}];"""
    run = f"""    char *dst = out[0].data;
    for (int pos = 0; pos < {n}; pos++) {{
        sg_sh_assign(dst, out[0].strides, in[pos].data, in[pos].strides, in[pos].shape, {ndim},
                     {itemsize(node.inputs[0].dtype)});
        dst += in[pos].shape[{axis}] * out[0].strides[{axis}];
    }}"""
    return kernel(run, shape=shape)
