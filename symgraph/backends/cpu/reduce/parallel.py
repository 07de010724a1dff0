"""C kernels for reductions on OpenMP threads.

Every kind but argmax and argmin calls the support library's drivers
(``reduce/drivers.py``, ``c_src/cpu/reduce/drivers.inc``), with or without
the ``openmp`` flag; the flag only sets the element count from which they
share the work out.  With ``config.openmp`` a reduction kernel shares its
work out when the element-wise size is at least
``config.openmp_reduce_minsize`` and more than one thread is available:

* many outputs: contiguous ranges of outputs per thread (path A), or of runs
  of ``COL_UNIT`` columns (path B: cut so that every column keeps its place
  in the vector loop), each computed as serially: the same bits;
* few outputs with long groups (path A): the groups' blocks are computed by
  the threads in contiguous ranges, in one parallel region, and the calling
  thread folds each group's block results in block order, with the same
  binary counter: the same bits as serially, for any thread count.
  argmax/argmin then search ranges of the group on every thread and keep the
  first hit;
* path B with too few columns to share (fewer than ``ROW_SPLIT_ITEMS`` runs):
  the reduced rows are cut into a fixed number of parts (``row_parts``: a
  function of the row count, never of the thread count), whose partial
  results are combined in part order.  Max, min, all, any and integer
  results are exact; float sums and products are within the serial error
  bound and the same bits for any thread count, one included.

This module generates the OpenMP drivers of argmax and argmin (whose second
phase, the index search, drives differently) and holds the sharing-out
constants the support library's drivers are built with.

Work is shared out dynamically, in about eight items per thread: a thread
that the system deschedules (another process on its core) holds up the item
it is computing, not a fixed share (docs/threads.md).  Where an item starts
never changes a result.  The team is the thread runtime's (``sg_region_team``):
one thread while the calling thread backs off under load.
"""

from symgraph.backends.cpu.reduce import drivers
from symgraph.backends.cpu.reduce.codegen import _Gen, mark_drivers

__all__ = ["ParallelGen", "ROW_SPLIT_ITEMS", "ROW_PART_MIN", "ROW_PARTS_MAX"]

#: Path B splits the reduced rows when it has fewer runs of columns than this.
ROW_SPLIT_ITEMS = 4
#: Reduced rows per part at least, and parts at most, when rows are split.
ROW_PART_MIN = 1024
ROW_PARTS_MAX = 16


