"""Native kernels for the batch normalization ops (``ops/bn.py``).

The normalized axes split ``x`` into *channels* (one per position in the
other dimensions) of ``m`` elements each.  A kernel walks ``x`` in *rows*
along its last dimension, after dropping dimensions of size 1 and merging
adjacent dimensions that are both normalized (or both not) and contiguous in
every array, so that a spatial batch ``(N, C, H, W)`` in C order has rows of
``H * W`` elements of one channel and a per-activation ``(N, D)`` batch rows of
``D`` channels.  Rows are cut into chunks of at most ``CHUNK`` elements, read
where they lie (contiguous, in the compute type) or gathered into a buffer.

* Training statistics, in one pass over ``x``:
  - a row of one channel (its last dimension normalized): each chunk's mean
    and squared deviations by two passes over the chunk while it is in cache
    (the second around the first's mean, corrected by the rounding of that
    mean), summed in lanes of the compute type block by block (``BLOCK``
    elements) and the block sums in double; the chunk is then combined into
    the channel's (count, mean, M2) with Chan's parallel formula, in double;
  - a row of many channels: Welford's update for each channel, in double,
    vectorized across the row (every channel of a row has the same count).
  Both are stable for data far from zero (a mean of 1e4 and a deviation of 1
  lose no digits of the variance).
* The output, in a second pass: ``(x - mean) * (scale * invstd) + bias``,
  rounded as the Python ``perform`` rounds.
* The gradient: per channel sums of ``dy``, ``dy * (x - mean)`` and ``x -
  mean`` in one pass (accumulated as the statistics are), then ``dx = A * dy -
  B * (x - mean) - C`` with per-channel constants.
* Inference: one pass, ``(x - mean) * (scale / sqrt(var + eps)) + bias``.

With the ``openmp`` flag, inputs of at least ``openmp_batchnorm_minsize``
elements run on threads: the passes that write an output share out rows
(dynamically), the statistics of rows that each hold one channel (a spatial
batch) share out groups of channels, each channel summing its rows in the
serial order; the statistics of rows of many channels (per-activation) stay
serial.  The bits are the serial kernel's on any thread count, so a pass
takes one thread while the calling thread backs off under load (its team
comes from the thread runtime, once per pass, with the workspaces sized for it).

float16 is stored as ``_Float16`` and computed in float32.  The parameters
(scale, bias, the statistics) are gathered into contiguous per-channel
arrays first, whatever their strides.
"""

from string import Template

from symgraph.backends.c_family.c_types import FLOAT_SUFFIXES as _DTYPES
from symgraph.backends.c_family.c_types import SUFFIX_C_TYPES as _CTYPE
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.c_family.c_files import c_file

