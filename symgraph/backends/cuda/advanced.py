"""CUDA for advanced indexing in every form: ``AdvancedSubtensor`` (a gather)
and ``AdvancedIncSubtensor`` (a scatter that sets or adds).

The index (integer arrays of any ranks, ints, boolean masks, slices, in any
order, NumPy's layout of the result) is resolved on the host, where all its
values are (``host_inputs``), by the CPU kernel's own C
(``symgraph.backends.cpu.index.advanced``): the same checks in the same
order, with the same error messages.  That C gives the indexed shape, the
byte offset ``fixed`` of the ints and slice starts, and the strides of the
slice and trailing dimensions.  The host then lists, for every entry ``j`` of
the broadcast index (C order), the byte offset that the arrays and masks
select (a mask counts as its ``nonzero()`` arrays); this table is the only
thing copied to the device.  The kernel walks the indexed shape as (the
dimensions before the broadcast ones, the table, the dimensions after), so
a slice next to an array (``x[1:5, idx]``, ``x[::2, idx]``) only changes the
base pointer and strides of that walk.

Updates:

- setting (``set_subtensor``): repeated targets are resolved on the host: the
  table is sorted by offset and each target keeps only its last entry (the
  CPU kernel visits the index in C order, so the last one wins there), so
  each element is written by one thread and the result is deterministic.
  Every dtype with native code.
- adding with device atomics (float32, float64, int32): one atomic add per
  indexed element, no sorting; repeated indices accumulate in an unspecified
  order (float sums can differ from the CPU's in the last bits).
- adding in other dtypes (float16, int64, the small ints, bool), and in every
  dtype under the flag ``deterministic=more`` (Theano's meaning: no atomics):
  the sorted table again, one thread per target adding its entries in the
  CPU's order, rounding float16 after each add: the CPU's result exactly.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.cuda import scratch
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.cuda.index import STRIDES, strided_copy_kernel

__all__ = ["advanced_reason", "advanced_gather_lowering", "advanced_update_lowering",
           "MAX_DIMS", "ATOMIC_DTYPES"]

#: The most dimensions of x and of the indexed shape.
MAX_DIMS = 8

#: The dtypes that ``inc_subtensor`` adds with device atomics.
ATOMIC_DTYPES = ("float32", "float64", "int32")

BLOCK = 256



def _index(op, node, first):
    """The CPU kernel's classified index of ``node`` (index inputs from ``first``)."""
    from symgraph.backends.cpu.index.advanced import _AdvancedIndex

    return _AdvancedIndex(op, node, first)


def advanced_reason(node):
    """None when the AdvancedSubtensor / AdvancedIncSubtensor ``node`` runs on the
    device, else why not."""
    dtype = str(node.outputs[0].dtype)
    if not all(has_c_type(v.dtype) for v in node.inputs + node.outputs):
        return f"dtype {dtype} has no CUDA indexing code yet"
    first = 2 if type(node.op).__name__ == "AdvancedIncSubtensor" else 1
    ix = _index(node.op, node, first)
    if node.inputs[0].ndim > MAX_DIMS or ix.ndim > MAX_DIMS or ix.nb > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    return None


