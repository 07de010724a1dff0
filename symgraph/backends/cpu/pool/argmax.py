"""Native kernels of max pooling with an argmax (``ops/pool_argmax.py``).

Like ``pool_codegen.py`` (whose geometry helpers these kernels share), one
kernel per node with the window written in as constants, the leading
dimensions a batch of planes (shared among OpenMP threads).

* ``MaxPoolWithArgmax``: per window, its elements in row-major order,
  keeping the maximum and its offset in the full window (``v > m``, or
  ``v`` the first NaN).  Windows full in the outer dimensions and inside
  the line are straight-line code (up to ``INNER_MAX`` elements), the
  others (clipped) a loop scan.  2x2 windows with stride 2 and no padding
  over float32 planes whose last dimension is contiguous take the vector
  row functions of ``c_src/sg_pool_argmax.h``; a partial last row or column
  (without ignore_border) takes the scan.
* ``MaxPoolGradFromArgmax``: when the windows tile the plane (stride ==
  ws), every element of every window is written once (the gradient at the
  argmax, 0 elsewhere) and only what no window covers is zeroed: no zeroing
  pass over the whole output.  2x2 stride 2 float32 takes the vector rows.
  Otherwise (overlaps, gaps) the plane is zeroed and each window's gradient
  added at its argmax.  An offset outside its window is a ValueError, as in
  the Python ``perform``.
"""

from string import Template

from symgraph.backends.c_family.c_types import FLOAT_DTYPES as _FLOATS
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.cpu.pool.forward import _GEOMETRY, _Gen, _offset, _out_loops, plane_chunk
from symgraph.backends.c_family.c_files import c_file

