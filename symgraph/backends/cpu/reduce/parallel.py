"""C kernels for reductions on OpenMP threads: ``reduce_codegen``'s serial
generator plus the functions that share the work out.

With ``config.openmp`` a reduction kernel is marked ``openmp=True`` and, when
the element-wise size is at least ``config.openmp_elemwise_minsize`` and more
than one thread is available, shares its work out (the serial kernels, with
the flag off, are unchanged):

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

Pairwise float sums call the support library's copy of these drivers
(``reduce/sum_drivers.py``): GCC compiles them once instead of in every kernel.

Work is shared out dynamically, in about eight items per thread: a thread
that the system deschedules (another process on its core) holds up the item
it is computing, not a fixed share (docs/threads.md).  Where an item starts
never changes a result.  The team is the thread runtime's (``sg_region_team``):
one thread while the calling thread backs off under load.
"""

from symgraph.backends.cpu.reduce import sum_drivers
from symgraph.backends.cpu.reduce.codegen import COL_CHUNK, COL_UNIT, _Gen, mark_drivers

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
        if sum_drivers.uses_drivers(self):
            # the drivers are in the support library: the loops, a store, a run
            parts = [self.header(), self.eshape(), self.empty_check(), self.shape_fn(),
                     self.block_fn(), self.runs_fn(), self.ranged_cols_fn(),
                     sum_drivers.kernel_functions(self)]
            return mark_drivers("\n".join(parts))
        parts = [self.header(), self.eshape(), self.empty_check(), self.shape_fn(),
                 self.block_fn(), self.group_fn(), self.blocks_fn(), self.fold_fn()]
        parts += ([self.scan_fn(), self.find_fn(), self.pfind_fn()] if self.arg else
                  [self.runs_fn(), self.ranged_cols_fn(), self.rows_fn()])
        parts += [self.items_fn(), self.split_fn(), self.prun_fn()]
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

    def ranged_cols_fn(self):
        """SG_FN(cols) over columns [lo, hi) and reduced rows [r0, r1) only, into
        ``part`` (accumulators) when it is not NULL, else into the output: the
        serial path B text, edited."""
        text = self.cols_fn()
        ACC, OUT = self.ACC, self.OUT
        edits = [
            ("const sg_red_plan *pl) {",
             f"const sg_red_plan *pl,\n                          int64_t lo, int64_t hi, "
             f"int64_t r0, int64_t r1, {ACC} *part) {{"),
            ("const int64_t n = pl->kshape[ki], os = pl->ostr[ki];",
             "const int64_t os = pl->ostr[ki];"),
            (f"for (int64_t j0 = 0; j0 < n; j0 += {COL_CHUNK}) {{\n"
             f"        const int64_t m = n - j0 < {COL_CHUNK} ? n - j0 : {COL_CHUNK};",
             f"for (int64_t j0 = lo; j0 < hi; j0 += {COL_CHUNK}) {{\n"
             f"        const int64_t m = hi - j0 < {COL_CHUNK} ? hi - j0 : {COL_CHUNK};"),
            ("        int64_t idx[SG_MAXDIMS] = {0};\n"
             "        for (int64_t o = 0; o < pl->rsize; o++) {",
             "        int64_t idx[SG_MAXDIMS] = {0}, rest = r0;\n"
             "        for (int d = pl->nr - 1; d >= 0; d--) "
             "{ idx[d] = rest % pl->rshape[d]; rest /= pl->rshape[d]; }\n"
             "        for (int64_t o = r0; o < r1; o++) {"),
            (f"        if (os == (int64_t)sizeof({OUT})) {{",
             f"        if (part) {{\n"
             f"            for (int64_t j = 0; j < m; j++) part[j0 - lo + j] = acc[j];\n"
             f"        }} else if (os == (int64_t)sizeof({OUT})) {{"),
        ]
        for old, new in edits:
            assert old in text, old
            text = text.replace(old, new)
        return text

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
        """SG_FN(items) (OpenMP kernels): work items [lo, hi) of one thread:
        outputs (path A, each group whole), or runs of COL_UNIT columns
        of an output row (path B).  Each output is computed as serially."""
        OUT = self.OUT
        if self.arg:
            work = ("        *(int64_t *)ob = SG_FN(find)(p, pl, SG_FN(group)(p, pl));\n"
                    "        it++;\n"
                    "        (void)c;")
        else:
            work = (f"            if (pl->rsize == 0) *({OUT} *)ob = ({OUT}){self.ident};\n"
                    f"            else if (runs) {{\n"
                    f"                /* the outputs up to the end of this row at once */\n"
                    f"                const int64_t left = pl->kshape[nko - 1] - idx[nko - 1];\n"
                    f"                const int64_t m = hi - it < left ? hi - it : left;\n"
                    f"                SG_FN(runs)(p, pl, ob, m);\n"
                    f"                idx[nko - 1] += m - 1;\n"
                    f"                it += m - 1;\n"
                    f"            }}\n"
                    f"            else *({OUT} *)ob = ({OUT})SG_FN(group)(p, pl);\n"
                    "            it++;")
            work = f"""        if (cols) {{
            const int64_t c1 = hi - it < per - c ? c + (hi - it) : per;
            const int64_t n = pl->kshape[pl->nk - 1];
            SG_FN(cols)(p, ob, pl, c * {COL_UNIT}, c1 * {COL_UNIT} < n ? c1 * {COL_UNIT} : n, 0,
                        pl->rsize, NULL);
            it += c1 - c;
            c = 0;
        }} else {{
{work}
        }}"""
        runs = "" if self.arg else f"    const int runs = !cols && {self.runs_ok('pl')};\n"
        return f"""static void SG_FN(items)(const sg_array *in, sg_array *out,
                         const sg_red_plan *pl, int cols, int nko, int64_t per,
                         int64_t lo, int64_t hi) {{
    int64_t idx[SG_MAXDIMS] = {{0}}, rest = lo / per, c = lo % per;
    for (int d = nko - 1; d >= 0; d--) {{ idx[d] = rest % pl->kshape[d]; rest /= pl->kshape[d]; }}
{runs}    (void)cols;
    for (int64_t it = lo; it < hi;) {{
{self._pointers(8, None)}
{work}
        for (int d = nko - 1; d >= 0; d--) {{ if (++idx[d] < pl->kshape[d]) break; idx[d] = 0; }}
    }}
}}
"""

    def split_fn(self):
        """SG_FN(split) (OpenMP kernels, path A): few outputs with long groups.
        One parallel region computes every block of every group, the threads
        taking contiguous ranges of them; then each group's block results are
        folded in order (SG_FN(fold)).  Without memory for the block results,
        the serial loop."""
        ACC, OUT, block = self.ACC, self.OUT, self._block_size()
        if self.arg:
            store = "*(int64_t *)ob = SG_FN(pfind)(p, pl, SG_FN(fold)(res + o * per, per), nt);"
        else:
            store = f"*({OUT} *)ob = ({OUT})SG_FN(fold)(res + o * per, per);"
        return f"""static void SG_FN(split)(const sg_array *in, sg_array *out,
                         const sg_red_plan *pl, int64_t count, int nt) {{
    const int nko = pl->nk;
    const int64_t n = pl->rshape[pl->nr - 1];
    const int64_t per = pl->rsize / n * ((n + {block} - 1) / {block}), total = count * per;
    {ACC} *res = malloc(sizeof({ACC}) * (size_t)total);
    if (!res) {{
        SG_FN(items)(in, out, pl, 0, nko, 1, 0, count);
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

    def rows_fn(self):
        """SG_FN(rows) (OpenMP kernels, path B): one output row of few columns;
        the reduced rows are cut into a fixed number of parts (a function of
        the row count only), computed on the threads, and the parts' partial
        results are combined in part order: the same bits for any thread
        count.  Returns nonzero when it cannot allocate the partials."""
        ACC, OUT = self.ACC, self.OUT
        return f"""static int SG_FN(rows)(const sg_array *in, sg_array *out,
                        const sg_red_plan *pl, int nt) {{
    const int64_t n = pl->kshape[pl->nk - 1], os = pl->ostr[pl->nk - 1];
    int64_t parts = pl->rsize / {ROW_PART_MIN};
    if (parts > {ROW_PARTS_MAX}) parts = {ROW_PARTS_MAX};
    if (parts < 1) parts = 1;
    {ACC} *part = malloc(sizeof({ACC}) * (size_t)(n * parts));
    if (!part) return 1;
    const char *p[{self.nin}];
    for (int k = 0; k < {self.nin}; k++) p[k] = in[k].data;
    #pragma omp parallel for num_threads(nt) schedule(dynamic) if(nt > 1)
    for (int64_t t = 0; t < parts; t++)
        SG_FN(cols)(p, out[0].data, pl, 0, n, pl->rsize * t / parts,
                    pl->rsize * (t + 1) / parts, part + t * n);
    for (int64_t j = 0; j < n; j++) {{
        {ACC} a = part[j];
        for (int64_t t = 1; t < parts; t++) {{
            const {ACC} q = part[t * n + j];
            a = {self.comb('a', 'q')};
        }}
        *({OUT} *)(out[0].data + j * os) = ({OUT})a;
    }}
    free(part);
    return 0;
}}
"""

    def prun_fn(self):
        """SG_FN(run) of an OpenMP kernel: serial below the size threshold or
        with one thread; else outputs (or column runs) shared out when there
        are many, each group split when there are few."""
        head = self.run_fn(runs=False).split("    int64_t idx[SG_MAXDIMS] = {0};\n")[0]
        # before the one-thread exit: split rows give the same bits on any thread count
        rows = ("" if self.arg else
                f"    if (cols && count == 1 && items < {ROW_SPLIT_ITEMS} && "
                "!SG_FN(rows)(in, out, &pl, nt)) return 0;\n")
        u = COL_UNIT
        return f"""{head}    const int64_t per = cols ? (pl.kshape[pl.nk - 1] + {u} - 1) / {u} : 1;
    const int64_t items = count * per;
    /* one while the calling thread backs off under load (sg_region_team) */
    const int nt = sg_region_team();
    if (pl.rsize == 0 || pl.ksize * pl.rsize < {self.minpar}) {{
        SG_FN(items)(in, out, &pl, cols, nko, per, 0, items);
        return 0;
    }}
{rows}    if (nt < 2) {{
        SG_FN(items)(in, out, &pl, cols, nko, per, 0, items);
        return 0;
    }}
    if (!cols && count < 4 * nt) {{
        SG_FN(split)(in, out, &pl, count, nt);
        return 0;
    }}
    const int64_t chunks = items < 8 * (int64_t)nt ? items : 8 * (int64_t)nt;
    #pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (int64_t c = 0; c < chunks; c++)
        SG_FN(items)(in, out, &pl, cols, nko, per, items * c / chunks, items * (c + 1) / chunks);
    return 0;
}}
"""