def _table_code(ix, base, name, grouped):
    """Host C after the CPU's checks and bounds: ``offs[j]``, the byte offset
    that the arrays and masks select for broadcast entry ``j`` (``bsize``
    entries, C order of ``bshape``), into ``base``'s memory.  ``grouped``: also
    sort the entries by offset (then entry), giving ``G`` groups of equal
    offsets: ``goff[g]``, ``gstart[g]..gstart[g + 1]`` their entries in
    ``order``.  All in one host block ``tab_h`` of ``tab_n`` int64, copied to
    the device as ``tab_d``."""
    nb = ix.nb
    lines = []
    for e in ix.arrays:
        i, a_nd = e.value, ix.node.inputs[e.value].ndim
        dtype = ix.node.inputs[i].dtype
        # array i's strides over the broadcast dims (right-aligned; 0 where it broadcasts)
        lines.append(f"""        {{
            int64_t ao = 0;
            for (int d = 0; d < {a_nd}; d++)
                if (in[{i}].shape[d] != 1) ao += co[{nb - a_nd} + d] * in[{i}].strides[d];
            int64_t v = sg_ix_rd_{dtype}(in[{i}].data + ao), n = in[0].shape[{e.dim}];
            off += (v < 0 ? v + n : v) * {base}->strides[{e.dim}];
        }}""")
    masks = []
    for e in ix.masks:
        i = e.value
        masks.append(f"""    int64_t *mo{i} = mnext;
    sg_ix_mask_offsets(&in[{i}], {base}->strides + {e.dim}, mnext);
    mnext += mc{i};""")
        lines.append(f"        off += mo{i}[mc{i} == 1 ? 0 : co[{nb - 1}]];")
    mask_count = " + ".join(f"mc{e.value}" for e in ix.masks) or "0"
    extra = "3 * bsize + 1" if grouped else "bsize"
    code = [f"""    int64_t *mtab = NULL, *mnext = NULL;
    if ({mask_count} > 0) {{
        mtab = (int64_t *)malloc((size_t)({mask_count}) * sizeof(int64_t));
        if (mtab == NULL) SG_FAIL(err, SG_ERR_MEMORY, "%s: no host memory for the offsets of "
                                  "%lld mask elements", "{name}", (long long)({mask_count}));
        mnext = mtab;
    }}
{chr(10).join(masks)}
    int64_t tab_n = {extra};
    int64_t *tab_h = (int64_t *)malloc((size_t)(tab_n > 0 ? tab_n : 1) * sizeof(int64_t));
    if (tab_h == NULL) {{
        free(mtab);
        SG_FAIL(err, SG_ERR_MEMORY, "%s: no host memory for %lld index entries", "{name}",
                (long long)bsize);
    }}
    int64_t *offs = tab_h;
    for (int64_t j = 0; j < bsize; j++) {{
        int64_t co[{nb}], rem = j, off = 0;
        for (int d = {nb} - 1; d >= 0; d--) {{ co[d] = rem % bshape[d]; rem /= bshape[d]; }}
        (void)co;
{chr(10).join(lines)}
        offs[j] = off;
    }}
    free(mtab);
    int64_t G = bsize;"""]
    if grouped:
        code.append(f"""    /* sort the entries by (offset, entry): each group of equal offsets is
     * one target element, its entries in the CPU's (C) order */
    {{
        SG_FN(pair) *pairs = (SG_FN(pair) *)malloc((size_t)(bsize > 0 ? bsize : 1) *
                                                   sizeof(SG_FN(pair)));
        if (pairs == NULL) {{
            free(tab_h);
            SG_FAIL(err, SG_ERR_MEMORY, "%s: no host memory to sort %lld index entries",
                    "{name}", (long long)bsize);
        }}
        for (int64_t j = 0; j < bsize; j++) {{ pairs[j].off = offs[j]; pairs[j].j = j; }}
        qsort(pairs, (size_t)bsize, sizeof(SG_FN(pair)), SG_FN(cmp));
        G = 0;
        for (int64_t k = 0; k < bsize; k++) G += k == 0 || pairs[k].off != pairs[k - 1].off;
        /* packed: goff[G], gstart[G + 1], order[bsize] (tab_h holds 3 * bsize + 1) */
        int64_t *goff = tab_h, *gstart = tab_h + G, *order = tab_h + 2 * G + 1, g = 0;
        for (int64_t k = 0; k < bsize; k++) {{
            if (k == 0 || pairs[k].off != pairs[k - 1].off) {{
                goff[g] = pairs[k].off; gstart[g++] = k;
            }}
            order[k] = pairs[k].j;
        }}
        gstart[G] = bsize;
        free(pairs);
        tab_n = 2 * G + 1 + bsize;
    }}""")
    code.append(f"""    int64_t *tab_d = NULL;
    size_t tab_size = 0;
    if (tab_n > 0 && bsize > 0) {{
        tab_d = (int64_t *)sg_cu_scratch((size_t)tab_n * sizeof(int64_t), &tab_size);
        if (tab_d == NULL) {{
            free(tab_h);
            SG_FAIL(err, SG_ERR_MEMORY, "%s: no device memory for %lld index entries", "{name}",
                    (long long)tab_n);
        }}
        cudaMemcpy(tab_d, tab_h, (size_t)tab_n * sizeof(int64_t), cudaMemcpyHostToDevice);
    }}
    free(tab_h);""")
    return "\n".join(code)


_SORT = """typedef struct { int64_t off, j; } SG_FN(pair);

static int SG_FN(cmp)(const void *a, const void *b) {
    const SG_FN(pair) *p = (const SG_FN(pair) *)a, *q = (const SG_FN(pair) *)b;
    if (p->off != q->off) return p->off < q->off ? -1 : 1;
    return p->j < q->j ? -1 : p->j > q->j;
}
"""