__all__ = ["argmax_kernel", "VERSION"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 1



def _parallel(gen, body, error=None):
    """``body`` (may set ``bad`` for plane ``l``) for every plane; ``error``:
    the message when some plane set ``bad`` (None: it never does)."""
    # one thread while the calling thread backs off under load (sg_region_team)
    pragma = (f"#pragma omp parallel for schedule(dynamic, {plane_chunk('size')}) "
              f"num_threads(sg_region_team()) if(size >= {gen.minpar}) "
              f"reduction(|:bad)" if gen.openmp else "")
    check = (f'    if (bad) SG_FAIL(err, SG_ERR_VALUE, "{gen.name}: {error}");' if error
             else "    (void)bad;")
    return f"""    int bad = 0;
{pragma}
    for (int64_t l = 0; l < L; l++) {{
{body}
    }}
{check}
    return 0;"""


def _is_2x2(op, dtype):
    return (dtype == "float32" and op.ndim == 2 and op.ws == (2, 2) and op.stride == (2, 2)
            and op.pad == (0, 0))


def _full_offset(gen, index):
    """C expression: the row-major offset in the full window of position
    ``index``0.. of the window of output o0.. (starts o_i * stride - pad)."""
    op, expr = gen.op, ""
    for i in range(gen.nd):
        term = f"({index}{i} - (o{i} * {op.stride[i]} - {op.pad[i]}))"
        expr = term if not expr else f"({expr}) * {op.ws[i]} + {term}"
    return expr


def _window_nest(gen, inner):
    lines, pad = [], ""
    for i in range(gen.nd):
        lines.append(f"{pad}for (int64_t i{i} = a{i}; i{i} < b{i}; i{i}++) {{")
        pad += "    "
    lines += [pad + s for s in inner.strip("\n").split("\n")]
    for i in reversed(range(gen.nd)):
        pad = pad[:-4]
        lines.append(pad + "}")
    return "\n".join(lines)


# -- forward -------------------------------------------------------------------------

_FORWARD = Template(c_file("cpu/pool/argmax_forward.inc"))

#: The 2x2 float32 fast path of a forward plane: the full windows by vector
#: rows (when the last dimension is contiguous), the rest by the scan.
_FORWARD_FAST = r"""
    if (xs[1] == 4 && zs[1] == 4 && as[1] == 1) {
        const int64_t FH = xn[0] / 2 < zn[0] ? xn[0] / 2 : zn[0];
        const int64_t FW = xn[1] / 2 < zn[1] ? xn[1] / 2 : zn[1];
        for (int64_t o0 = 0; o0 < FH; o0++)
            sg_pa_fwd2x2_row((const float *)(x + 2 * o0 * xs[0]),
                             (const float *)(x + (2 * o0 + 1) * xs[0]),
                             (float *)(z + o0 * zs[0]), (uint8_t *)(am + o0 * as[0]), FW);
        if (FH < zn[0] || FW < zn[1]) SG_FN(scan)(x, xn, xs, z, zn, zs, am, as, 1);
        return;
    }"""

#: Windows up to this many elements get the straight-line inner code.
INNER_MAX = 64


def _inner(gen, argmax_t):
    """C function: the windows that are full in the outer dimensions and
    inside the line in the last one (the scan skips the same set), each one
    block of straight-line code: its elements in row-major order, the maximum
    kept by selects (maxima move unpredictably: no branches)."""
    import itertools

    T, C, op, nd = gen.T, gen.C, gen.op, gen.nd
    outer = range(nd - 1)
    lines = list(itertools.product(*[range(op.ws[i]) for i in outer]))
    head, pad = [], "    "
    for i in outer:
        head.append(f"{pad}for (int64_t o{i} = 0; o{i} < zn[{i}]; o{i}++) {{")
        pad += "    "
        head.append(pad + gen.window(i, f"o{i}", f"xn[{i}]"))
    full = " && ".join(f"b{i} - a{i} == {op.ws[i]}" for i in outer)
    body = [f"if (!({full})) continue;"]
    for k, line in enumerate(lines):
        off = " + ".join(f"(a{i} + {line[i]}) * xs[{i}]" for i in outer)
        body.append(f"const char *x{k} = x + {off};")
    zoff = " + ".join(f"o{i} * zs[{i}]" for i in outer)
    aoff = " + ".join(f"o{i} * as[{i}]" for i in outer)
    body += [f"char *zr = z + {zoff};", f"char *ar = am + {aoff};"]

    def window_loop(load, store_z, store_a):
        out = ["for (int64_t ow = lo; ow < hi; ow++) {",
               f"    const int64_t c = ow * {op.stride[-1]} - {op.pad[-1]};",
               f"    {C} m = ({C}){load(0, 0)};", "    int32_t k = 0;"]
        for kk in range(len(lines)):
            for t in range(op.ws[-1]):
                if kk or t:
                    out.append(f"    {{ const {C} v = ({C}){load(kk, t)}; "
                               f"const int take = (v > m) | ((v != v) & (m == m)); "
                               f"m = take ? v : m; k = take ? {kk * op.ws[-1] + t} : k; }}")
        return out + [f"    {store_z} = ({T})m;", f"    {store_a} = ({argmax_t})k;", "}"]

    body += window_loop(lambda kk, t: f"*(const {T} *)(x{kk} + (c + {t}) * sl)",
                        f"*({T} *)(zr + ow * zs[{nd - 1}])",
                        f"*({argmax_t} *)(ar + ow * as[{nd - 1}])")
    tail = []
    for _ in outer:
        pad = pad[:-4]
        tail.append(pad + "}")
    loops = "\n".join(head + [pad + b for b in body] + tail)
    return f"""
static void SG_FN(inner)(const char *x, const int64_t *xn, const int64_t *xs, char *z,
                         const int64_t *zn, const int64_t *zs, char *am, const int64_t *as) {{
    const int64_t W = xn[{nd - 1}], OW = zn[{nd - 1}], sl = xs[{nd - 1}];
    int64_t lo = ({op.pad[-1]} + {op.stride[-1]} - 1) / {op.stride[-1]};
    const int64_t room = W + {op.pad[-1]} - {op.ws[-1]};
    int64_t hi = room < 0 ? 0 : room / {op.stride[-1]} + 1;
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
{loops}
}}
"""


def _forward(gen, argmax_t):
    T, C, nd = gen.T, gen.C, gen.nd
    unrolled = _prod(gen.op.ws) <= INNER_MAX
    # the windows SG_FN(inner) takes: full in the outer dims, inside the line
    inner_set = " && ".join([f"b{i} - a{i} == {gen.op.ws[i]}" for i in range(nd - 1)] +
                            [f"o{nd - 1} >= lo", f"o{nd - 1} < hi"])
    scan = _window_nest(gen, f"""const {C} v = ({C})*(const {T} *)(x + {_offset(gen, "i", "xs")});
if (k < 0 || v > m || (v != v && m == m)) {{ m = v; k = {_full_offset(gen, "i")}; }}""")
    loops = _out_loops(gen, f"""if (skip_inner && {inner_set}) continue;
{C} m = 0;
int64_t k = -1;
{scan}
*({T} *)(z + {_offset(gen, "o", "zs")}) = ({T})m;
*({argmax_t} *)(am + {_offset(gen, "o", "as")}) = ({argmax_t})k;""", shape="zn")
    body = ("        SG_FN(plane)(x->data + sg_pool_offset(x, nl, l), x->shape + nl, "
            "x->strides + nl,\n                     z->data + sg_pool_offset(z, nl, l), "
            "z->shape + nl, z->strides + nl,\n                     am->data + "
            "sg_pool_offset(am, nl, l), am->strides + nl);")
    fast = _FORWARD_FAST if _is_2x2(gen.op, gen.dtype) else ""
    if unrolled:
        inner = _inner(gen, argmax_t)
        call = ("    SG_FN(inner)(x, xn, xs, z, zn, zs, am, as);\n"
                "    SG_FN(scan)(x, xn, xs, z, zn, zs, am, as, 1);")
    else:
        inner, call = "", "    SG_FN(scan)(x, xn, xs, z, zn, zs, am, as, 0);"
    return _FORWARD.substitute(gen.subs(SCAN=loops, FAST=fast, INNER=inner, INNER_CALL=call,
                                        PARALLEL=_parallel(gen, body)))


def _prod(values):
    out = 1
    for v in values:
        out *= v
    return out


# -- backward ------------------------------------------------------------------------

_BACKWARD = Template(r"""
/* Whether the argmax k of the window of o0.. is a position inside it. */
static int SG_FN(plane)(const int64_t *xn, const char *g, const int64_t *gs, const char *am,
                        const int64_t *as, const int64_t *on, char *gx, const int64_t *gxs) {
    int bad = 0;
${FAST}
${BODY}
    return bad;
}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    if (SG_FN(check)(&in[0], &in[1], "output gradient", err)) return 1;
    if (SG_FN(check)(&in[0], &in[2], "argmax", err)) return 1;
    for (int d = 0; d < in[0].ndim; d++) out_shapes[d] = in[0].shape[d];
    return 0;
}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    const sg_array *x = &in[0], *g = &in[1], *am = &in[2];
    sg_array *gx = &out[0];
    const int nl = x->ndim - ${ND};
    const int64_t L = SG_FN(batch)(x), size = sg_size(x);
    if (L == 0 || size == 0) return 0;
${PARALLEL}
}
""")

_BACKWARD_FAST = r"""
    if (gxs[1] == 4 && gs[1] == 4 && as[1] == 1 && 2 * on[0] <= xn[0] && 2 * on[1] <= xn[1]) {
        for (int64_t o0 = 0; o0 < on[0]; o0++)
            bad |= sg_pa_bwd2x2_row((const float *)(g + o0 * gs[0]),
                                    (const uint8_t *)(am + o0 * as[0]),
                                    (float *)(gx + 2 * o0 * gxs[0]),
                                    (float *)(gx + (2 * o0 + 1) * gxs[0]), on[1]);
        const int64_t covered[2] = {2 * on[0], 2 * on[1]};
        sg_pa_zero_outside(gx, xn, gxs, 2, 4, covered);
        return bad;
    }"""


def _backward(gen, argmax_t):
    T, C, op, nd = gen.T, gen.C, gen.op, gen.nd
    head = f"""const {T} gv = *(const {T} *)(g + {_offset(gen, "o", "gs")});
const int64_t k = (int64_t)*(const {argmax_t} *)(am + {_offset(gen, "o", "as")});"""
    if op.stride == op.ws:
        # Disjoint windows: each element written once, then the uncovered rest.
        write = _window_nest(gen, f"*({T} *)(gx + {_offset(gen, 'i', 'gxs')}) = "
                                  f"{_full_offset(gen, 'i')} == k ? gv : ({T})0;")
        inside = " && ".join(f"p{i} >= a{i} && p{i} < b{i}" for i in range(nd))
        covered = ", ".join(f"on[{i}] * {op.ws[i]} - {op.pad[i]}" for i in range(nd))
        loops = _out_loops(gen, f"""{head}
{_coords(gen)}
bad |= !({inside});
{write}""")
        body = f"""    const int64_t covered[{nd}] = {{{covered}}};
    sg_pa_zero_outside(gx, xn, gxs, {nd}, sizeof({T}), covered);
{loops}"""
    else:
        inside = " && ".join(f"p{i} >= a{i} && p{i} < b{i}" for i in range(nd))
        loops = _out_loops(gen, f"""{head}
{_coords(gen)}
if (!({inside})) {{ bad = 1; continue; }}
{T} *p = ({T} *)(gx + {_offset(gen, "p", "gxs")});
*p = ({T})(({C})*p + ({C})gv);""")
        body = f"""    sg_pool_zero(gx, xn, gxs, {nd}, sizeof({T}));
{loops}"""
    body_call = ("        bad |= SG_FN(plane)(x->shape + nl, g->data + sg_pool_offset(g, nl, l), "
                 "g->strides + nl,\n                            am->data + "
                 "sg_pool_offset(am, nl, l), am->strides + nl, am->shape + nl,\n"
                 "                            gx->data + sg_pool_offset(gx, nl, l), "
                 "gx->strides + nl);")
    fast = _BACKWARD_FAST if _is_2x2(op, gen.dtype) else ""
    return _BACKWARD.substitute(gen.subs(
        FAST=fast, BODY=body, PARALLEL=_parallel(
            gen, body_call, "the argmax holds an offset outside its window; it must come "
                            "from MaxPoolWithArgmax with the same parameters")))


def _coords(gen):
    """C statements: the input position p0.. of offset k in the window of o0.."""
    op = gen.op
    lines = ["int64_t r = k;"]
    for i in reversed(range(gen.nd)):
        lines.append(f"const int64_t p{i} = o{i} * {op.stride[i]} - {op.pad[i]} + "
                     f"r % {op.ws[i]}; r /= {op.ws[i]};")
    lines.append("bad |= r != 0 || k < 0;")
    return "\n".join(lines)


def argmax_kernel(kind, op, node):
    """The CKernel of a ``MaxPoolWithArgmax`` (``kind`` "forward") or
    ``MaxPoolGradFromArgmax`` ("backward") node, or None (other dtypes run the
    Python ``perform``)."""
    from symgraph.ops.pool_argmax import argmax_dtype
    from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY

    x = node.inputs[0]
    dtype = str(x.dtype)
    forward = kind == "forward"
    argmax = node.outputs[1] if forward else node.inputs[2]
    if dtype not in _FLOATS or str(argmax.dtype) != argmax_dtype(op.ws):
        return None
    if not forward and str(node.inputs[1].dtype) != dtype:
        return None
    gen = _Gen(op, dtype)
    gen.dtype = dtype
    argmax_t = c_type(str(argmax.dtype))
    code = _forward(gen, argmax_t) if forward else _backward(gen, argmax_t)
    source = f"/* {gen.name} */\n" + _GEOMETRY.substitute(gen.subs()) + code
    return CKernel(source=source, headers=('"sg_pool_argmax.h"',), openmp=gen.openmp,
                   support=(SUPPORT_ENTRY,) if gen.openmp else (), version=VERSION)
