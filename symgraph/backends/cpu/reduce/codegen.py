"""C kernels for reductions: sum, prod, max, min, all, any, argmax, argmin, and
a reduction fused with the element-wise work that feeds it.

One generator serves every reduction.  A ``ReduceSpec`` says what one element
of the reduced array is (a C expression of the inputs' values: the input
itself, or a fused element-wise expression), how elements combine, and in
which dtype they accumulate.  The generated kernel works for any strides
(negative and zero too) and any axis set:

* at run time the shared planner (``reduce/plan.py``, in the shared
  support library: ``support_lib``) drops size-1 dimensions, sorts
  the kept and the reduced dimensions by stride (largest first; argmax and
  argmin keep C order, because their index is the position in C order) and
  merges dimensions that every array steps through as one;
* **path A** (the innermost reduced dimension is the innermost in memory:
  reducing every axis of a contiguous array, row sums, a transposed column
  sum): each output element's group is reduced with ``L`` independent
  accumulators ("lanes") over contiguous runs.  Lanes need no reassociation,
  so GCC vectorizes them without ``-ffast-math``.  Where every group is one
  block (one reduced dimension of at most a block: row sums of a matrix with
  few columns), whole runs of outputs along the innermost kept dimension go
  through one call (``runs``), with no per-output walk;
* **path B** (the innermost kept dimension is the innermost in memory: column
  sums, ``sum(axis=0)`` of a C-contiguous matrix): rows are accumulated into
  a chunk of outputs, vectorized over the columns.

Float sums are *pairwise*: NumPy sums float arrays pairwise (blocks of 128
elements, 8 accumulators), so that the rounding error grows as O(log n), not
O(n).  Path A does the same with blocks of ``PAIR_BLOCK`` elements summed in
lanes (each lane adds at most PAIR_BLOCK/L elements) whose block sums are
combined by a binary counter: the partial sum of 2**k blocks is added to
another of 2**k blocks, as a balanced tree, in O(1) memory and without
recursion.  The error bound is about (PAIR_BLOCK/L + log2 L + log2(n /
PAIR_BLOCK)) ulps, the same order as NumPy's; the order of additions differs
from NumPy's, so results agree to float rounding, not bit for bit.  Path B
sums rows one after the other, as NumPy does for ``axis=0``.

Max and min propagate NaN as NumPy's ``maximum``/``minimum`` (a NaN in the
group gives NaN); argmax and argmin return the first NaN's index, as NumPy.
Empty groups give 0 (sum), 1 (prod), True (all), False (any); max, min,
argmax and argmin raise SG_ERR_VALUE with the Python ``perform``'s message.
float16 is loaded into float32 and accumulated there.

A kernel holds the loops that touch elements (path A's block and runs, path
B's columns; argmax/argmin: the block and the index scan) and calls the
support library's drivers for the rest (``reduce/drivers.py``, which says how
they share the work out on threads with ``config.openmp``).
"""

import re

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_compute_type, c_type, has_c_type
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.cpu.reduce.plan import MAX_INPUTS
from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY
from symgraph.backends.cpu.reduce.spec import combine, identity, is_float

#: Bump when the generated code changes in a way its text would not show.
VERSION = 5
#: Elements per pairwise block in path A (float sums).
PAIR_BLOCK = 1024
#: Elements per block for the other reductions (no pairwise combination).
PLAIN_BLOCK = 16384
#: Outputs accumulated together in path B.
COL_CHUNK = 512
#: The compiler's time per character of a reduction kernel against an
#: element-wise one's (GCC 12, -O2, an OpenMP float32 sum against the other
#: kernels of the MLP's training step: about 12 against 9 us per character).
#: Underestimating it put both of that step's sums in one library, which
#: then took twice as long to compile as the other.
COMPILE_WEIGHT = 1.4
#: How GCC optimizes each function of a kernel.  The functions that touch
#: every element (the fused element's loops) at the command line's level
#: (-O2, vectorized); the one that runs once per output (runs) at -O1; the
#: others, once per call (shape checks, the run, a store, a combine), at -Og
#: (the cheapest to compile that keeps variables in registers).  The drivers
#: that walk groups and share work out are in the support library.
HOT = ("block", "cols", "scan")
PER_OUTPUT = ("runs",)
DRIVER = '__attribute__((optimize("Og")))'
PER_OUTPUT_DRIVER = '__attribute__((optimize("O1")))'
#: With OpenMP: path B's columns are shared out in multiples of this many, so
#: that every column keeps its place in the vector loop (body or tail).
COL_UNIT = 64

