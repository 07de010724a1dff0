"""The drivers of reduction kernels, compiled once in the support library
(``c_src/cpu/reduce/drivers.inc``) instead of in every kernel.

A reduction kernel spent most of GCC's time on the code that only drives its
fused element's loops: the walks over groups, outputs and blocks, the folds
of block results and the sharing out on threads (0.11 s of the 0.15 s of an
OpenMP float sum, GCC 12 at -O2).  That code depends on the kernel only
through its accumulator's C type and a few values and functions, so the
support library holds it once per accumulator type, and a kernel keeps its
block, runs and column loops (argmax/argmin: its block and index scan;
reduce/codegen.py), a store, a combine, and a run that builds the plan and
calls ``sg_red_run_<suffix>`` with a table of them.  A kernel built without
the ``openmp`` flag calls the same drivers with a size threshold no input
reaches, so it never starts a thread: serial and threaded kernels differ
only in that number.  The drivers are the text that the kernels generated
for themselves before, with the kernel's functions called through pointers:
the same operations in the same order, so the same bits.

With ``config.openmp`` the drivers share a kernel's work out when its
element-wise size is at least ``config.openmp_reduce_minsize`` and more than
one thread is available:

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
  the reduced rows are cut into a fixed number of parts (a function of the
  row count, never of the thread count), whose partial results are combined
  in part order.  Max, min, all, any and integer results are exact; float
  sums and products are within the serial error bound and the same bits for
  any thread count, one included.

Work is shared out dynamically, in about eight items per thread: a thread
that the system deschedules (another process on its core) holds up the item
it is computing, not a fixed share (docs/threads.md).  Where an item starts
never changes a result.  The team is the thread runtime's (``sg_region_team``):
one thread while the calling thread backs off under load.
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.cpu.reduce.codegen import COL_UNIT

__all__ = ["support_text", "uses_drivers", "kernel_functions", "SUFFIXES", "SERIAL",
           "ROW_SPLIT_ITEMS", "ROW_PART_MIN", "ROW_PARTS_MAX"]

#: Bump when the drivers' C changes in a way its text would not show.
VERSION = 4
#: Accumulator C types with drivers in the support library, and their suffixes.
SUFFIXES = {"float": "f32", "double": "f64", "int8_t": "i8", "uint8_t": "u8",
            "int16_t": "i16", "uint16_t": "u16", "int32_t": "i32", "uint32_t": "u32",
            "int64_t": "i64", "uint64_t": "u64"}
#: The size threshold of a kernel built without the openmp flag: never reached
#: (drivers.inc defines it).
SERIAL = "SG_RED_SERIAL"
#: Path B splits the reduced rows when it has fewer runs of columns than this.
ROW_SPLIT_ITEMS = 4
#: Reduced rows per part at least, and parts at most, when rows are split.
ROW_PART_MIN = 1024
ROW_PARTS_MAX = 16


def support_text(acc):
    """(key, C text) of the support library's drivers for accumulator ``acc``."""
    y = SUFFIXES[acc]
    return (f"sg_reduce_{y}_v{VERSION}",
            c_file("cpu/reduce/drivers.inc", ACC=acc, Y=y, COL_UNIT=COL_UNIT,
                   ROW_PART_MIN=ROW_PART_MIN, ROW_PARTS_MAX=ROW_PARTS_MAX,
                   ROW_SPLIT_ITEMS=ROW_SPLIT_ITEMS))


def uses_drivers(gen):
    """Whether the kernel of ``gen`` (a reduce/codegen.py generator) calls the
    library's drivers (every accumulator type has them)."""
    return gen.ACC in SUFFIXES


def kernel_functions(gen, minpar, loops=None):
    """C of the kernel's own store, combine and run for a kernel that uses the
    drivers; ``minpar``: the element count (a C expression) from which its
    work is shared out on threads.  ``loops``: the prefix of the support
    library's copy of the kernel's element loops, store and combine
    (reduce/prebuilt.py), None when the kernel holds its own."""
    y, nin, ACC = SUFFIXES[gen.ACC], gen.nin, gen.ACC
    red = ", ".join("1" if d in gen.spec.axes else "0" for d in range(gen.ndim)) or "0"
    fn = (lambda name: f"SG_FN({name})") if loops is None else (lambda name: loops + name)
    # argmax/argmin: path A only, over the reduced dimensions in C order (the
    # index is the position in C order), then the index search
    if gen.arg:
        runs, cols, scan, sort = "NULL", "NULL", fn("scan"), 0
    else:
        runs, cols, scan, sort = fn("runs"), fn("cols"), "NULL", 1
    own = "" if loops is not None else f"""static void SG_FN(store)(char *ob, {ACC} v) {{ *({gen.OUT} *)ob = ({gen.OUT})v; }}

static {ACC} SG_FN(comb)({ACC} a, {ACC} b) {{ return {gen.comb('a', 'b')}; }}

"""
    # the library's functions are reached through its table: not constants
    table = "static const" if loops is None else "const"
    return f"""{own}int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const unsigned char red[] = {{{red}}};
    {table} sg_red_k_{y} k = {{{nin}, {int(gen.pairwise)}, {gen.block_size()}, {minpar},
                                    {gen.ident}, {fn("block")}, {cols}, {fn("store")},
                                    {runs}, {fn("comb")}, {scan}}};
    int64_t shape[SG_MAXDIMS];
    if (SG_FN(eshape)(in, shape, err) || SG_FN(empty)(shape, err)) return 1;
    sg_red_plan pl;
    sg_red_plan_build(&pl, {nin}, in, {gen.ndim}, shape, red, &out[0], {sort});
    if (pl.ksize == 0) return 0;
    sg_red_run_{y}(&k, in, out, &pl);
    return 0;
}}
"""
