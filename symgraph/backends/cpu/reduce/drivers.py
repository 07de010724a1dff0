"""The drivers of reduction kernels, compiled once in the support library
(``c_src/cpu/reduce/drivers.inc``) instead of in every kernel.

A reduction kernel spent most of GCC's time on the code that only drives its
fused element's loops: the walks over groups, outputs and blocks, the folds
of block results and the sharing out on threads (0.11 s of the 0.15 s of an
OpenMP float sum, GCC 12 at -O2).  That code depends on the kernel only
through its accumulator's C type and a few values and functions, so the
support library holds it once per accumulator type, and a kernel of every
kind but argmax and argmin keeps its block, runs and column loops
(reduce/codegen.py), a store, a combine, and a run that builds the plan and
calls ``sg_red_run_<suffix>`` with a table of them.  A kernel built without
the ``openmp`` flag calls the same drivers with a size threshold no input
reaches, so it never starts a thread: serial and threaded kernels differ
only in that number.

The drivers are the text that the kernels generated for themselves before,
with the kernel's functions called through pointers: the same operations in
the same order, so the same bits on any thread count.  argmax and argmin
(whose index search drives differently) keep generated drivers
(reduce/parallel.py).
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.cpu.reduce.codegen import COL_UNIT

__all__ = ["support_text", "uses_drivers", "kernel_functions", "SUFFIXES", "SERIAL"]

#: Bump when the drivers' C changes in a way its text would not show.
VERSION = 3
#: Accumulator C types with drivers in the support library, and their suffixes.
SUFFIXES = {"float": "f32", "double": "f64", "int8_t": "i8", "uint8_t": "u8",
            "int16_t": "i16", "uint16_t": "u16", "int32_t": "i32", "uint32_t": "u32",
            "int64_t": "i64", "uint64_t": "u64"}
#: The size threshold of a kernel built without the openmp flag: never reached.
SERIAL = "INT64_MAX"


def support_text(acc):
    """(key, C text) of the support library's drivers for accumulator ``acc``."""
    from symgraph.backends.cpu.reduce.parallel import (ROW_PART_MIN, ROW_PARTS_MAX,
                                                       ROW_SPLIT_ITEMS)

    y = SUFFIXES[acc]
    return (f"sg_reduce_{y}_v{VERSION}",
            c_file("cpu/reduce/drivers.inc", ACC=acc, Y=y, COL_UNIT=COL_UNIT,
                   ROW_PART_MIN=ROW_PART_MIN, ROW_PARTS_MAX=ROW_PARTS_MAX,
                   ROW_SPLIT_ITEMS=ROW_SPLIT_ITEMS))


def uses_drivers(gen):
    """Whether the kernel of ``gen`` (a reduce/codegen.py generator) calls the
    library's drivers: every kind but argmax and argmin."""
    return not gen.arg and gen.ACC in SUFFIXES


def kernel_functions(gen, minpar):
    """C of the kernel's own store, combine and run for a kernel that uses the
    drivers; ``minpar``: the element count (a C expression) from which its
    work is shared out on threads."""
    y, nin, ACC = SUFFIXES[gen.ACC], gen.nin, gen.ACC
    red = ", ".join("1" if d in gen.spec.axes else "0" for d in range(gen.ndim)) or "0"
    return f"""static void SG_FN(store)(char *ob, {ACC} v) {{ *({gen.OUT} *)ob = ({gen.OUT})v; }}

static {ACC} SG_FN(comb)({ACC} a, {ACC} b) {{ return {gen.comb('a', 'b')}; }}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const unsigned char red[] = {{{red}}};
    static const sg_red_k_{y} k = {{{nin}, {int(gen.pairwise)}, {gen._block_size()}, {minpar},
                                    {gen.ident}, SG_FN(block), SG_FN(cols), SG_FN(store),
                                    SG_FN(runs), SG_FN(comb)}};
    int64_t shape[SG_MAXDIMS];
    if (SG_FN(eshape)(in, shape, err) || SG_FN(empty)(shape, err)) return 1;
    sg_red_plan pl;
    sg_red_plan_build(&pl, {nin}, in, {gen.ndim}, shape, red, &out[0], 1);
    if (pl.ksize == 0) return 0;
    sg_red_run_{y}(&k, in, out, &pl);
    return 0;
}}
"""