# -- code generation --------------------------------------------------------------

def _lanes(acc_dtype):
    """Independent accumulators in path A: 128 bytes of them (four AVX2
    registers, two AVX-512 ones), enough to hide the add latency."""
    size = {"uint8_t": 1, "int8_t": 1, "uint16_t": 2, "int16_t": 2, "float": 4,
            "int32_t": 4, "uint32_t": 4}.get(c_compute_type(acc_dtype), 8)
    return 128 // size


def mark_drivers(source):
    """``source`` with DRIVER (PER_OUTPUT_DRIVER) before every function
    definition not in HOT (in PER_OUTPUT)."""
    def mark(match):
        name = match.group(2)
        if name in HOT:
            return match.group(0)
        return f"{PER_OUTPUT_DRIVER if name in PER_OUTPUT else DRIVER} {match.group(0)}"
    return re.sub(r"^(static |int )[^\n]*?SG_FN\((\w+)\)\(", mark, source, flags=re.M)


def _halves(n):
    """n/2, n/4, ..., 1: the levels of a tree over ``n`` lanes."""
    return [n >> k for k in range(1, n.bit_length())]


def _per_input(fmt, indices):
    """``fmt`` repeated for each input index (``@`` stands for the index)."""
    return "\n".join(fmt.replace("@", str(k)) for k in indices)


