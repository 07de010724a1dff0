"""Native kernels for the pooling gradients (``ops/pool_grad.py``):
``MaxPoolGrad``, ``AveragePoolGrad`` and ``DownsampleFactorMaxGradGrad``.

The kernel layout, the geometry preamble and the rules (first match in
row-major window order, NaN matching NaN, float16 computed in float32) are
those of ``pool_codegen.py``, which dispatches here; its module docstring
describes each kernel.
"""

from string import Template

from symgraph.backends.cpu.pool.forward import _finish, _is_2x2_max, _offset, _out_loops
from symgraph.backends.c_family.c_files import c_file

__all__ = ["max_grad", "avg_grad", "grad_grad"]


def _window_loops(gen, inner):
    """Nested loops over the positions i0.. of the window (row-major), around ``inner``."""
    lines, pad = [], ""
    for i in range(gen.nd):
        lines.append(f"{pad}for (int64_t i{i} = a{i}; i{i} < b{i}; i{i}++)" +
                     (" {" if i == gen.nd - 1 else ""))
        pad += "    "
    lines += [pad + s for s in inner.strip("\n").split("\n")]
    lines.append(pad[:-4] + "}")
    return "\n".join(lines)


def _first_match_scan(gen, action):
    """Statements: scan the window for the first element of x equal to mv
    (NaN matching NaN); on it, run ``action`` (which sees i0..), then stop."""
    T, C = gen.T, gen.C
    inner = f"""const {C} v = ({C})*(const {T} *)(x + {_offset(gen, "i", "xs")});
if (v == mv || (mnan && v != v)) {{
    {action}
    goto done;
}}"""
    return _window_loops(gen, inner) + "\ndone:;"


_MAX_GRAD = Template(c_file("cpu/pool/max_grad.inc"))

#: The most elements a window may have for the tiled max-gradient path
#: (its per-window code is written out element by element).
TILE_MAX = 64


def _edge(gen):
    """C function: one (possibly clipped) window of a tiled plane, its
    elements zeroed, then its gradient at the first match."""
    T, C, nd = gen.T, gen.C, gen.nd
    zero = _window_loops(gen, f"*({T} *)(gx + {_offset(gen, 'i', 'gxs')}) = 0;")
    scan = _first_match_scan(gen, f"{T} *p = ({T} *)(gx + {_offset(gen, 'i', 'gxs')});\n"
                                  f"    *p = ({T})(({C})*p + gv);")
    windows = "\n".join("    " + gen.window(i, f"o{i}", f"xn[{i}]") for i in range(nd))
    params = ", ".join(f"int64_t o{i}" for i in range(nd))
    return f"""
/* One window of a tiled plane that the block code does not take (clipped by
   the padding or the image's end): zero its elements, then add its
   gradient at the first match. */
static void SG_FN(edge)(const char *x, const int64_t *xn, const int64_t *xs, const char *m,
                        const int64_t *ms, const char *g, const int64_t *gs, char *gx,
                        const int64_t *gxs, {params}) {{
{windows}
{_indent(zero, 4)}
    const {C} mv = ({C})*(const {T} *)(m + {_offset(gen, "o", "ms")});
    const {C} gv = ({C})*(const {T} *)(g + {_offset(gen, "o", "gs")});
    const int mnan = mv != mv;
{_indent(scan, 4)}
}}
"""


def _indent(text, n):
    return "\n".join(" " * n + line for line in text.split("\n"))