class ParallelGen(_Gen):
    """The source of an OpenMP reduction kernel (``minpar``: the element-wise
    size below which it runs serially)."""

    def __init__(self, spec, minpar):
        super().__init__(spec)
        self.minpar = minpar

    def source(self):
        if drivers.uses_drivers(self):
            # the drivers are in the support library: the loops, a store, a run
            return _Gen.source(self, self.minpar)
        parts = [self.header(), self.eshape(), self.empty_check(), self.shape_fn(),
                 self.block_fn(), self.group_fn(), self.blocks_fn(), self.fold_fn(),
                 self.scan_fn(), self.find_fn(), self.pfind_fn(), self.items_fn(),
                 self.split_fn(), self.prun_fn()]
        return mark_drivers("\n".join(parts))

    def blocks_fn(self):
        """SG_FN(blocks) (OpenMP kernels): the results of blocks [lo, hi) of a
        group (blocks numbered in the serial order: rows of the reduced
        dimensions, PAIR_BLOCK or PLAIN_BLOCK elements each; SG_FN(block), as
        the serial group) into ``res``."""
        block = self._block_size()
        return f"""static void SG_FN(blocks)(const char *const *b, const sg_red_plan *pl,
                             int64_t lo, int64_t hi, {self.ACC} *res) {{
    const int nro = pl->nr - 1;
    const int64_t n = pl->rshape[nro], nb = (n + {block} - 1) / {block};
    const int64_t *s = pl->rstr[nro];
    int64_t idx[SG_MAXDIMS] = {{0}};
    int64_t rest = lo / nb, start = lo % nb * {block}, blk = lo;
    for (int d = nro - 1; d >= 0; d--) {{ idx[d] = rest % pl->rshape[d]; rest /= pl->rshape[d]; }}
    while (blk < hi) {{
{self._seek(8)}        for (int64_t i0 = start; i0 < n && blk < hi; i0 += {block}, blk++) {{
{self._block_call(12, "res[blk - lo]")}        }}
        start = 0;
        for (int d = nro - 1; d >= 0; d--) {{ if (++idx[d] < pl->rshape[d]) break; idx[d] = 0; }}
    }}
}}
"""

    def fold_fn(self):
        """SG_FN(fold) (OpenMP kernels): ``m`` block results folded in block
        order, as the serial group folds them (the same binary counter for
        pairwise sums): the same bits."""
        acc_decl, push, finish = self._fold("res[j]")
        return f"""static {self.ACC} SG_FN(fold)(const {self.ACC} *res, int64_t m) {{
{acc_decl}
    for (int64_t j = 0; j < m; j++) {{
{push}
    }}
{finish}
    return acc;
}}
"""

    def pfind_fn(self):
        """SG_FN(findr) and SG_FN(pfind) (OpenMP argmax/argmin): the threads
        scan contiguous ranges of the group's C-order positions (SG_FN(scan),
        4096 at a time); a thread stops once a thread before it has a hit; the
        smallest hit is the first."""
        ACC = self.ACC
        stop = "__atomic_load_n(first, __ATOMIC_RELAXED) < lo"
        return f"""static int64_t SG_FN(findr)(const char *const *b, const sg_red_plan *pl,
                                  {ACC} best, int64_t lo, int64_t hi,
                                  const int64_t *first) {{
    const int nro = pl->nr - 1;
    const int64_t n = pl->rshape[nro], s0 = pl->rstr[nro][0];
    int64_t idx[SG_MAXDIMS] = {{0}}, rest = lo / n;
    for (int d = nro - 1; d >= 0; d--) {{ idx[d] = rest % pl->rshape[d]; rest /= pl->rshape[d]; }}
    for (int64_t flat = lo - lo % n; flat < hi; flat += n) {{
        const char *p0 = b[0];
        for (int d = 0; d < nro; d++) p0 += idx[d] * pl->rstr[d][0];
        const int64_t a = flat < lo ? lo - flat : 0, z = hi - flat < n ? hi - flat : n;
        for (int64_t c0 = a; c0 < z; c0 += 4096) {{
            const int64_t c1 = z - c0 < 4096 ? z : c0 + 4096;
            if ({stop}) return -1;
            const int64_t i = SG_FN(scan)(p0, s0, c0, c1, best);
            if (i >= 0) return flat + i;
        }}
        for (int d = nro - 1; d >= 0; d--) {{ if (++idx[d] < pl->rshape[d]) break; idx[d] = 0; }}
    }}
    return -1;
}}

static int64_t SG_FN(pfind)(const char *const *b, const sg_red_plan *pl, {ACC} best, int nt) {{
    int64_t first = INT64_MAX;
    #pragma omp parallel num_threads(nt)
    {{
        const int64_t t = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t hit = SG_FN(findr)(b, pl, best, pl->rsize * t / nth,
                                         pl->rsize * (t + 1) / nth, &first);
        int64_t cur = __atomic_load_n(&first, __ATOMIC_RELAXED);
        while (hit >= 0 && hit < cur &&
               !__atomic_compare_exchange_n(&first, &cur, hit, 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {{}}
    }}
    return first == INT64_MAX ? 0 : first;
}}
"""

    def _pointers(self, indent, index):
        """C declaring ``p`` (the inputs) and ``ob`` (the output) at kept
        position ``idx`` (``index`` None) or at flat kept position ``index``."""
        pad, nin = " " * indent, self.nin
        lines = [f"const char *p[{nin}];",
                 f"for (int k = 0; k < {nin}; k++) p[k] = in[k].data;",
                 "char *ob = out[0].data;"]
        if index is None:
            lines += ["for (int d = 0; d < nko; d++) {",
                      f"    for (int k = 0; k < {nin}; k++) p[k] += idx[d] * pl->kstr[d][k];",
                      "    ob += idx[d] * pl->ostr[d];", "}"]
        else:
            lines += [f"for (int64_t d = nko - 1, rest = {index}; d >= 0; d--) {{",
                      "    const int64_t i = rest % pl->kshape[d];",
                      "    rest /= pl->kshape[d];",
                      f"    for (int k = 0; k < {nin}; k++) p[k] += i * pl->kstr[d][k];",
                      "    ob += i * pl->ostr[d];", "}"]
        return "\n".join(pad + line for line in lines)

    def items_fn(self):
        """SG_FN(items) (OpenMP argmax/argmin): outputs [lo, hi) of one
        thread, each computed as serially (its extremum, then its index)."""
        return f"""static void SG_FN(items)(const sg_array *in, sg_array *out,
                         const sg_red_plan *pl, int nko, int64_t lo, int64_t hi) {{
    int64_t idx[SG_MAXDIMS] = {{0}}, rest = lo;
    for (int d = nko - 1; d >= 0; d--) {{ idx[d] = rest % pl->kshape[d]; rest /= pl->kshape[d]; }}
    for (int64_t it = lo; it < hi; it++) {{
{self._pointers(8, None)}
        *(int64_t *)ob = SG_FN(find)(p, pl, SG_FN(group)(p, pl));
        for (int d = nko - 1; d >= 0; d--) {{ if (++idx[d] < pl->kshape[d]) break; idx[d] = 0; }}
    }}
}}
"""

    def split_fn(self):
        """SG_FN(split) (OpenMP argmax/argmin): few outputs with long groups.
        One parallel region computes every block of every group, the threads
        taking contiguous ranges of them; then each group's block results are
        folded in order (SG_FN(fold)).  Without memory for the block results,
        the serial loop."""
        ACC, block = self.ACC, self._block_size()
        store = "*(int64_t *)ob = SG_FN(pfind)(p, pl, SG_FN(fold)(res + o * per, per), nt);"
        return f"""static void SG_FN(split)(const sg_array *in, sg_array *out,
                         const sg_red_plan *pl, int64_t count, int nt) {{
    const int nko = pl->nk;
    const int64_t n = pl->rshape[pl->nr - 1];
    const int64_t per = pl->rsize / n * ((n + {block} - 1) / {block}), total = count * per;
    {ACC} *res = malloc(sizeof({ACC}) * (size_t)total);
    if (!res) {{
        SG_FN(items)(in, out, pl, nko, 0, count);
        return;
    }}
    const int64_t chunks = total < 8 * (int64_t)nt ? total : 8 * (int64_t)nt;
    #pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (int64_t ci = 0; ci < chunks; ci++) {{
        const int64_t hi = total * (ci + 1) / chunks;
        for (int64_t lo = total * ci / chunks; lo < hi;) {{
            const int64_t o = lo / per, end = (o + 1) * per < hi ? (o + 1) * per : hi;
{self._pointers(12, "o")}
            (void)ob;
            SG_FN(blocks)(p, pl, lo - o * per, end - o * per, res + lo);
            lo = end;
        }}
    }}
    for (int64_t o = 0; o < count; o++) {{
{self._pointers(8, "o")}
        {store}
    }}
    free(res);
}}

"""

    def prun_fn(self):
        """SG_FN(run) of an OpenMP argmax/argmin kernel: serial below the size
        threshold or with one thread; else outputs shared out when there are
        many, each group split when there are few."""
        head = self.run_fn().split("    int64_t idx[SG_MAXDIMS] = {0};\n")[0]
        return f"""{head}    /* one while the calling thread backs off under load (sg_region_team) */
    const int nt = pl.ksize * pl.rsize < {self.minpar} ? 1 : sg_region_team();
    (void)cols;
    if (nt < 2) {{
        SG_FN(items)(in, out, &pl, nko, 0, count);
        return 0;
    }}
    if (count < 4 * nt) {{
        SG_FN(split)(in, out, &pl, count, nt);
        return 0;
    }}
    const int64_t chunks = count < 8 * (int64_t)nt ? count : 8 * (int64_t)nt;
    #pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (int64_t c = 0; c < chunks; c++)
        SG_FN(items)(in, out, &pl, nko, count * c / chunks, count * (c + 1) / chunks);
    return 0;
}}
"""