class _Gen:
    """The pieces of one kernel's source (a helper of ``reduce_kernel``)."""

    def __init__(self, spec):
        self.spec = spec
        self.nin = len(spec.in_dtypes)
        self.ndim = len(spec.in_broadcastable[0])
        self.T = [c_type(d) for d in spec.in_dtypes]
        self.compute = list(spec.in_compute or spec.in_dtypes)
        self.ACC = c_compute_type(spec.acc_dtype)
        self.OUT = c_type(spec.out_dtype)
        self.arg = spec.kind in ("argmax", "argmin")
        # argmax/argmin find the extremum with path A first, then its index.
        self.kind = {"argmax": "max", "argmin": "min"}.get(spec.kind, spec.kind)
        self.ident = identity(self.kind, spec.acc_dtype)
        # Float max/min lanes use a plain compare-select (one vmaxps) and flag
        # NaNs in separate lanes: five times faster than a NaN-aware select.
        self.nan_lanes = self.kind in ("max", "min") and is_float(spec.acc_dtype)
        self.pairwise = spec.kind == "sum" and is_float(spec.acc_dtype)
        axes = set(spec.axes)
        # Inputs broadcast over every reduced axis are constant over a group:
        # path A loads them once per group.
        self.constant = [k for k in range(self.nin) if spec.fused and spec.axes and all(
            spec.in_broadcastable[k][a] for a in axes)]
        self.varying = [k for k in range(self.nin) if k not in self.constant]

    def load(self, k, ref):
        """C for input k's value (stored element ``ref``) in its compute type."""
        ctype = c_compute_type(self.compute[k])
        return f"(({ctype}){ref})"

    def elem(self, refs, target):
        """C declaring ``target`` (of the accumulator's type) and computing one
        element into it; ``refs[k]`` is input k's stored element (constant
        inputs are the hoisted ``v<k>``).  The inputs' values and the
        element's own statements live in a block of their own."""
        decls = [f"const {c_compute_type(self.compute[k])} a{k} = {self.load(k, refs[k])}; "
                 for k in range(self.nin) if k not in self.constant]
        names = [f"v{k}" if k in self.constant else f"a{k}" for k in range(self.nin)]
        result = self.spec.element(names)
        stmts, expr = result if isinstance(result, tuple) else ("", result)
        return f"{self.ACC} {target}; {{ {''.join(decls)}{stmts}{target} = {expr}; }}"

    def hoisted(self):
        """Declarations of the group-constant inputs' values (path A's block:
        input k's one value at ``p[k]``)."""
        return "\n".join(
            f"    const {c_compute_type(self.compute[k])} v{k} = "
            f"{self.load(k, f'*(const {self.T[k]} *)p[{k}]')};" for k in self.constant)

    def comb(self, a, b):
        return combine(self.kind, self.spec.acc_dtype, a, b)

    def lane_comb(self, a, b, flag):
        """Combining a lane with an element: ``comb``, except for float
        max/min, where NaN goes into the lane's flag ``flag``."""
        if not self.nan_lanes:
            return f"{a} = {self.comb(a, b)};"
        cmp = ">=" if self.kind == "max" else "<="
        return f"{a} = {a} {cmp} {b} ? {a} : {b}; {flag} |= {b} != {b};"

    # ---- checks and shapes
    def eshape(self):
        """SG_FN(eshape): the element-wise shape, with Elemwise's broadcast checks."""
        s = self.spec
        if not s.fused:
            return ("static int SG_FN(eshape)(const sg_array *in, int64_t *shape, "
                    "sg_error *err) {\n"
                    f"    (void)err;\n"
                    f"    for (int d = 0; d < {self.ndim}; d++) shape[d] = in[0].shape[d];\n"
                    f"    return 0;\n}}\n")
        # (a 0-d element-wise shape still gets a one-column table: C has no
        # zero-length arrays)
        rows = ", ".join("{" + (", ".join("1" if b else "0" for b in bc) or "0") + "}"
                         for bc in s.in_broadcastable)
        name = c_string(s.elemwise_name, printf=True)
        table = (f"    static const unsigned char bc[{self.nin}][{max(1, self.ndim)}] = "
                 f"{{{rows}}};\n")
        return f"""static int SG_FN(eshape)(const sg_array *in, int64_t *shape, sg_error *err) {{
{table}    for (int d = 0; d < {self.ndim}; d++) {{
        int64_t size = -1; int owner = 0;
        for (int k = 0; k < {self.nin}; k++) {{
            if (bc[k][d]) continue;
            if (size < 0) {{ size = in[k].shape[d]; owner = k; }}
            else if (in[k].shape[d] != size) {{
                char shapes[400]; size_t n = 0;
                for (int i = 0; i < {self.nin} && n < sizeof shapes; i++) {{
                    if (i) n += (size_t)snprintf(shapes + n, sizeof shapes - n, ", ");
                    if (n < sizeof shapes)
                        sg_red_fmt_shape(shapes + n, sizeof shapes - n, in[i].shape, in[i].ndim);
                    n = strlen(shapes);
                }}
                SG_FAIL(err, SG_ERR_VALUE, "{name}: input %d has size %lld in dimension %d, "
                        "but input %d has size %lld (shapes %s)", k, (long long)in[k].shape[d], d,
                        owner, (long long)size, shapes);
            }}
        }}
        shape[d] = size < 0 ? 1 : size;
    }}
    for (int k = 0; k < {self.nin}; k++)
        for (int d = 0; d < {self.ndim}; d++)
            if (bc[k][d] && in[k].shape[d] != 1)
                SG_FAIL(err, SG_ERR_VALUE, "{name}: input %d is declared broadcastable in "
                        "dimension %d but has size %lld", k, d, (long long)in[k].shape[d]);
    return 0;
}}
"""

    def empty_check(self):
        """SG_FN(empty): the Python error for an empty group (max, min, arg*)."""
        s = self.spec
        if s.empty_message is None or not s.axes:
            return "static int SG_FN(empty)(const int64_t *shape, sg_error *err) " \
                   "{ (void)shape; (void)err; return 0; }\n"
        cond = " || ".join(f"shape[{a}] == 0" for a in s.axes)
        head, _, tail = s.empty_message.partition("{shape}")
        return f"""static int SG_FN(empty)(const int64_t *shape, sg_error *err) {{
    if ({cond}) {{
        char text[256];
        sg_red_fmt_shape(text, sizeof text, shape, {self.ndim});
        SG_FAIL(err, SG_ERR_VALUE, "{c_string(head, printf=True)}%s{c_string(tail, printf=True)}", text);
    }}
    return 0;
}}
"""

    def shape_fn(self):
        kept = [d for d in range(self.ndim) if d not in self.spec.axes]
        sets = "\n".join(f"    out_shapes[{j}] = shape[{d}];" for j, d in enumerate(kept))
        return f"""int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    int64_t shape[SG_MAXDIMS];
    if (SG_FN(eshape)(in, shape, err) || SG_FN(empty)(shape, err)) return 1;
{sets}
    (void)out_shapes;
    return 0;
}}
"""

    # ---- path A: one group, reduced with lanes (pairwise for float sums)
    def block_size(self):
        """Elements per block of path A."""
        return PAIR_BLOCK if self.pairwise else PLAIN_BLOCK

    def block_fn(self):
        """SG_FN(block): path A's result of one block: ``m`` elements of every
        input, input k's first at ``p[k]`` and the next ones ``s[k]`` bytes
        apart, reduced in ``L`` lanes (vectorized where the inputs are
        contiguous; the vector loop's tail goes to lane 0, a strided block's
        element ``i`` to lane ``i % L``) combined as a tree.  The serial group
        and the OpenMP blocks both call it: one copy of the fused element's
        loops in path A, and the same code for every block.

        What GCC spends its time on is kept small: the strided loop holds an
        empty ``asm`` (GCC would otherwise gather its loads, at the cost of
        another vector loop), and the tree is one loop per level (nested loops
        were unrolled and then vectorized statement by statement, which cost
        GCC as much as the block's loops).  The contiguous tail stays
        vectorizable: a fused element (expf) is computed in vectors there."""
        T, ACC, L = self.T, self.ACC, _lanes(self.spec.acc_dtype)
        NANT = "int32_t" if ACC == "float" else "int64_t"
        nan_decl = (f"    {NANT} nanf[{L}]; for (int l = 0; l < {L}; l++) nanf[l] = 0;\n"
                    if self.nan_lanes else "")
        vary = self.varying
        contig = " && ".join([f"s{k} == (int64_t)sizeof({T[k]})" for k in vary] or ["1"])
        qs = "\n".join(f"        const {T[k]} *q{k} = (const {T[k]} *)r{k};" for k in vary)
        e_vec = self.elem({k: f"q{k}[i + l]" for k in vary}, "e")
        e_one = self.elem({k: f"q{k}[i]" for k in vary}, "e")
        e_str = self.elem({k: f"*(const {T[k]} *)(r{k} + i * s{k})" for k in vary}, "e")
        # A contiguous block shorter than the lanes is added up in lane 0 and
        # the tree adds the identity to it: an exact no-op (a sum that starts
        # from +0 is never -0), so the block returns lane 0 at once.  Short
        # groups (sum(x, axis=1) of an (n, 3) matrix) were mostly lanes and
        # tree.  Float max/min keep the lanes: their NaN flags live there.
        short = ("" if self.nan_lanes else
                 f"    if (contig && m < {L}) {{\n"
                 f"        {ACC} acc = {self.ident};\n"
                 + "".join(f"        const {T[k]} *q{k} = (const {T[k]} *)r{k};\n" for k in vary)
                 + f"        for (; i < m; i++) {{ {e_one} acc = {self.comb('acc', 'e')}; }}\n"
                 f"        return acc;\n    }}\n")
        tree = "".join(
            f"    for (int l = 0; l < {w}; l++) {{ {self.lane_comb('lane[l]', f'lane[l + {w}]', 'nanf[l]')} }}\n"
            for w in _halves(L))
        return f"""static __attribute__((noinline)) {ACC} SG_FN(block)(const char *const *p,
                                                    const int64_t *s, int64_t m) {{
{self.hoisted()}
{_per_input("    const char *r@ = p[@]; const int64_t s@ = s[@];", vary)}
    const int contig = {contig};
    {ACC} lane[{L}];
    for (int l = 0; l < {L}; l++) lane[l] = {self.ident};
{nan_decl}    int64_t i = 0;
{short}    if (contig) {{
{qs}
        for (; i + {L} <= m; i += {L})
            for (int l = 0; l < {L}; l++) {{
                {e_vec}
                {self.lane_comb('lane[l]', 'e', 'nanf[l]')}
            }}
        for (; i < m; i++) {{
            {e_one}
            {self.lane_comb('lane[0]', 'e', 'nanf[0]')}
        }}
    }}
    for (; i < m; i++) {{
        __asm__("");
        {e_str}
        {self.lane_comb(f'lane[i & {L - 1}]', 'e', f'nanf[i & {L - 1}]')}
    }}
{tree}{self._nan_fix(L, NANT)}    return lane[0];
}}
"""

    def _nan_fix(self, L, NANT):
        """C turning a block's NaN flags into a NaN result (float max/min)."""
        if not self.nan_lanes:
            return ""
        return (f"    {{ {NANT} any = 0;\n"
                f"      for (int l = 0; l < {L}; l++) any |= nanf[l];\n"
                f"      if (any) lane[0] = NAN; }}\n")

    def runs_fn(self):
        """SG_FN(runs): path A where every group is one block (one reduced
        dimension of at most a block's elements): ``count``
        outputs along the innermost kept dimension, from the one at ``b``
        (into ``ob``), each its block's result folded as the drivers fold a
        group of one block: the same bits, without a group's walk per output.  Groups
        shorter than the lanes are summed in place (SG_FN(block)'s first exit)."""
        ACC, OUT, T, L = self.ACC, self.OUT, self.T, _lanes(self.spec.acc_dtype)
        fold = ("acc += r;" if self.pairwise else f"acc = {self.comb('acc', 'r')};")
        start = "0" if self.pairwise else self.ident
        short = ""
        if not self.nan_lanes:
            # groups shorter than the lanes, contiguous: SG_FN(block)'s first
            # exit inline, without a call per output
            vary = self.varying
            contig = " && ".join([f"s[{k}] == (int64_t)sizeof({T[k]})" for k in vary] or ["1"])
            hoist = "".join("        " + line + "\n" for line in self.hoisted().split("\n")
                            if line)
            qs = "".join(f"            const {T[k]} *q{k} = (const {T[k]} *)p[{k}];\n"
                         for k in vary)
            e_one = self.elem({k: f"q{k}[i]" for k in vary}, "e")
            short = f"""    if ({contig} && n < {L}) {{
        for (int64_t c = 0; c < count; c++) {{
{hoist}{qs}            {ACC} r = {self.ident};
            for (int64_t i = 0; i < n; i++) {{ {e_one} r = {self.comb('r', 'e')}; }}
            {ACC} acc = {start};
            {fold}
            *({OUT} *)ob = ({OUT})acc;
            for (int k = 0; k < {self.nin}; k++) p[k] += ks[k];
            ob += os;
        }}
        return;
    }}
"""
        return f"""static void SG_FN(runs)(const char *const *b, const sg_red_plan *pl, char *ob,
                        int64_t count) {{
    const int ki = pl->nk - 1;
    const int64_t n = pl->rshape[0], os = pl->ostr[ki];
    const int64_t *s = pl->rstr[0], *ks = pl->kstr[ki];
    const char *p[{self.nin}];
    for (int k = 0; k < {self.nin}; k++) p[k] = b[k];
{short}    for (int64_t c = 0; c < count; c++) {{
        const {ACC} r = SG_FN(block)(p, s, n);
        {ACC} acc = {start};
        {fold}
        *({OUT} *)ob = ({OUT})acc;
        for (int k = 0; k < {self.nin}; k++) p[k] += ks[k];
        ob += os;
    }}
}}
"""

    # ---- path B: a chunk of outputs along the innermost kept dimension
    def cols_fn(self):
        """SG_FN(cols): path B, columns [lo, hi) of the innermost kept
        dimension over reduced rows [r0, r1), accumulated in chunks of
        COL_CHUNK columns (vectorized over them where the inputs are
        contiguous) into ``part`` when it is not NULL (the drivers' split
        rows), else into the output."""
        T, ACC, OUT = self.T, self.ACC, self.OUT
        allk = list(range(self.nin))
        contig = " && ".join(f"s{k} == (int64_t)sizeof({T[k]})" for k in allk)
        # In path B a group-constant input still varies along the kept dimension:
        # load it per element like the others.
        saved, self.constant = self.constant, []
        decl = "e"
        e_vec = self.elem({k: f"q{k}[j]" for k in allk}, decl)
        e_str = self.elem({k: f"*(const {T[k]} *)(p{k} + j * s{k})" for k in allk}, decl)
        self.constant = saved
        qs = "\n".join(f"                const {T[k]} *q{k} = (const {T[k]} *)p{k};" for k in allk)
        return f"""static void SG_FN(cols)(const char *const *b, char *ob, const sg_red_plan *pl,
                          int64_t lo, int64_t hi, int64_t r0, int64_t r1, {ACC} *part) {{
    const int ki = pl->nk - 1;
    const int64_t os = pl->ostr[ki];
{_per_input("    const int64_t s@ = pl->kstr[ki][@];", allk)}
    const int contig = {contig};
    {ACC} acc[{COL_CHUNK}];
    for (int64_t j0 = lo; j0 < hi; j0 += {COL_CHUNK}) {{
        const int64_t m = hi - j0 < {COL_CHUNK} ? hi - j0 : {COL_CHUNK};
        for (int64_t j = 0; j < m; j++) acc[j] = {self.ident};
        int64_t idx[SG_MAXDIMS] = {{0}}, rest = r0;
        for (int d = pl->nr - 1; d >= 0; d--) {{ idx[d] = rest % pl->rshape[d]; rest /= pl->rshape[d]; }}
        for (int64_t o = r0; o < r1; o++) {{
{_per_input("            const char *p@ = b[@] + j0 * s@;", allk)}
            for (int d = 0; d < pl->nr; d++) {{
{_per_input("                p@ += idx[d] * pl->rstr[d][@];", allk)}
            }}
            if (contig) {{
{qs}
                for (int64_t j = 0; j < m; j++) {{
                    {e_vec}
                    acc[j] = {self.comb('acc[j]', 'e')};
                }}
            }} else {{
                for (int64_t j = 0; j < m; j++) {{
                    __asm__("");  /* not vectorized: a gather loop costs GCC more than it gains */
                    {e_str}
                    acc[j] = {self.comb('acc[j]', 'e')};
                }}
            }}
            for (int d = pl->nr - 1; d >= 0; d--) {{
                if (++idx[d] < pl->rshape[d]) break;
                idx[d] = 0;
            }}
        }}
        if (part) {{
            for (int64_t j = 0; j < m; j++) part[j0 - lo + j] = acc[j];
        }} else if (os == (int64_t)sizeof({OUT})) {{
            {OUT} *w = ({OUT} *)ob + j0;
            for (int64_t j = 0; j < m; j++) w[j] = ({OUT})acc[j];
        }} else {{
            for (int64_t j = 0; j < m; j++) *({OUT} *)(ob + (j0 + j) * os) = ({OUT})acc[j];
        }}
    }}
}}
"""

    # ---- argmax/argmin: the first element equal to the group's extremum
    def scan_fn(self):
        """SG_FN(scan): the first ``i`` in [a, z) whose element (at ``p0 + i *
        s0``) equals ``best`` (or is NaN when ``best`` is: NumPy's argmax), -1
        when none does.  Blocks of 64 of a contiguous run are first checked in
        a vectorizable loop; a block with a hit (or a strided block) is
        scanned one element at a time."""
        T, ACC = self.T, self.ACC
        hit = "(v == best) | ((v != v) & bn)"
        e_blk = self.elem({0: "q0[i0 + i]"}, "v")
        e_str = self.elem({0: f"*(const {T[0]} *)(p0 + i * s0)"}, "v")
        return f"""static __attribute__((noinline)) int64_t SG_FN(scan)(const char *p0, int64_t s0,
                                                        int64_t a, int64_t z, {ACC} best) {{
    const int bn = best != best;
    if (s0 == (int64_t)sizeof({T[0]})) {{
        const {T[0]} *q0 = (const {T[0]} *)p0;
        for (int64_t i0 = a; i0 < z; i0 += 64) {{
            const int64_t m = z - i0 < 64 ? z - i0 : 64;
            int any = 0;
            for (int64_t i = 0; i < m; i++) {{ {e_blk} any |= {hit}; }}
            if (!any) continue;
            for (int64_t i = i0; i < i0 + m; i++) {{ {e_str} if ({hit}) return i; }}
        }}
        return -1;
    }}
    for (int64_t i = a; i < z; i++) {{ {e_str} if ({hit}) return i; }}
    return -1;
}}
"""

    def source(self, minpar=None):
        """The kernel's C: the loops that touch elements, a store, a combine and
        a run calling the support library's drivers (reduce/drivers.py);
        ``minpar``: the element count from which they share the work out on
        threads (None: never, a kernel built without the openmp flag)."""
        from symgraph.backends.cpu.reduce import drivers, prebuilt

        limit = drivers.SERIAL if minpar is None else str(minpar)
        parts = [self.header(), self.eshape(), self.empty_check(), self.shape_fn()]
        library = prebuilt.prefix_of(self.spec)
        if library is not None:
            # a plain reduction whose loops the support library holds
            parts.append(drivers.kernel_functions(self, limit, loops=library))
        else:
            loops = [self.scan_fn()] if self.arg else [self.runs_fn(), self.cols_fn()]
            parts += [self.block_fn(), *loops, drivers.kernel_functions(self, limit)]
        return mark_drivers("\n".join(parts))

    def header(self):
        s = self.spec
        return (f"/* {c_string(s.name, printf=True).replace('*/', '* /')}: {s.kind} over axes {s.axes}, "
                f"accumulated in {s.acc_dtype} */\n")


def reduce_kernel(spec):
    """The CKernel for ``spec`` (a ReduceSpec), or None when it has no native code."""
    dtypes = list(spec.in_dtypes) + [spec.acc_dtype, spec.out_dtype]
    if not all(has_c_type(d) for d in dtypes) or len(spec.in_dtypes) > MAX_INPUTS:
        return None
    if spec.kind in ("argmax", "argmin") and len(spec.in_dtypes) != 1:
        return None
    from symgraph.config import config

    # the drivers, and their OpenMP regions, are in the support library
    # (reduce/drivers.py): the flag only sets where they share the work out
    minpar = int(config.openmp_reduce_minsize) if config.openmp else None
    return CKernel(source=_Gen(spec).source(minpar),
                   support=(SUPPORT_ENTRY,) + tuple(spec.support),
                   headers=tuple(spec.headers), version=VERSION, openmp=False,
                   extra=dict(spec.extra), compile_weight=COMPILE_WEIGHT)