def _tiled(gen):
    """C function: a plane whose windows tile it (stride == ws), last dims
    contiguous.  Each full window is one block of straight-line code: the
    first match found by a select over its elements in reverse order, then
    every element written (the gradient or 0)."""
    import itertools

    T, C, I, nd = gen.T, gen.C, gen.I, gen.nd
    ws, pd = gen.op.ws, gen.op.pad
    outer = range(nd - 1)
    lines = list(itertools.product(*[range(ws[i]) for i in outer]))
    count = len(lines) * ws[-1]
    head, pad = [], "    "
    for i in outer:
        head.append(f"{pad}for (int64_t o{i} = 0; o{i} < on[{i}]; o{i}++) {{")
        pad += "    "
        head.append(pad + gen.window(i, f"o{i}", f"xn[{i}]"))
    o_args = ", ".join(f"o{i}" for i in outer)
    full = " && ".join(f"b{i} - a{i} == {ws[i]}" for i in outer)
    body = [f"if (!({full})) {{",
            f"    for (int64_t ow = 0; ow < OW; ow++) SG_FN(edge)(EDGE_ARGS, {o_args}, ow);",
            "    continue;", "}"]
    for k, line in enumerate(lines):
        off = " + ".join(f"(a{i} + {line[i]}) * {{s}}[{i}]" for i in outer)
        body.append(f"const {T} *restrict x{k} = (const {T} *)(x + {off.format(s='xs')});")
        body.append(f"{T} *restrict g{k} = ({T} *)(gx + {off.format(s='gxs')});")
    body.append(f"const {T} *restrict mr = (const {T} *)(m + "
                + " + ".join(f"o{i} * ms[{i}]" for i in outer) + ");")
    body.append(f"const {T} *restrict gr = (const {T} *)(g + "
                + " + ".join(f"o{i} * gs[{i}]" for i in outer) + ");")
    body.append(f"for (int64_t ow = 0; ow < lo; ow++) SG_FN(edge)(EDGE_ARGS, {o_args}, ow);")
    body.append(f"for (int64_t ow = hi; ow < OW; ow++) SG_FN(edge)(EDGE_ARGS, {o_args}, ow);")
    block = [f"const int64_t c = ow * {ws[-1]} - {pd[-1]};",
             f"const {C} mv = ({C})mr[ow];",
             f"const {T} gv = gr[ow];", f"{I} sel = {count};"]
    for k in reversed(range(len(lines))):
        for t in reversed(range(ws[-1])):
            idx = k * ws[-1] + t
            # integer masks rather than a conditional: GCC if-converts and
            # vectorizes this form
            block.append(f"{{ const {C} v = ({C})x{k}[c + {t}]; "
                         f"const {I} h = -({I})(v == mv || (v != v && mv != mv)); "
                         f"sel = (h & {idx}) | (~h & sel); }}")
    for k in range(len(lines)):
        for t in range(ws[-1]):
            block.append(f"g{k}[c + {t}] = sel == {k * ws[-1] + t} ? gv : ({T})0;")
    body.append("for (int64_t ow = lo; ow < hi; ow++) {")
    body += ["    " + b for b in block]
    body.append("}")
    tail = []
    for i in reversed(outer):
        pad = pad[:-4]
        tail.append(pad + "}")
    edge_args = "x, xn, xs, m, ms, g, gs, gx, gxs"
    loops = "\n".join(head + [pad + "    " + b.replace("EDGE_ARGS", edge_args) for b in body]
                      + tail)
    cover = " || ".join(f"on[{i}] * {ws[i]} - {pd[i]} < xn[{i}]" for i in range(nd))
    return f"""
/* A plane whose windows tile it (stride == ws); see _tiled in pool_codegen.py. */
static void SG_FN(tiled)(const char *x, const int64_t *xn, const int64_t *xs, const char *m,
                         const int64_t *ms, const char *g, const int64_t *gs,
                         const int64_t *on, char *gx, const int64_t *gxs) {{
    const int64_t W = xn[{nd - 1}], OW = on[{nd - 1}];
{_grad_2x2(gen)}
    /* elements after the last window (ignore_border): zero first */
    if ({cover}) sg_pool_zero(gx, xn, gxs, {nd}, sizeof({T}));
    /* interior windows [lo, hi) along the last dimension: not clipped */
    int64_t lo = {1 if pd[-1] else 0}, hi = (W + {pd[-1]}) / {ws[-1]};
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
{loops}
}}
"""


def _grad_2x2(gen):
    """The tiled plane's 2x2 stride-2 float32 path (every window full, rows of
    at least 8 windows): the vector rows of c_src/sg_pool_argmax.h, then the
    rows and columns no window covers zeroed."""
    if not _is_2x2_max(gen.op, gen.T):
        return ""
    return r"""    if (OW >= 8 && 2 * on[0] <= xn[0] && 2 * OW <= W) {
        for (int64_t o0 = 0; o0 < on[0]; o0++)
            sg_pa_grad2x2_row((const float *)(x + 2 * o0 * xs[0]),
                              (const float *)(x + (2 * o0 + 1) * xs[0]),
                              (const float *)(m + o0 * ms[0]), (const float *)(g + o0 * gs[0]),
                              (float *)(gx + 2 * o0 * gxs[0]),
                              (float *)(gx + (2 * o0 + 1) * gxs[0]), OW);
        const int64_t covered[2] = {2 * on[0], 2 * OW};
        sg_pa_zero_outside(gx, xn, gxs, 2, 4, covered);
        return;
    }"""


def max_grad(gen):
    """The C source of a ``MaxPoolGrad`` kernel for the generator ``gen``."""
    T, C = gen.T, gen.C
    op = gen.op
    can_tile = op.stride == op.ws and _prod(op.ws) <= TILE_MAX
    scan = _first_match_scan(
        gen, f"{T} *p = ({T} *)(gx + {_offset(gen, 'i', 'gxs')});\n"
             f"    *p = ({T})(({C})*p + gv);")
    generic = _out_loops(gen, f"""const {C} mv = ({C})*(const {T} *)(m + {_offset(gen, "o", "ms")});
const {C} gv = ({C})*(const {T} *)(g + {_offset(gen, "o", "gs")});
const int mnan = mv != mv;
{scan}""")
    args = ("x->data + sg_pool_offset(x, nl, l), x->shape + nl, x->strides + nl, "
            "m->data + sg_pool_offset(m, nl, l), m->strides + nl, "
            "g->data + sg_pool_offset(g, nl, l), g->strides + nl, m->shape + nl, "
            "gx->data + sg_pool_offset(gx, nl, l), gx->strides + nl")
    if can_tile:
        body = (f"            if (tiled) SG_FN(tiled)({args});\n"
                f"            else SG_FN(generic)({args});")
        tiled = _edge(gen) + _tiled(gen)
    else:
        body = f"            SG_FN(generic)({args});"
        tiled = ""
    return _MAX_GRAD.substitute(gen.subs(
        GENERIC_LOOPS=generic, TILED=tiled, CAN_TILE=int(can_tile),
        PARALLEL=gen.parallel("size", body)))


