"""Native kernels for ``Softmax``, ``LogSoftmax`` and ``SoftmaxGrad`` (``ops/nnet.py``).

The op's ``axis`` (or None: every element) splits the array into *rows*: the
elements along the axis, one row per position in the other dimensions.  Each
row is computed by a core function on contiguous memory, in its compute type
(float16 in float32):

* softmax: one pass for the maximum (``L`` lanes, NaN flagged in separate
  lanes so that the compare-select vectorizes); then, block by block of
  ``BLOCK`` elements, ``exp(x - max)`` written into the output and the block
  summed from L1 while it is hot; one pass dividing by the sum (as NumPy
  rounds: multiplying by ``1 / sum`` measured no faster, the pass is bound by
  memory, and would add a rounding);
* log-softmax: the same maximum and sum (the output as scratch), then
  ``(x - max) - log(sum)``, rounded as the Python ``perform`` rounds;
* softmax gradient: ``dy * sm`` into the output, summed block by block, then
  ``out - sm * sum`` (outputs of ``STREAM_BYTES`` or more stored past the
  cache in the AVX-512 float code).

Why blocks rather than one loop that both writes ``exp`` and sums it: GCC
will not vectorize a float sum without reassociation (``-ffast-math``, or
``#pragma omp simd`` which needs ``-fopenmp-simd``, neither in the compiler
flags); it then keeps the adds in order and extracts every vector lane, which
measured 1.5 times slower than a vectorized exp loop followed by a lane-wise
sum of the (L1-resident) block.  Each block is summed in ``L`` independent
lanes combined as a tree, and the block sums are added in double, so the
rounding error does not grow with the row length (NumPy's sum is pairwise).

Vector math: the libmvec SIMD declarations of ``elemwise_codegen``
(``MVEC_SUPPORT``, under ``SG_USE_MVEC``) come first in the support code, so
the exp loop calls ``_ZGV*_expf``; results differ from NumPy's by a few ulp.

float32 rows on AVX-512 (``SIMD16``: compiled with ``-march=native``, so
where the CPU has it) take intrinsics instead: the maximum in four vector
accumulators; exp computed in line (Cody-Waite reduction, a degree-7
polynomial with fused multiply-adds, ``vscalefps``: within 0.71 ulp of the
correctly rounded exp) and summed in registers, blocks of ``BLOCK`` added in
double as above; the next row prefetched while a row's exp runs; the
gradient's sum taken without storing the products, and its output streamed
like the softmax's when large.  Softmax of 4096x1024 on one thread: 3.2 to
1.5 ms (the libmvec call, the block's second pass and the lane-array sums
took two thirds of the time; the passes over a row run from L1).  Without
AVX-512 but with AVX2 and FMA (``SIMD8``) the same code runs in 8 lanes, 2^n
applied in two exact halves: the same exp bits (on this machine with AVX-512
disabled: 3.1 ms with libmvec, 2.6 ms).  float64 and other CPUs keep the
generic code.

Three paths, chosen at run time from the strides:

* rows whose elements are contiguous in every array (the last axis of a
  C-contiguous matrix, or every element of a contiguous array) are computed
  where they lie;
* the column path, when the rows are not contiguous but another dimension is
  in every array (``axis=0`` of a C-contiguous matrix): panels of up to
  ``COLS`` adjacent columns (about ``PANEL_BYTES`` of each array, so that the
  three passes find them in cache) are computed together, vectorized across
  the columns; each column's sum runs in order along the axis, as NumPy sums
  such an axis (4096 x 1024 float32, axis 0: 3 to 5 times faster than
  gathering each column);
* any other layout (negative strides along the rows, float16, ...) is
  gathered row by row into a workspace, computed there and scattered into
  the output.

NaN and Inf behave as the Python ``perform``: a NaN in a row makes the
maximum NaN, hence the whole row; a row of -inf, or one holding +inf, gives
``inf - inf = NaN`` the same way.
"""

from string import Template

import numpy as np

from symgraph.backends.c_family.c_types import FLOAT_SUFFIXES as _DTYPES
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY
from symgraph.config import config
from symgraph.backends.c_family.c_files import c_file

