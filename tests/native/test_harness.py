"""The kernel harness itself: a hand-written compute kernel and a view kernel."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.backends.native.kernel import CKernel
from tests.native.kernel_harness import KernelError, run_kernel

DOUBLE = CKernel(source="""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    for (int d = 0; d < in[0].ndim; d++) out_shapes[d] = in[0].shape[d];
    if (in[0].ndim == 1 && in[0].shape[0] == 13) SG_FAIL(err, SG_ERR_VALUE, "unlucky %d", 13);
    return 0;
}
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    int64_t n = in[0].shape[0];
    for (int64_t i = 0; i < n; i++)
        *(double *)(out[0].data + 8 * i) = 2 * *(double *)(in[0].data + in[0].strides[0] * i);
    return 0;
}
""")

REVERSE = CKernel(kind="view", view_of=(0,), source="""
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    out[0].ndim = 1;
    out[0].shape[0] = in[0].shape[0];
    out[0].strides[0] = -in[0].strides[0];
    out[0].data = in[0].data + (in[0].shape[0] - 1) * in[0].strides[0];
    return 0;
}
""")


def test_compute_kernel_runs_on_strided_input():
    node = (T.dvector("x") * 2).owner
    x = np.arange(10.0)[::-2]
    (out,) = run_kernel(node, [x], DOUBLE)
    np.testing.assert_array_equal(out, 2 * x)


def test_kernel_error_is_reported():
    node = (T.dvector("x") * 2).owner
    with pytest.raises(KernelError, match="unlucky 13"):
        run_kernel(node, [np.zeros(13)], DOUBLE)


def test_view_kernel_aliases_input():
    node = T.dvector("x")[::-1].owner
    x = np.arange(5.0)
    (out,) = run_kernel(node, [x], REVERSE)
    np.testing.assert_array_equal(out, x[::-1])
    assert np.shares_memory(out, x)
