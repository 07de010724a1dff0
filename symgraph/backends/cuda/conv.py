"""CUDA of the concrete convolutions ``DnnConv`` (with its bias and ReLU
epilogue), ``DnnConvGradI`` and ``DnnConvGradW``, for 2 and 3 spatial
dimensions: direct kernels (``c_src/cuda/conv_direct.inc``).

The host part is the CPU kernel's: the geometry of a call, its checks and
its error messages come from ``backends/cpu/conv/codegen.py`` (host C that
reads only shapes, and the shape input of a gradient, which therefore stays
on the host: ``host_inputs``).  The op's ``algo`` names a CPU or cuDNN
algorithm; these kernels are the device's one algorithm until the cuDNN ops
arrive, so the flags ``dnn.conv.algo_*`` do not change what runs here.  Its
``precision`` does: the sums run in float64 for 'float64', and operands and
results are rounded to float16 for 'float16', as on the CPU.
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.cpu.conv.codegen import _SHAPE_TEXT, _geometry
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.cuda.nnet import _BLOCK_REDUCE
from symgraph.backends.native.kernel import CKernel

__all__ = ["conv_reason", "conv_lowering"]

VERSION = 1
BLOCK = 256
MAX_BLOCKS = 4096
_DTYPES = ("float16", "float32", "float64")

_KERNELS = (f"sg_cuda_conv_direct_v{VERSION}",
            f"#define SG_CU_CONV_BLOCK {BLOCK}\n" + c_file("cuda/conv_direct.inc"))


def conv_reason(node):
    """None when the concrete convolution ``node`` runs on the device, else why not."""
    op = node.op
    dtype = str(node.outputs[0].dtype)
    data = node.inputs[:3] if op.direction == "fwd" else node.inputs[:2]
    if dtype not in _DTYPES or any(str(v.dtype) != dtype for v in data):
        return "the device convolution takes float16, float32 or float64 operands of one dtype"
    if op.direction != "fwd" and not str(node.inputs[2].dtype).startswith(("int", "uint")):
        return "the shape input of a convolution gradient must be integers"
    return None


def _strides(index, role):
    """C: the element strides of input ``index`` as a 5-D (N, C, D, H, W) operand
    into ``a.<role>``; a 2-D operand has a leading spatial size of 1 (stride 0),
    and a dimension of size 1 gets stride 0 too."""
    return f"""    {{
        const sg_array *v = &in[{index}];
        const int lead = 5 - v->ndim;
        for (int d = 0; d < 5; d++) a.{role}[d] = 0;
        for (int d = 0; d < v->ndim; d++) {{
            const int to = d < 2 ? d : d + lead;
            a.{role}[to] = v->shape[d] == 1 ? 0 : v->strides[d] / (int64_t)sizeof(T);
        }}
    }}
"""


def conv_lowering(op, node):
    """The CKernel (CUDA source) of a concrete convolution node, or None."""
    if conv_reason(node) is not None:
        return None
    direction = op.direction
    dtype = str(node.outputs[0].dtype)
    acc = "double" if (op.precision == "float64" or dtype == "float64") else "float"
    r16 = int(op.precision == "float16" and dtype != "float16")
    shape_ctype = None if direction == "fwd" else c_type(str(node.inputs[2].dtype))
    name = c_string(str(op), printf=True)
    what = c_string(f"the device {op}", quote=True, limit=120)
    bias = direction == "fwd" and getattr(op, "bias", False)
    relu = int(direction == "fwd" and getattr(op, "activation", None) == "relu")
    if direction == "fwd":
        strides = _strides(0, "xs") + _strides(1, "ws")
        launch = (f"(const T *)in[0].data, (const T *)in[1].data, "
                  f"{'(const T *)in[2].data' if bias else '(const T *)NULL'}, (T *)out[0].data")
        kernel, threads = "sg_cu_conv_fwd", "total"
    elif direction == "bwd_data":
        strides = _strides(0, "ws") + _strides(1, "ys")
        launch = "(const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data"
        kernel, threads = "sg_cu_conv_bwd_data", "total"
    else:
        strides = _strides(0, "xs") + _strides(1, "ys")
        launch = "(const T *)in[0].data, (const T *)in[1].data, (T *)out[0].data"
        kernel, threads = "sg_cu_conv_bwd_filter", "per_block"
    # the filter gradient runs one block per output element; the others one
    # thread per output element
    grid = ("total < {m} ? total : {m}" if threads == "per_block" else
            "(total + {b} - 1) / {b} < {m} ? (total + {b} - 1) / {b} : {m}").format(
                b=BLOCK, m=MAX_BLOCKS)
    source = f"#define T {storage_type(dtype)}\n#define ACC {acc}\n" + \
        _geometry(op, name, shape_ctype) + f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    sg_conv_geom g;
    return SG_FN(geom)(in, &g, out_shapes, err);
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    sg_cu_conv_args a;
    int64_t shape[SG_MAXDIMS];
    if (SG_FN(geom)(in, &a.g, shape, err)) return 1;
    const int64_t total = sg_size(&out[0]);
    if (total == 0) return 0;
{strides}    a.flip = {int(op.filter_flip)};
    a.r16 = {r16};
    a.relu = {relu};
    const int64_t blocks = {grid};
    auto kernel = {kernel}<T, ACC>;
    SG_LAUNCH(kernel, (unsigned)blocks, {BLOCK}, 0, a, {launch});
    SG_CUDA_CHECK(err, {what});
    return 0;
}}
#undef SG_CONVK_ND
#undef SG_CONVK_G
#undef T
#undef ACC
"""
    return CKernel(source=source, support=(_SHAPE_TEXT, _BLOCK_REDUCE, _KERNELS),
                   headers=('"conv/sg_conv_api.h"', "<string.h>", "<stdio.h>"),
                   version=VERSION)