# The walk of the indexed shape shared by the kernels: element e is (l, g, r),
# l over the dimensions before the broadcast ones (positions 0..pb-1), g the
# table entry or group, r over the dimensions after them (pb+nb..nd-1); xo and
# yo the byte offsets of the walked dimensions into x (xs) and y (ys).
_WALK = """
        int64_t rem = e % inner, t = e / inner, xo = 0, yo = 0;
        const int64_t g = t % groups;
        int64_t l = t / groups;
        for (int p = nd - 1; p >= pb + nb; p--) {
            const int64_t i = rem % shp.s[p];
            rem /= shp.s[p];
            xo += i * xs.s[p]; yo += i * ys.s[p];
        }
        for (int p = pb - 1; p >= 0; p--) {
            const int64_t i = l % shp.s[p];
            l /= shp.s[p];
            xo += i * xs.s[p]; yo += i * ys.s[p];
        }
        (void)yo;"""

_PARAMS = ("int64_t lead, int64_t groups, int64_t inner, int pb, int nb, int nd, "
           "sg_cuda_strides shp, sg_cuda_strides xs, sg_cuda_strides ys, sg_cuda_strides bsh, "
           "const int64_t *tab")

# y's offset along the broadcast dims for table entry j
_YB = """static __device__ __forceinline__ int64_t SG_FN(yb)(int64_t j, int pb, int nb,
                                                     const sg_cuda_strides &ys,
                                                     const sg_cuda_strides &bsh) {
    int64_t yo = 0;
    for (int q = nb - 1; q >= 0; q--) { yo += (j % bsh.s[q]) * ys.s[pb + q]; j /= bsh.s[q]; }
    return yo;
}
"""


def _geometry(ix):
    """Host C filling the walk's arguments from the CPU checks' ``ishape``,
    ``ixs`` (and ``ys`` where there is a value)."""
    pb = ix.layout.index(("b", 0))
    return f"""    sg_cuda_strides shp, xs, bsh, ysd;
    const int pb = {pb}, nb = {ix.nb}, nd = {ix.ndim};
    int64_t nlead = 1, ninner = 1;
    for (int p = 0; p < 8; p++) {{ shp.s[p] = 1; xs.s[p] = 0; bsh.s[p] = 1; ysd.s[p] = 0; }}
    for (int p = 0; p < nd; p++) {{
        shp.s[p] = ishape[p]; xs.s[p] = ixs[p];
        if (p < pb) nlead *= ishape[p];
        if (p >= pb + nb) ninner *= ishape[p];
    }}
    for (int q = 0; q < nb; q++) bsh.s[q] = bshape[q];
    (void)ysd;"""


def _launch(kernel, args, what):
    """Host C launching the walk ``kernel`` over (lead, table or groups, inner)
    with its last arguments ``args``, then giving the table's scratch back."""
    return f"""    if (nlead > 0 && G > 0 && ninner > 0) {{
        int64_t blocks = (nlead * G * ninner + {BLOCK} - 1) / {BLOCK};
        if (blocks > 4096) blocks = 4096;
        SG_LAUNCH(SG_FN({kernel}), (unsigned)blocks, {BLOCK}, 0, nlead, G, ninner, pb, nb, nd,
                  shp, xs, ysd, bsh, tab_d, {args});
    }}
    sg_cu_scratch_release(tab_d, tab_size);
    SG_CUDA_CHECK(err, "{what}");"""


def _kernel(ix, kernels, run, shape):
    """The CKernel: the CPU's error helper, the device ``kernels``, then the
    host's shape and run functions."""
    import dataclasses

    from symgraph.backends.cpu.shape.codegen import kernel

    k = kernel(run, shape=shape, support=ix.support(STRIDES, scratch.SUPPORT),
               headers=("<stdlib.h>", "<string.h>"), symbols=scratch.SYMBOLS, version=1)
    return dataclasses.replace(k, source=ix.head() + kernels + k.source)


def advanced_gather_lowering(op, node):
    """CUDA of ``x[index]`` for an advanced index of any form: the host resolves
    the index (the CPU's checks and errors) into a table of offsets; one thread
    per element of the result reads x through it."""
    if advanced_reason(node) is not None:
        return None
    ix = _index(op, node, 1)
    T = storage_type(node.inputs[0].dtype)
    name = c_string(op, printf=True, limit=80)
    shape = f"""{ix.checks("(&in[0])")}
    for (int d = 0; d < {ix.ndim}; d++) out_shapes[d] = ishape[d];"""
    run = f"""{ix.checks("(&in[0])")}
{ix.bounds()}
    if (bsize == 0) return 0;
{_table_code(ix, "(&in[0])", name, grouped=False)}
{_geometry(ix)}
{_launch("gather", f"in[0].data + fixed, ({T} *)out[0].data", "the device gather")}"""
    kernels = f"""
__global__ void SG_FN(gather)({_PARAMS}, const char *x, {T} *out) {{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < lead * groups * inner;
         e += (int64_t)blockDim.x * gridDim.x) {{{_WALK}
        out[e] = *(const {T} *)(x + xo + tab[g]);
    }}
}}
"""
    return _kernel(ix, kernels, run, shape)


