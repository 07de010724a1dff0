"""CUDA for ``MRGUniform`` (Theano's ``rng_mrg`` on the GPU): the same numbers as
the CPU, whatever the launch shape.

A stream state is six integers and sample ``i`` comes from stream
``i % n_streams``; so each stream is walked by one thread, which draws its
samples ``s, s + n_streams, ...`` in order and writes its advanced state.  That
is the CPU's order exactly (``ops/mrg.py``), and the grid only decides which
thread walks which stream.  The sizes are host inputs.
"""

from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["mrg_reason", "mrg_uniform_lowering"]

BLOCK = 128


def mrg_reason(node):
    """None when the MRGUniform ``node`` runs on the device, else why not."""
    if str(node.outputs[1].dtype) == "float16":
        return "float16 samples are drawn on the CPU"
    return None


def mrg_uniform_lowering(op, node):
    """CUDA of MRGUniform(dtype)(rstate, size) -> (new_rstate, sample)."""
    from symgraph.ops.mrg import _SCALE, M1, M2

    if mrg_reason(node) is not None:
        return None
    dtype = str(node.outputs[1].dtype)
    T = c_type(dtype)
    mask, offset, scale = _SCALE[dtype]
    ndim = node.outputs[1].ndim
    size_t = c_type(node.inputs[1].dtype)
    source = f"""
__global__ void SG_FN(kernel)(int64_t n, int64_t streams, const int32_t *state, int64_t s0,
                              int64_t s1, int32_t *new_state, {T} *out) {{
    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < streams;
         s += (int64_t)blockDim.x * gridDim.x) {{
        int64_t x11 = state[s * s0], x12 = state[s * s0 + s1], x13 = state[s * s0 + 2 * s1];
        int64_t x21 = state[s * s0 + 3 * s1], x22 = state[s * s0 + 4 * s1];
        int64_t x23 = state[s * s0 + 5 * s1];
        for (int64_t i = s; i < n; i += streams) {{
            int64_t y1 = (4194304LL * x12 + 129LL * x13) % {M1}LL;
            int64_t y2 = (32768LL * x21 + 32769LL * x23) % {M2}LL;
            x13 = x12; x12 = x11; x11 = y1;
            x23 = x22; x22 = x21; x21 = y2;
            int64_t diff = y1 - y2;
            int64_t raw = diff <= 0 ? diff + {M1}LL : diff;
            out[i] = ({T})((double)((raw & {mask}LL) + {offset}LL) * {scale!r});
        }}
        new_state[s * 6] = (int32_t)x11; new_state[s * 6 + 1] = (int32_t)x12;
        new_state[s * 6 + 2] = (int32_t)x13; new_state[s * 6 + 3] = (int32_t)x21;
        new_state[s * 6 + 4] = (int32_t)x22; new_state[s * 6 + 5] = (int32_t)x23;
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    if (in[0].ndim != 2 || in[0].shape[1] != 6 || in[0].shape[0] == 0)
        SG_FAIL(err, SG_ERR_VALUE, "MRGUniform: the state must have shape (streams, 6), got "
                "%lld rows of %lld", (long long)in[0].shape[0],
                (long long)(in[0].ndim > 1 ? in[0].shape[1] : 0));
    out_shapes[0] = in[0].shape[0];
    out_shapes[1] = 6;
    for (int d = 0; d < {ndim}; d++) {{
        int64_t size = (int64_t)*(const {size_t} *)(in[1].data + d * in[1].strides[0]);
        if (size < 0) SG_FAIL(err, SG_ERR_VALUE, "MRGUniform: negative size");
        out_shapes[SG_MAXDIMS + d] = size;
    }}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    int64_t n = 1;
    for (int d = 0; d < {ndim}; d++) n *= out[1].shape[d];
    int64_t streams = in[0].shape[0];
    int64_t blocks = (streams + {BLOCK} - 1) / {BLOCK};
    if (blocks > 4096) blocks = 4096;
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, n, streams,
              (const int32_t *)in[0].data, in[0].strides[0] / 4, in[0].strides[1] / 4,
              (int32_t *)out[0].data, ({T} *)out[1].data);
    SG_CUDA_CHECK(err, "the device MRG uniform draw");
    return 0;
}}
"""
    return CKernel(source=source, version=1)