def _prod(values):
    out = 1
    for v in values:
        out *= v
    return out


_GRAD_GRAD = Template(r"""
static void SG_FN(plane)(const char *x, const int64_t *xn, const int64_t *xs, const char *m,
                         const int64_t *ms, const char *gg, const int64_t *ggs,
                         const int64_t *on, char *z, const int64_t *zs) {
${LOOPS}
}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    if (SG_FN(check)(&in[0], &in[1], "pooled maximum", err)) return 1;
    if (in[2].ndim != in[0].ndim ||
        memcmp(in[2].shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {
        char a[200], b[200];
        sg_pool_shape_text(a, sizeof a, in[2].shape, in[2].ndim);
        sg_pool_shape_text(b, sizeof b, in[0].shape, in[0].ndim);
        SG_FAIL(err, SG_ERR_VALUE, "${NAME}: the input-shaped gradient has shape %s but the "
                "input has shape %s", a, b);
    }
    for (int d = 0; d < in[1].ndim; d++) out_shapes[d] = in[1].shape[d];
    return 0;
}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    const sg_array *x = &in[0], *m = &in[1], *gg = &in[2];
    sg_array *z = &out[0];
    const int nl = x->ndim - ${ND};
    const int64_t L = SG_FN(batch)(x), size = sg_size(x);
    if (L == 0 || sg_size(z) == 0) return 0;
    const int64_t wsize = 0;
${PARALLEL}
}
""")


def grad_grad(gen):
    """The C source of a ``DownsampleFactorMaxGradGrad`` kernel."""
    T, C = gen.T, gen.C
    scan = _first_match_scan(
        gen, f"r = *(const {T} *)(gg + {_offset(gen, 'i', 'ggs')});")
    loops = _out_loops(gen, f"""const {C} mv = ({C})*(const {T} *)(m + {_offset(gen, "o", "ms")});
const int mnan = mv != mv;
{T} r = 0;
{scan}
*({T} *)(z + {_offset(gen, "o", "zs")}) = r;""")
    body = ("            SG_FN(plane)(x->data + sg_pool_offset(x, nl, l), x->shape + nl, "
            "x->strides + nl, m->data + sg_pool_offset(m, nl, l), m->strides + nl,\n"
            "                         gg->data + sg_pool_offset(gg, nl, l), gg->strides + nl, "
            "m->shape + nl, z->data + sg_pool_offset(z, nl, l), z->strides + nl);")
    return _GRAD_GRAD.substitute(gen.subs(LOOPS=loops, PARALLEL=gen.parallel("size", body)))


_AVG_GRAD = Template(r"""
static void SG_FN(plane)(const char *g, const int64_t *gs, const int64_t *on, char *gx,
                         const int64_t *xn, const int64_t *gxs) {
    sg_pool_zero(gx, xn, gxs, ${ND}, sizeof(${T}));
${LOOPS}
}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    if (SG_FN(check)(&in[0], &in[1], "output gradient", err)) return 1;
    for (int d = 0; d < in[0].ndim; d++) out_shapes[d] = in[0].shape[d];
    return 0;
}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    const sg_array *x = &in[0], *g = &in[1];
    sg_array *gx = &out[0];
    const int nl = x->ndim - ${ND};
    const int64_t L = SG_FN(batch)(x), size = sg_size(x);
    if (L == 0 || size == 0) return 0;
    const int64_t wsize = 0;
${PARALLEL}
}
""")


def avg_grad(gen):
    """The C source of an ``AveragePoolGrad`` kernel."""
    T, C, nd = gen.T, gen.C, gen.nd
    counts_exc = " * ".join(f"(b{i} - a{i})" for i in range(nd))
    counts_inc = " * ".join(f"c{i}" for i in range(nd))
    value = _finish(gen.op.mode, f"({C})*(const {T} *)(g + {_offset(gen, 'o', 'gs')})",
                    f"({C})({counts_exc})", f"({C})({counts_inc})")
    add = _window_loops(gen, f"""{T} *p = ({T} *)(gx + {_offset(gen, "i", "gxs")});
*p = ({T})(({C})*p + gv);""")
    loops = _out_loops(gen, f"const {C} gv = {value};\n{add}")
    body = ("            SG_FN(plane)(g->data + sg_pool_offset(g, nl, l), g->strides + nl, "
            "g->shape + nl,\n                         gx->data + sg_pool_offset(gx, nl, l), "
            "x->shape + nl, gx->strides + nl);")
    return _AVG_GRAD.substitute(gen.subs(LOOPS=loops, PARALLEL=gen.parallel("size", body)))