__all__ = ["nnet_kernel", "BLOCK", "COLS", "PANEL_BYTES", "STREAM_BYTES"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 6
#: Elements per block of the exp-and-sum pass (their sum is added in double).
BLOCK = 256

#: Most columns the column path computes together.
COLS = 128
#: The column path's panel: about this many bytes of each array.
PANEL_BYTES = 2048 * 1024
#: Softmax outputs of at least this many bytes are written with non-temporal
#: stores (4096x1024 float32: 4.8 to 3.9 ms on one thread).
STREAM_BYTES = 4 * 1024 * 1024

#: The op codes of the driver's ``op`` argument (OR-ed with ``SG_NN_LARGE``,
#: 4, for a thread's part of an output of ``STREAM_BYTES`` or more).
SOFTMAX, LOG_SOFTMAX, GRAD = 0, 1, 2

#: Per storage dtype: (suffix of the C names, compute type's suffix).

# -- the row cores, per compute type -------------------------------------------

_CORE = Template(c_file("cpu/nnet/softmax_core.inc"))

# -- the driver, per storage type: rows, gather/scatter, the workspace -----------

_DRIVER = Template(c_file("cpu/nnet/softmax_driver.inc"))

_SHAPE_TEXT = (f"sg_nn_shape_text_v{VERSION}", r"""
/* A shape as Python prints a tuple: (), (5,), (2, 3). */
static void sg_nn_shape_text(char *buf, size_t len, const sg_array *a) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < a->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld",
                                 (long long)a->shape[d]);
    if (used < len) snprintf(buf + used, len - used, a->ndim == 1 ? ",)" : ")");
}
""")




def core_text(suffix):
    """(key, C text) of the row cores of compute type ``suffix`` (the library's source)."""
    ctype = {"f32": "float", "f64": "double"}[suffix]
    return (f"sg_nn_core_{suffix}_v{VERSION}", _CORE.substitute(
        T=ctype, X=suffix, BLOCK=BLOCK, COLS=COLS,
        # 128 bytes of lanes (two AVX-512 or four AVX2 registers): enough to
        # hide the latency of the max and the add
        L=128 // (4 if ctype == "float" else 8),
        I="int32_t" if ctype == "float" else "int64_t",
        EXP="expf" if ctype == "float" else "exp",
        V512="__m512" if ctype == "float" else "__m512d",
        V256="__m256" if ctype == "float" else "__m256d",
        PS="ps" if ctype == "float" else "pd", STREAM_BYTES=STREAM_BYTES,
        # the AVX-512 float rows (maximum, exp and sum in intrinsics)
        SIMD16="defined(__AVX512F__)" if ctype == "float" else "0",
        # the same in 8 lanes where there is AVX2 and FMA but not AVX-512
        SIMD8="defined(__AVX2__) && defined(__FMA__)" if ctype == "float" else "0",
        LOG="logf" if ctype == "float" else "log"))


def driver_text(dtype):
    """(key, C text) of the softmax driver of storage ``dtype`` (the library's source)."""
    suffix, core = _DTYPES[dtype]
    return (f"sg_nn_driver_{suffix}_v{VERSION}", _DRIVER.substitute(
        S=c_type(dtype), T={"f32": "float", "f64": "double"}[core], X=core, Y=suffix,
        SAME="1" if suffix == core else "0", PANEL=PANEL_BYTES))


#: The lowering table's names of the three kernels.
_CODES = {"softmax": SOFTMAX, "log_softmax": LOG_SOFTMAX, "softmax_grad": GRAD}


def nnet_kernel(kind, op, node):
    """The CKernel of a ``Softmax`` (``kind`` "softmax"), ``LogSoftmax``
    ("log_softmax") or ``SoftmaxGrad`` ("softmax_grad") node, or None where it
    has no native code (dtypes other than float16/32/64)."""
    from symgraph.backends.cpu.elemwise.loop import MVEC_SUPPORT

    dtype = str(node.outputs[0].dtype)
    if dtype not in _DTYPES or any(str(v.dtype) != dtype for v in node.inputs):
        return None
    code = _CODES[kind]
    nin = len(node.inputs)
    axis = op._axis(node.inputs[-1].ndim)
    name = c_string(str(op), printf=True)
    if code == GRAD:
        # The Python perform's check, with its message.
        check = f"""    if (in[0].ndim != in[1].ndim ||
        memcmp(in[0].shape, in[1].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {{
        char a[200], b[200];
        sg_nn_shape_text(a, sizeof a, &in[0]);
        sg_nn_shape_text(b, sizeof b, &in[1]);
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the gradient has shape %s but the softmax "
                "has shape %s", a, b);
    }}
"""
    else:
        check = ""
    source = f"""/* {name} */
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
{check}    (void)err;
    for (int d = 0; d < in[{nin - 1}].ndim; d++) out_shapes[d] = in[{nin - 1}].shape[d];
    return 0;
}}

"""
    run = f"sg_nn_run_{_DTYPES[dtype][0]}({code}, {-1 if axis is None else axis}"
    ndim = node.outputs[0].ndim
    openmp = bool(config.openmp) and axis is not None and ndim >= 2
    if openmp:
        split = 1 if axis == 0 else 0
        # Splitting the innermost dimension splits the column path's panels:
        # cut at the serial panel width, so that every column is computed in
        # the same panel position (vector lanes or tail) as serially.
        if split == ndim - 1:
            compute = "float" if _DTYPES[dtype][1] == "f32" else "double"
            grain = (f"{PANEL_BYTES} / (out[0].shape[{axis}] * (int64_t)sizeof({compute}));\n"
                     "        grain = grain < 16 ? 16 : grain > SG_NN_COLS ? SG_NN_COLS : grain")
        else:
            grain = "1"
        # Each thread's slice is small, but together they stream: a part of a
        # large output says so (SG_NN_LARGE) and is stored past the cache too.
        part_run = (f"sg_nn_run_{_DTYPES[dtype][0]}({code} | large, "
                    f"{-1 if axis is None else axis}")
        source += _PARALLEL_RUN.substitute(
            RUN=run, PART_RUN=part_run, NIN=nin, NAME=name, SPLIT=split, GRAIN=grain,
            AXIS=axis, MINPAR=int(config.openmp_softmax_minsize),
            ITEM=np.dtype(dtype).itemsize)
    else:
        source += f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    return {run}, in, {nin}, out, "{name}", err);
}}
"""
    # The row cores and the drivers are in the shared support library.
    support = (MVEC_SUPPORT, SUPPORT_ENTRY)
    if code == GRAD:
        support += (_SHAPE_TEXT,)
    return CKernel(source=source, support=support, version=VERSION, openmp=openmp,
                   headers=("<omp.h>",) if openmp else ())


# With OpenMP: the rows are independent, so the threads split a dimension that
# is not the axis into contiguous ranges (whole panels of GRAIN columns) and
# each runs the (serial) shared driver on its slice of every array: the same
# per-row code, the same bits.
_PARALLEL_RUN = Template(c_file("cpu/nnet/softmax_parallel_run.inc"))
