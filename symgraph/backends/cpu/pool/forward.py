"""Native kernels for pooling (``ops/pool.py``, ``ops/pool_grad.py``).

One kernel per node (the gradients' code is in ``pool_grad_codegen.py``), with the op's window, stride, padding and mode written
into the code as constants (so the window loops unroll).  The input is seen
as a batch of *planes*, the last 2 (or 3) dimensions, any strides; the
leading dimensions are the batch (with OpenMP, the planes are shared among
threads).  float16 is loaded into float32 and computed there.

* ``Pool``: per output row (2D) or output (depth, row) pair (3D), the input
  lines (last-dimension rows) of the window are combined element-wise into a
  row buffer (max, or sum), a pass that vectorizes over the whole row; then
  a horizontal pass over the buffer, its interior windows (fully inside the
  row) with the constant window width, so that a 2-wide max compiles to
  vector shuffles.  Max propagates NaN: ``v > m || v != v ? v : m``.
  Averages divide the sum by the window's count (one rounding, as the
  Python ``perform``).  Max pooling 2x2 with stride 2 over float32 planes
  with contiguous lines and only full windows (W5's layer) takes the vector
  rows of ``c_src/sg_pool_argmax.h`` instead: 8 windows a step.
* ``MaxPoolGrad``: each window's gradient goes to its first (row-major)
  position equal to the pooled maximum (NaN matching NaN), the rule of the
  Python ``perform``.  When the windows tile the input (stride == ws, the
  usual case, at most ``TILE_MAX`` elements) and the last dimension is
  contiguous in every array, each full window is one block of straight-line
  code: the first match is found by a branch-free select over its elements
  in reverse order, then every element of the window is written (the
  gradient or 0), so the output is written once and never zeroed first;
  clipped windows (padding, the image's end) take a per-window scan.
  2x2 windows with stride 2 over float32 rows of at least 8 windows take
  the vector rows of ``c_src/sg_pool_argmax.h``.
  Otherwise (overlapping windows, odd strides) the output is zeroed and each
  window scanned, adding its gradient at the first match.
* ``AveragePoolGrad``: the output is zeroed, each window's gradient (over
  its divisor) added to its elements.
* ``DownsampleFactorMaxGradGrad``: each window scanned for its first match,
  whose ``ggx`` it gathers (0 when nothing matches).

float16 gradients where windows overlap are rounded to float16 after each
window's addition (the Python ``perform`` adds in float32): results agree
to float16 rounding.
"""

from string import Template

from symgraph.backends.c_family.c_types import FLOAT_DTYPES as _FLOATS
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.c_family.c_files import c_file