__all__ = ["bn_kernel", "BLOCK", "CHUNK"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 2
#: Elements summed in lanes of the compute type before adding to a double.
BLOCK = 256
#: Most elements of a row handled at once (the buffers' length).
CHUNK = 4096

#: Per storage dtype: (suffix of the C names, compute type's suffix).

# -- geometry and shape checks, independent of the dtype ---------------------------

_COMMON = (f"sg_bn_common_v{VERSION}", c_file("cpu/nnet/batchnorm_common.inc"))

# -- the chunk cores, per compute type -----------------------------------------------

_CORE = Template(c_file("cpu/nnet/batchnorm_core.inc"))

# -- the drivers, per storage type ---------------------------------------------------

_DRIVER = Template(c_file("cpu/nnet/batchnorm_driver.inc"))


def _core(suffix):
    ctype = _CTYPE[suffix]
    return (f"sg_bn_core_{suffix}_v{VERSION}", _CORE.substitute(
        T=ctype, X=suffix, BLOCK=BLOCK,
        # 128 bytes of lanes: enough independent adds to hide their latency
        L=128 // (4 if ctype == "float" else 8)))


def _names(dtype, minpar):
    """The suffix of the driver's C names: the storage type's, and for an OpenMP
    driver its threshold too (drivers of both kinds may share a library)."""
    suffix = _DTYPES[dtype][0]
    return suffix if minpar < 0 else f"{suffix}p{minpar}"


def _driver(dtype, minpar=-1):
    """The drivers for ``dtype``; ``minpar``: the smallest input run on OpenMP
    threads (-1: a kernel without OpenMP)."""
    suffix, core = _DTYPES[dtype]
    ctype = _CTYPE[core]
    y = _names(dtype, minpar)
    return (f"sg_bn_driver_{y}_v{VERSION}", _DRIVER.substitute(
        S=c_type(dtype), T=ctype, X=core, Y=y, SAME="1" if suffix == core else "0",
        CHUNK=CHUNK, SQRT="sqrtf" if ctype == "float" else "sqrt", MINPAR=minpar))


def _shape_source(op, node, kind, mask, name, axes):
    """The kernel's shape function: the perform's checks, then the shapes."""
    names = op._NAMES
    checks = []
    if kind == "grad":
        checks.append(f"""    if (in[1].ndim != in[0].ndim ||
        memcmp(in[1].shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {{
        char a[300], b[300];
        sg_bn_shape_text(a, sizeof a, in[1].shape, in[1].ndim);
        sg_bn_shape_text(b, sizeof b, in[0].shape, in[0].ndim);
        SG_FAIL(err, SG_ERR_VALUE, "%s: dy has shape %s, but x has shape %s", "{name}", a, b);
    }}""")
        params = [(2, names[2]), (3, names[3]), (4, names[4])]
    elif kind == "train":
        params = [(1, "scale"), (2, "bias")]
        if len(node.inputs) > 5:
            params += [(5, "running_mean"), (6, "running_var")]
    else:
        params = [(k, names[k]) for k in range(1, 5)]
    for k, pname in params:
        checks.append(f'    if (sg_bn_check_param(&in[0], &in[{k}], {mask}u, "{name}", '
                      f'"{pname}", "{axes}", err)) return 1;')
    # Output 0 has x's shape, the others (statistics) the reduced shape.
    loop = "    for (int d = 0; d < in[0].ndim; d++)\n        out_shapes[{k} * SG_MAXDIMS + d] = "
    fills = [loop.format(k=k)
             + ("in[0].shape[d];" if k == 0 else f"(({mask}u >> d) & 1) ? 1 : in[0].shape[d];")
             for k in range(len(node.outputs))]
    return ("int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {\n"
            + "\n".join(checks) + "\n" + "\n".join(fills) + "\n    return 0;\n}\n")


def bn_kernel(kind, op, node):
    """The CKernel of a batch-norm node, or None where it has no native code
    (inputs of different dtypes, more than 32 dimensions).  ``kind``: "train"
    (``AbstractBatchNormTrain``), "grad" (``AbstractBatchNormTrainGrad``) or
    "infer" (``AbstractBatchNormInference``), as the lowering table says."""
    from symgraph.ops import bn

    dtype = str(node.outputs[0].dtype)
    if dtype not in _DTYPES or node.inputs[0].ndim > 32:
        return None
    work = bn.work_dtype(dtype)
    scalars = {"train": (3, 4), "grad": (5,), "infer": (5,)}[kind]
    for k, var in enumerate(node.inputs):
        if str(var.dtype) != (work if k in scalars else dtype):
            return None
    from symgraph.config import config

    mask = sum(1 << a for a in op.axes)
    name = c_string(str(op))
    axes = c_string(str(op.axes))
    openmp = bool(config.openmp)
    minpar = int(config.openmp_batchnorm_minsize) if openmp else -1
    y = _names(dtype, minpar)
    call = {"train": f"sg_bn_train_{y}(in, {len(node.inputs)}, out, {mask}u, \"{name}\", err)",
            "grad": f"sg_bn_grad_{y}(in, out, {mask}u, \"{name}\", err)",
            "infer": f"sg_bn_infer_{y}(in, out, {mask}u, \"{name}\", err)"}[kind]
    source = (f"/* {name} */\n" + _shape_source(op, node, kind, mask, name, axes)
              + f"\nint SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{\n"
              f"    return {call};\n}}\n")
    # an OpenMP kernel takes its team from the thread runtime (sg_region_team)
    support = ((SUPPORT_ENTRY,) if openmp else ()) + (
        _COMMON, _core(_DTYPES[dtype][1]), _driver(dtype, minpar))
    return CKernel(source=source, support=support, version=VERSION, openmp=openmp)
