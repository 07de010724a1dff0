"""Conv + bias + ReLU in one DnnConv: the op (values, C against Python,
gradients, shapes), and the rewrites ``local_conv_bias`` / ``local_conv_relu``
(they fire on the forms users write, keep values, and leave the
pre-activation out of the gradient)."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.ops import conv_reference as ref
from symgraph.ops.conv_algorithms import DnnConv
from symgraph.tensor import nnet
from tests.ops.op_checks import check_shapes


def _conv_ref(x, w, b=None, relu=False, **kw):
    pads = ref.resolve_pads(kw.get("border_mode", "valid"), w.shape[2:], (1, 1))
    y = ref.conv_forward(x.astype("float64"), w.astype("float64"), pads,
                         kw.get("subsample", (1, 1)), (1, 1), groups=1, flip=True)
    if b is not None:
        y = y + b.astype("float64").reshape(1, -1, 1, 1)
    return np.maximum(y, 0) if relu else y


def _fused_nodes(f):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, DnnConv)]


# -- the op -------------------------------------------------------------------------------

ALGOS = ["none", "small", "large", "fft", "winograd", "time_once"]


@pytest.mark.parametrize("algo", ALGOS)
def test_fused_op_c_against_python(algo, rng):
    """Every forward algorithm with the epilogue: DebugMode compares the C
    kernel with perform; both match the NumPy reference.  Two batch sizes,
    one of them 1 (the whole-call path)."""
    op = DnnConv(2, border_mode="valid", algo=algo, bias=True, activation="relu")
    x, w, b = T.ftensor4("x"), T.ftensor4("w"), T.fvector("b")
    f = symgraph.function([x, w, b], op(x, w, b), mode="DebugMode")
    for n in (3, 1):
        xv = rng.standard_normal((n, 8, 7, 6)).astype("float32")
        wv = rng.standard_normal((16, 8, 3, 3)).astype("float32")
        bv = rng.standard_normal(16).astype("float32")
        np.testing.assert_allclose(f(xv, wv, bv), _conv_ref(xv, wv, bv, True), rtol=1e-4,
                                   atol=1e-4)


@pytest.mark.parametrize("dtype,precision", [("float64", "float64"), ("float16", "float32")])
@pytest.mark.parametrize("bias,activation", [(True, None), (False, "relu")])
def test_fused_op_dtypes_and_parts(dtype, precision, bias, activation, rng):
    """Bias alone and ReLU alone, float64 and float16 storage, with strided
    (non-contiguous) inputs."""
    op = DnnConv(2, border_mode="half", subsample=(2, 1), algo="large", precision=precision,
                 bias=bias, activation=activation)
    x, w = T.tensor4("x", dtype=dtype), T.tensor4("w", dtype=dtype)
    b = T.vector("b", dtype=dtype)
    inputs = [x, w, b] if bias else [x, w]
    f = symgraph.function(inputs, op(*inputs), mode="DebugMode")
    xv = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    wv = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    bv = rng.standard_normal(8).astype(dtype)[::2]
    values = [xv[:, :, ::-1], wv, bv] if bias else [xv[:, :, ::-1], wv]
    want = _conv_ref(xv[:, :, ::-1], wv, bv if bias else None, activation == "relu",
                     border_mode="half", subsample=(2, 1))
    tol = 2e-2 if dtype == "float16" else 1e-10
    np.testing.assert_allclose(f(*values).astype("float64"), want, rtol=tol,
                               atol=tol * max(1.0, np.abs(want).max()))


def test_empty_channels_give_act_of_bias():
    """No input channels: every output is relu(bias) (an empty sum plus the bias)."""
    op = DnnConv(2, algo="large", bias=True, activation="relu")
    x, w, b = T.ftensor4("x"), T.ftensor4("w"), T.fvector("b")
    f = symgraph.function([x, w, b], op(x, w, b))
    bv = np.array([1.5, -2.0, 0.25], "float32")
    got = f(np.ones((2, 0, 4, 4), "float32"), np.ones((3, 0, 2, 2), "float32"), bv)
    np.testing.assert_array_equal(got, np.broadcast_to(np.maximum(bv, 0).reshape(1, 3, 1, 1),
                                                       (2, 3, 3, 3)))


def test_bias_length_error_names_the_op():
    op = DnnConv(2, algo="none", bias=True)
    x, w, b = T.ftensor4("x"), T.ftensor4("w"), T.fvector("b")
    f = symgraph.function([x, w, b], op(x, w, b))
    with pytest.raises(ValueError, match=r"DnnConv\{.*bias=True.*the bias has 2 entries but "
                                         r"there are 3 filters"):
        f(np.ones((1, 1, 4, 4), "float32"), np.ones((3, 1, 2, 2), "float32"),
          np.ones(2, "float32"))


def test_fused_op_gradient_and_shape(rng):
    """verify_grad through every input of the fused op; infer_shape."""
    def fused(x, w, b):
        return DnnConv(2, border_mode="full", algo="none", precision="float64", bias=True,
                       activation="relu")(x, w, b)

    # values away from the ReLU's kink, so finite differences are exact enough
    xv = rng.standard_normal((2, 2, 4, 4))
    wv = rng.standard_normal((3, 2, 2, 2))
    bv = np.array([0.3, -0.2, 0.1])
    verify_grad(fused, [xv, wv, bv], rng=np.random.default_rng(0))
    x, w, b = T.dtensor4("x"), T.dtensor4("w"), T.dvector("b")
    check_shapes([fused(x, w, b)], [x, w, b], [xv, wv, bv])


def test_bad_activation_and_inputs():
    with pytest.raises(ValueError, match="activation 'tanh' is not one of"):
        DnnConv(2, activation="tanh")
    with pytest.raises(TypeError, match="expected 3 inputs"):
        DnnConv(2, bias=True)(T.ftensor4(), T.ftensor4())


# -- the rewrites ---------------------------------------------------------------------------

def _layer(relu_form):
    x, w, b = T.ftensor4("x"), T.ftensor4("w"), T.fvector("b")
    pre = nnet.conv2d(x, w) + b.dimshuffle("x", 0, "x", "x")
    if relu_form == "maximum":
        out = nnet.relu(pre)
    elif relu_form == "switch":
        out = T.switch(pre > 0, pre, 0)
    else:
        out = pre
    return [x, w, b], out


@pytest.mark.parametrize("relu_form", ["maximum", "switch", None])
def test_rewrite_fires_and_keeps_values(relu_form, rng):
    """The forward and its gradient: one fused DnnConv, no node computes the
    pre-activation, values as with rewrites off."""
    inputs, out = _layer(relu_form)
    cost = (out * out).sum()
    grads = symgraph.grad(cost, inputs)
    f = symgraph.function(inputs, [out] + grads)
    (fused,) = _fused_nodes(f)
    assert fused.op.bias and fused.op.activation == ("relu" if relu_form else None)
    # the bias is read by the fused op only (to sum its gradient, too): no
    # broadcast of it is added to anything, so no pre-activation exists
    from symgraph.ops.elemwise import DimShuffle

    assert not [n for n in f.maker.fgraph.toposort()
                if isinstance(n.op, DimShuffle) and n.inputs[0] is fused.inputs[2]]
    x, w, b = (rng.standard_normal(s).astype("float32") for s in
               [(2, 3, 6, 5), (4, 3, 3, 2), (4,)])
    slow = symgraph.function(inputs, [out] + grads, mode=symgraph.Mode(optimizer=None,
                                                                        linker="py"))
    for got, want in zip(f(x, w, b), slow(x, w, b)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_relu_not_fused_when_the_pre_activation_is_used():
    """The pre-activation is an output too: it must exist, so only the bias fuses."""
    inputs, out = _layer("maximum")
    pre = out.owner.inputs[0]
    f = symgraph.function(inputs, [out, pre])
    (node,) = _fused_nodes(f)
    assert node.op.bias and node.op.activation is None


def test_debugmode_training_step(rng):
    """A conv-bias-relu-pool step under DebugMode (each node's C against its
    perform), with the rewrite applied."""
    from symgraph.tensor.signal.pool import pool_2d

    x = T.ftensor4("x")
    w = symgraph.shared(rng.standard_normal((4, 2, 3, 3)).astype("float32") * 0.3)
    b = symgraph.shared(rng.standard_normal(4).astype("float32") * 0.1)
    h = pool_2d(nnet.relu(nnet.conv2d(x, w) + b.dimshuffle("x", 0, "x", "x")), ws=(2, 2),
                ignore_border=True)
    cost = (h ** 2).mean()
    gw, gb = symgraph.grad(cost, [w, b])
    f = symgraph.function([x], cost, updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)],
                          mode="DebugMode")
    assert any(n.op.activation == "relu" for n in _fused_nodes(f))
    xv = rng.standard_normal((3, 2, 8, 8)).astype("float32")
    first = f(xv)
    assert f(xv) < first


def test_excluding_the_tag_keeps_them_apart():
    inputs, out = _layer("maximum")
    mode = symgraph.Mode(optimizer="fast_run").excluding("conv_fusion")
    f = symgraph.function(inputs, out, mode=mode)
    (node,) = _fused_nodes(f)
    assert not node.op.bias and node.op.activation is None