def _add(dtype, T, a, b):
    """C of ``a + b`` in ``dtype`` as the CPU adds (NumPy's: ints wrap, bool or,
    float16 rounded)."""
    if dtype == "float16":
        return f"__float2half(__half2float({a}) + __half2float({b}))"
    if dtype == "bool":
        return f"(uint8_t)({a} | {b})"
    if dtype.startswith("float"):
        return f"{a} + {b}"
    return f"({T})((uint64_t){a} + (uint64_t){b})"


def advanced_update_lowering(op, node):
    """CUDA of ``set_subtensor(x[index], y)`` / ``inc_subtensor(x[index], y)`` for
    an advanced index of any form: x copied, then y (broadcast to the indexed
    shape, checked with the CPU's errors) stored or added through the host's
    table of offsets (see the module docstring for repeated indices)."""
    from symgraph.backends.cpu.index.basic import _value_check

    if advanced_reason(node) is not None:
        return None
    ix = _index(op, node, 2)
    x = node.inputs[0]
    dtype, n = str(x.dtype), x.ndim
    T = storage_type(dtype)
    name = c_string(op, printf=True, limit=80)
    from symgraph.config import config

    # Theano's deterministic=more: no atomics, the CPU's order of the adds
    atomic = (not op.set_instead_of_inc and dtype in ATOMIC_DTYPES
              and config.deterministic != "more")
    grouped = not atomic
    if op.set_instead_of_inc:
        body = f"""        const int64_t last = tab[groups + g + 1] - 1;    /* the group's last entry */
        const int64_t j = tab[2 * groups + 1 + last];
        *({T} *)(out + xo + tab[g]) = *(const {T} *)(y + yo + SG_FN(yb)(j, pb, nb, ys, bsh));"""
        what = "the device set_subtensor"
    elif atomic:
        body = f"""        atomicAdd(({T} *)(out + xo + tab[g]),
                  *(const {T} *)(y + yo + SG_FN(yb)(g, pb, nb, ys, bsh)));"""
        what = "the device inc_subtensor"
    else:
        body = f"""        {T} *dst = ({T} *)(out + xo + tab[g]);
        {T} acc = *dst;
        for (int64_t k = tab[groups + g]; k < tab[groups + g + 1]; k++) {{
            const {T} v = *(const {T} *)(y + yo + SG_FN(yb)(tab[2 * groups + 1 + k], pb, nb,
                                                              ys, bsh));
            acc = {_add(dtype, T, "acc", "v")};
        }}
        *dst = acc;"""
        what = "the device inc_subtensor"
    kernels = f"""{_SORT if grouped else ""}
{_YB}
{strided_copy_kernel("copy", T)}
__global__ void SG_FN(update)({_PARAMS}, const char *y, char *out) {{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < lead * groups * inner;
         e += (int64_t)blockDim.x * gridDim.x) {{{_WALK}
{body}
    }}
}}
"""
    shape = f"    for (int d = 0; d < {n}; d++) out_shapes[d] = in[0].shape[d];"
    run = f"""    {{   /* x into the output (a new contiguous array) */
        sg_cuda_strides st, shape;
        int64_t total = 1;
        for (int d = 0; d < {n}; d++) {{
            st.s[d] = in[0].strides[d]; shape.s[d] = in[0].shape[d]; total *= in[0].shape[d];
        }}
        if (total > 0) {{
            int64_t blocks = (total + {BLOCK} - 1) / {BLOCK};
            if (blocks > 4096) blocks = 4096;
            SG_LAUNCH(SG_FN(copy), (unsigned)blocks, {BLOCK}, 0, total, {n}, in[0].data, st,
                      shape, ({T} *)out[0].data);
            SG_CUDA_CHECK(err, "the device copy of x");
        }}
    }}
{ix.checks("(&out[0])")}
{ix.bounds()}
{_value_check(op, node, "ishape", ix.ndim)}
    if (bsize == 0) return 0;
{_table_code(ix, "(&out[0])", name, grouped=grouped)}
{_geometry(ix)}
    for (int p = 0; p < nd; p++) ysd.s[p] = ys[p];
{_launch("update", "in[1].data, out[0].data + fixed", what)}"""
    return _kernel(ix, kernels, run, shape)