__all__ = ["pool_kernel", "VERSION"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 1



def plane_chunk(count):
    """C: planes per OpenMP work item, about ``PLANE_CHUNK`` input elements'
    worth (``count``: the input's size, ``L``: its planes).  Dynamic: a thread
    the system deschedules holds up one item, not a fixed share (docs/threads.md)."""
    return f"({count} >= {PLANE_CHUNK} * L ? 1 : {PLANE_CHUNK} * L / ({count} > 0 ? {count} : 1))"


#: Input elements per OpenMP work item of the pooling kernels.
PLANE_CHUNK = 16384


class _Gen:
    """The text pieces of one kernel: types, constants and loop nests."""

    def __init__(self, op, dtype):
        from symgraph.config import config

        self.op = op
        self.nd = op.ndim
        self.T = c_type(dtype)
        self.C = "double" if dtype == "float64" else "float"
        self.I = "int64_t" if dtype == "float64" else "int32_t"
        self.name = c_string(str(op), printf=True)
        self.openmp = bool(config.openmp)
        self.minpar = int(config.openmp_pool_minsize)

    def subs(self, **extra):
        """The substitutions every template uses."""
        op, nd = self.op, self.nd
        sub = dict(T=self.T, C=self.C, I=self.I, ND=nd, NAME=self.name,
                   IB=int(op.ignore_border), WSL=op.ws[-1], STL=op.stride[-1], PDL=op.pad[-1],
                   WS=", ".join(map(str, op.ws)), ST=", ".join(map(str, op.stride)),
                   PD=", ".join(map(str, op.pad)))
        sub.update(extra)
        return sub

    def window(self, i, o, size):
        """C statements: window of output index ``o`` in pooled dim ``i``."""
        op = self.op
        return (f"int64_t a{i}, b{i}, c{i}; sg_pool_window({o}, {size}, {op.ws[i]}, "
                f"{op.stride[i]}, {op.pad[i]}, &a{i}, &b{i}, &c{i});")

    def parallel(self, count, body):
        """``body`` (uses ``l``, the plane, and ``ws``) run for every plane,
        with a per-thread workspace ``ws`` of ``wsize`` bytes."""
        # one thread while the calling thread backs off under load (sg_region_team)
        pragma = (f"#pragma omp parallel num_threads(sg_region_team()) "
                  f"if({count} >= {self.minpar}) reduction(|:fail)") if self.openmp else ""
        pfor = f"#pragma omp for schedule(dynamic, {plane_chunk(count)})" if self.openmp else ""
        return f"""    int fail = 0;
{pragma}
    {{
        void *ws = malloc(wsize > 0 ? (size_t)wsize : 1);
        if (!ws) fail = 1;
{pfor}
        for (int64_t l = 0; l < L; l++) {{
            if (!ws) continue;
{body}
        }}
        free(ws);
    }}
    if (fail) SG_FAIL(err, SG_ERR_MEMORY, "{self.name}: cannot allocate a workspace of "
                      "%lld bytes", (long long)wsize);
    return 0;"""


# -- shared pieces -------------------------------------------------------------------

_GEOMETRY = Template(c_file("cpu/pool/geometry.inc"))


def _combine(mode, a, v):
    """C expression combining the accumulator ``a`` with the value ``v``."""
    if mode == "max":
        # NaN propagates: a NaN value replaces, a NaN accumulator stays.
        return f"(({v}) > ({a}) || ({v}) != ({v}) ? ({v}) : ({a}))"
    return f"(({a}) + ({v}))"


def _finish(mode, r, count_exc, count_inc):
    """C expression: the pooled value from the combined ``r``."""
    if mode == "average_exc_pad":
        return f"{r} / ({count_exc})"
    if mode == "average_inc_pad":
        return f"{r} / ({count_inc})"
    return r


def _out_loops(gen, inner, shape="on"):
    """Nested loops over every output position o0.. of a plane, each with its
    window (a_i, b_i, c_i), around ``inner``."""
    lines, pad = [], "    "
    for i in range(gen.nd):
        lines.append(f"{pad}for (int64_t o{i} = 0; o{i} < {shape}[{i}]; o{i}++) {{")
        pad += "    "
        lines.append(pad + gen.window(i, f"o{i}", f"xn[{i}]"))
    lines += [pad + s for s in inner.strip("\n").split("\n")]
    for i in reversed(range(gen.nd)):
        pad = pad[:-4]
        lines.append(pad + "}")
    return "\n".join(lines)


def _offset(gen, index, strides):
    return " + ".join(f"{index}{i} * {strides}[{i}]" for i in range(gen.nd))


# -- Pool ------------------------------------------------------------------------------

_FORWARD = Template(c_file("cpu/pool/forward.inc"))


def _forward_loops(gen):
    """The plane's loops: per outer output position, combine the window's
    lines into buf, then the horizontal pass."""
    nd = gen.nd
    if nd == 2:
        return f"""    for (int64_t o0 = 0; o0 < zn[0]; o0++) {{
        {gen.window(0, "o0", "xn[0]")}
        int first = 1;
        for (int64_t i0 = a0; i0 < b0; i0++) {{
            SG_FN(accum)(buf, x + i0 * xs[0], W, xs[1], first);
            first = 0;
        }}
        SG_FN(hpass)(buf, W, z + o0 * zs[0], zs[1], OW, b0 - a0, c0);
    }}"""
    return f"""    for (int64_t o0 = 0; o0 < zn[0]; o0++) {{
        {gen.window(0, "o0", "xn[0]")}
        for (int64_t o1 = 0; o1 < zn[1]; o1++) {{
            {gen.window(1, "o1", "xn[1]")}
            int first = 1;
            for (int64_t i0 = a0; i0 < b0; i0++)
                for (int64_t i1 = a1; i1 < b1; i1++) {{
                    SG_FN(accum)(buf, x + i0 * xs[0] + i1 * xs[1], W, xs[2], first);
                    first = 0;
                }}
            SG_FN(hpass)(buf, W, z + o0 * zs[0] + o1 * zs[1], zs[2], OW,
                         (b0 - a0) * (b1 - a1), c0 * c1);
        }}
    }}"""


#: Windows up to this wide get their inner loop written out (GCC at -O2
#: vectorizes the loop over windows only when the inner one is gone).
UNROLL = 8


def _unrolled(width, body, var="@", indent=12):
    """``body`` (C statements using ``var``) for var in 0..width-1: written
    out for narrow windows, a loop otherwise."""
    pad = " " * indent
    if width <= UNROLL:
        return "\n".join(pad + "{ " + body.replace(var, str(t)) + " }" for t in range(width))
    return f"{pad}for (int t = 0; t < {width}; t++) {{ {body.replace(var, 't')} }}"


def _forward(gen):
    mode = gen.op.mode
    C = gen.C
    wsl = gen.op.ws[-1]
    interior = (_unrolled(wsl - 1, f"const {C} v = q[1 + @]; r = {_combine(mode, 'r', 'v')};",
                          var="@") if wsl > 1 else "")
    body = """            SG_FN(plane)(x->data + sg_pool_offset(x, nl, l), x->shape + nl, x->strides + nl,
                         z->data + sg_pool_offset(z, nl, l), z->shape + nl, z->strides + nl,
                         (""" + C + " *)ws);"
    return _FORWARD.substitute(gen.subs(
        COMBINE_BUF=_combine(mode, "buf[w]", "v"), COMBINE_R=_combine(mode, "r", "v"),
        FINISH_EDGE=_finish(mode, "r", f"({C})(cexc * (b - a))", f"({C})(cinc * ci)"),
        FINISH_INNER=_finish(mode, "r", f"({C})(cexc * {gen.op.ws[-1]})",
                             f"({C})(cinc * {gen.op.ws[-1]})"),
        LOOPS=_forward_loops(gen), PARALLEL=gen.parallel("size", body), INTERIOR=interior,
        FAST=_FORWARD_2X2 if _is_2x2_max(gen.op, gen.T) else ""))


#: 2x2 stride-2 max pooling of float32 planes with contiguous lines whose
#: windows are all full: the vector rows of c_src/sg_pool_argmax.h.
_FORWARD_2X2 = r"""
    if (xs[1] == 4 && zs[1] == 4 && 2 * zn[0] <= xn[0] && 2 * OW <= W) {
        for (int64_t o0 = 0; o0 < zn[0]; o0++)
            sg_pa_max2x2_row((const float *)(x + 2 * o0 * xs[0]),
                             (const float *)(x + (2 * o0 + 1) * xs[0]),
                             (float *)(z + o0 * zs[0]), OW);
        return;
    }"""


def _is_2x2_max(op, c_type_name):
    return (op.mode == "max" and c_type_name == "float" and op.ndim == 2 and op.ws == (2, 2)
            and op.stride == (2, 2) and op.pad == (0, 0))


def pool_kernel(kind, op, node):
    """The CKernel of a ``Pool`` (``kind`` "forward"), ``MaxPoolGrad``
    ("max_grad"), ``AveragePoolGrad`` ("avg_grad") or
    ``DownsampleFactorMaxGradGrad`` ("grad_grad") node, or None (dtypes other
    than float16/32/64 run the Python ``perform``)."""
    from symgraph.backends.cpu.pool.grad import avg_grad, grad_grad, max_grad
    from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY

    dtype = str(node.outputs[0].dtype)
    if dtype not in _FLOATS or any(str(v.dtype) != dtype for v in node.inputs):
        return None
    gen = _Gen(op, dtype)
    build = {"forward": _forward, "max_grad": max_grad, "avg_grad": avg_grad,
             "grad_grad": grad_grad}[kind]
    source = f"/* {gen.name} */\n" + _GEOMETRY.substitute(gen.subs()) + build(gen)
    return CKernel(source=source, headers=('"sg_pool_argmax.h"',), openmp=gen.openmp,
                   support=(SUPPORT_ENTRY,) if gen.openmp else (), version=VERSION)
