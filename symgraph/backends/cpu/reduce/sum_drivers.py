"""The drivers of float sums on OpenMP threads, compiled once in the support
library (``c_src/cpu/reduce/sum_drivers.inc``) instead of in every kernel.

A reduction kernel spent most of GCC's time on the code that only drives its
fused element's loops: the walks over groups, outputs and blocks, the pairwise
folds and the sharing out on threads (0.11 s of the 0.15 s of an OpenMP float
sum, GCC 12 at -O2).  For pairwise float sums (``sum`` with a float
accumulator: every sum and mean of a float tensor) that code does not depend
on the kernel but through its accumulator type, so the support library holds
it for ``float`` and ``double``, and such a kernel keeps its block and column
loops (reduce/codegen.py), a store of one output element, and a run that
builds the plan and calls ``sg_red_sum_run_<f32|f64>`` with pointers to them.

The drivers are the text that ``reduce/parallel.py`` generates for every
other kind, with the kernel's functions called through pointers: the same
operations in the same order, so the same bits on any thread count.
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.cpu.reduce.codegen import COL_UNIT, PAIR_BLOCK

__all__ = ["support_text", "uses_drivers", "kernel_functions", "SUFFIXES"]

#: Bump when the drivers' C changes in a way its text would not show.
VERSION = 2
#: Accumulator C types with drivers in the support library, and their suffixes.
SUFFIXES = {"float": "f32", "double": "f64"}


def support_text(acc):
    """(key, C text) of the support library's drivers for accumulator ``acc``."""
    from symgraph.backends.cpu.reduce.parallel import (ROW_PART_MIN, ROW_PARTS_MAX,
                                                       ROW_SPLIT_ITEMS)

    y = SUFFIXES[acc]
    return (f"sg_reduce_sum_{y}_v{VERSION}",
            c_file("cpu/reduce/sum_drivers.inc", ACC=acc, Y=y, BLOCK=PAIR_BLOCK,
                   COL_UNIT=COL_UNIT, ROW_PART_MIN=ROW_PART_MIN, ROW_PARTS_MAX=ROW_PARTS_MAX,
                   ROW_SPLIT_ITEMS=ROW_SPLIT_ITEMS))


def uses_drivers(gen):
    """Whether the OpenMP kernel of ``gen`` (a ParallelGen) calls the library's
    drivers: a pairwise float sum."""
    return gen.pairwise and not gen.arg and gen.ACC in SUFFIXES


def kernel_functions(gen):
    """C of the kernel's own store and run for a kernel that uses the drivers."""
    y, nin = SUFFIXES[gen.ACC], gen.nin
    red = ", ".join("1" if d in gen.spec.axes else "0" for d in range(gen.ndim)) or "0"
    return f"""static void SG_FN(store)(char *ob, {gen.ACC} v) {{ *({gen.OUT} *)ob = ({gen.OUT})v; }}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const unsigned char red[] = {{{red}}};
    static const sg_red_sum_{y} k = {{{nin}, {gen.minpar}, SG_FN(block), SG_FN(cols),
                                      SG_FN(store), SG_FN(runs)}};
    int64_t shape[SG_MAXDIMS];
    if (SG_FN(eshape)(in, shape, err) || SG_FN(empty)(shape, err)) return 1;
    sg_red_plan pl;
    sg_red_plan_build(&pl, {nin}, in, {gen.ndim}, shape, red, &out[0], 1);
    if (pl.ksize == 0) return 0;
    sg_red_sum_run_{y}(&k, in, out, &pl);
    return 0;
}}
"""
