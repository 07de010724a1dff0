"""The BLAS rewrites (dot + scale + add -> Gemm, Gemv, Ger) and the ops they build."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.blas import Dot
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.gemm import Gemm, Gemv, Ger, gemm, gemv, ger
from tests.opt.opt_helpers import check_rewrite, compile_pair, count_op, has_op

RNG = np.random.default_rng(42)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _rewrite(inputs, output, values, present=(), absent=(), dtype="float32"):
    tol = 1e-5 if dtype == "float32" else 1e-12
    return check_rewrite(inputs, output, values, present=present, absent=absent, rtol=tol,
                         atol=tol)


# -- Gemm -----------------------------------------------------------------------------------

GEMM_FORMS = {
    "z*b + dot*a": lambda w, x, y, a, b: w * b + T.dot(x, y) * a,
    "z + a*dot": lambda w, x, y, a, b: w + a * T.dot(x, y),
    "z - dot": lambda w, x, y, a, b: w - T.dot(x, y),
    "dot - z": lambda w, x, y, a, b: T.dot(x, y) - w,
    "-dot*a + z*b": lambda w, x, y, a, b: -T.dot(x, y) * a + w * b,
    "z - a*(b*dot)": lambda w, x, y, a, b: w - a * (b * T.dot(x, y)),
    "constants": lambda w, x, y, a, b: 2 * T.dot(x, y) + w * 3,
    "dot + z": lambda w, x, y, a, b: T.dot(x, y) + w,
    "-(z*b) - dot": lambda w, x, y, a, b: -(w * b) - T.dot(x, y),
}


@pytest.mark.parametrize("form", sorted(GEMM_FORMS))
def test_gemm_forms(form):
    w, x, y = T.fmatrix("w"), T.fmatrix("x"), T.fmatrix("y")
    a, b = T.fscalar("a"), T.fscalar("b")
    values = [_f32(3, 5), _f32(3, 4), _f32(4, 5), np.float32(0.7), np.float32(-1.3)]
    out = GEMM_FORMS[form](w, x, y, a, b)
    fgraph = _rewrite([w, x, y, a, b], out, values, present=[Gemm], absent=[Dot])
    assert count_op(fgraph, Gemm) == 1


def test_gemm_float64_and_transposed_operands():
    w, x, y = T.dmatrix("w"), T.dmatrix("x"), T.dmatrix("y")
    lr = T.dscalar("lr")
    out = w - lr * T.dot(x.T, y.T)
    values = [RNG.standard_normal((3, 5)), RNG.standard_normal((4, 3)),
              RNG.standard_normal((5, 4)), 0.1]
    _rewrite([w, x, y, lr], out, values, present=[Gemm], absent=[Dot], dtype="float64")


def test_gemm_keeps_other_terms():
    w, v, x, y = T.fmatrix("w"), T.fmatrix("v"), T.fmatrix("x"), T.fmatrix("y")
    bias = T.frow("bias")
    out = w + T.dot(x, y) * 2 - v + bias + 1
    values = [_f32(3, 5), _f32(3, 5), _f32(3, 4), _f32(4, 5), _f32(1, 5)]
    _rewrite([w, v, x, y, bias], out, values, present=[Gemm], absent=[Dot])


def test_two_dots_chain_into_two_gemms():
    w, x, y = T.fmatrix("w"), T.fmatrix("x"), T.fmatrix("y")
    out = w + T.dot(x, y) - 0.5 * T.dot(x, y.T[::-1].T[::-1])
    values = [_f32(3, 5), _f32(3, 4), _f32(4, 5)]
    fgraph = _rewrite([w, x, y], out, values, present=[Gemm], absent=[Dot])
    assert count_op(fgraph, Gemm) == 2


def test_two_dots_without_z_make_one_gemm():
    x, y = T.fmatrix("x"), T.fmatrix("y")
    out = T.dot(x, y) + T.dot(x, y * 2)
    fgraph = _rewrite([x, y], out, [_f32(3, 3), _f32(3, 3)], present=[Gemm])
    assert count_op(fgraph, Gemm) == 1 and count_op(fgraph, Dot) == 1


def test_mlp_gradient_update_holds_a_gemm():
    """The SGD update of a dense layer: ``w - lr * dot(x.T, g)`` becomes a Gemm."""
    x, t = T.fmatrix("x"), T.fmatrix("t")
    w, b = T.fmatrix("w"), T.fvector("b")
    lr = T.fscalar("lr")
    h = T.tanh(T.dot(x, w) + b)
    loss = T.mean(T.sqr(h - t))
    gw, gb = T.grad(loss, [w, b])
    new_w, new_b = w - lr * gw, b - lr * gb
    values = [_f32(8, 4), _f32(8, 3), _f32(4, 3), _f32(3), np.float32(0.1)]
    fgraph = _rewrite([x, t, w, b, lr], [new_w, new_b], values, present=[Gemm])
    gemm_node = next(n for n in fgraph.apply_nodes if isinstance(n.op, Gemm))
    assert gemm_node.inputs[0].name == "w"


def test_mlp_training_step_with_shared_updates():
    x, t = T.fmatrix("x"), T.fmatrix("t")
    w = symgraph.shared(_f32(4, 3), name="w")
    h = T.tanh(T.dot(x, w))
    loss = T.mean(T.sqr(h - t))
    update = w - np.float32(0.1) * T.grad(loss, w)
    step = symgraph.function([x, t], loss, updates=[(w, update)])
    assert has_op(step.maker.fgraph, Gemm)
    xv, tv = _f32(8, 4), _f32(8, 3)
    w0 = w.get_value().copy()
    step(xv, tv)
    h0 = np.tanh(xv @ w0)
    grad = xv.T @ (2 * (h0 - tv) * (1 - h0 ** 2) / h0.size)
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * grad, rtol=1e-5, atol=1e-6)


# -- Gemv and Ger -----------------------------------------------------------------------

def test_gemv_matrix_vector():
    z, v, A = T.fvector("z"), T.fvector("v"), T.fmatrix("A")
    a = T.fscalar("a")
    values = [_f32(3), _f32(4), _f32(3, 4), np.float32(-2)]
    fgraph = _rewrite([z, v, A, a], z - a * T.dot(A, v), values, present=[Gemv],
                      absent=[Dot, Gemm])
    assert count_op(fgraph, Gemv) == 1


def test_gemv_vector_matrix_uses_the_transpose():
    z, v, A = T.dvector("z"), T.dvector("v"), T.dmatrix("A")
    values = [RNG.standard_normal(4), RNG.standard_normal(3), RNG.standard_normal((3, 4))]
    fgraph = _rewrite([z, v, A], 3 * z + T.dot(v, A) * 0.5, values, present=[Gemv],
                      absent=[Dot], dtype="float64")
    node = next(n for n in fgraph.apply_nodes if isinstance(n.op, Gemv))
    assert node.inputs[2].owner is not None   # A.T: a DimShuffle, read in place


def test_ger_outer_product():
    w, u, v = T.fmatrix("w"), T.fvector("u"), T.fvector("v")
    lr = T.fscalar("lr")
    values = [_f32(3, 4), _f32(3), _f32(4), np.float32(0.3)]
    fgraph = _rewrite([w, u, v, lr], w - lr * T.outer(u, v), values, present=[Ger])
    assert count_op(fgraph, Ger) == 1
    # Nothing element-wise is left but the negated scale.
    assert all(n.inputs[0].name == "lr" for n in fgraph.apply_nodes
               if isinstance(n.op, Elemwise))
    _rewrite([w, u, v, lr], T.outer(u, v) + 2 * w, values, present=[Ger])


# -- when the rewrites must not fire ----------------------------------------------------

def test_plain_dot_stays_dot():
    x, y = T.fmatrix("x"), T.fmatrix("y")
    _rewrite([x, y], T.dot(x, y) * 2, [_f32(2, 3), _f32(3, 2)], present=[Dot],
             absent=[Gemm])


def test_dot_used_elsewhere_is_not_folded():
    w, x, y = T.fmatrix("w"), T.fmatrix("x"), T.fmatrix("y")
    d = T.dot(x, y)
    _rewrite([w, x, y], [w + d, d], [_f32(2, 2), _f32(2, 3), _f32(3, 2)], present=[Dot],
             absent=[Gemm])


def test_broadcast_z_is_not_used():
    x, w, bias = T.fmatrix("x"), T.fmatrix("w"), T.frow("bias")
    _rewrite([x, w, bias], T.dot(x, w) + bias, [_f32(2, 3), _f32(3, 4), _f32(1, 4)],
             present=[Dot], absent=[Gemm])


def test_integer_and_mixed_dtypes_are_not_rewritten():
    w, x, y = T.imatrix("w"), T.imatrix("x"), T.imatrix("y")
    values = [np.ones((2, 2), "int32")] * 3
    _rewrite([w, x, y], w + T.dot(x, y), values, present=[Dot], absent=[Gemm])
    w64, x32 = T.dmatrix("w"), T.fmatrix("x")
    _rewrite([w64, x32], w64 + T.dot(x32, x32), [np.ones((2, 2)), _f32(2, 2)],
             present=[Dot], absent=[Gemm])


def test_excluding_the_blas_tag():
    w, x, y = T.fmatrix("w"), T.fmatrix("x"), T.fmatrix("y")
    mode = symgraph.Mode(optimizer="fast_run", excluding=["blas"])
    f = symgraph.function([w, x, y], w + T.dot(x, y), mode=mode)
    assert not has_op(f.maker.fgraph, Gemm)


def test_special_values_match_the_unoptimized_graph():
    """lr = 0 times an Inf product is NaN in both graphs; an empty inner dim too."""
    w, x, y = T.dmatrix("w"), T.dmatrix("x"), T.dmatrix("y")
    lr = T.dscalar("lr")
    ref, opt = compile_pair([w, x, y, lr], w - lr * T.dot(x, y))
    assert has_op(opt.maker.fgraph, Gemm)
    xv = RNG.standard_normal((2, 3))
    xv[0, 0] = np.inf
    args = [RNG.standard_normal((2, 2)), xv, RNG.standard_normal((3, 2)), 0.0]
    np.testing.assert_array_equal(opt(*args), ref(*args))
    args = [np.ones((2, 2)), np.ones((2, 0)), np.ones((0, 2)), np.inf]
    np.testing.assert_array_equal(opt(*args), ref(*args))


# -- the ops ---------------------------------------------------------------------------------

def test_ops_check_inputs():
    with pytest.raises(TypeError, match="same dtype"):
        gemm(T.fmatrix(), T.dscalar(), T.fmatrix(), T.fmatrix(), T.fscalar())
    with pytest.raises(TypeError, match="must be 2-d"):
        gemm(T.fvector(), T.fscalar(), T.fmatrix(), T.fmatrix(), T.fscalar())
    with pytest.raises(TypeError, match="must be 1-d"):
        gemv(T.fvector(), T.fscalar(), T.fmatrix(), T.fmatrix(), T.fscalar())
    with pytest.raises(TypeError, match="bool"):
        ger(T.tensor("bool", shape=(None, None)), T.tensor("bool", shape=()),
            T.tensor("bool", shape=(None,)), T.tensor("bool", shape=(None,)))


def test_ops_values_and_shapes():
    z, x, y = T.dmatrix(), T.dmatrix(), T.dmatrix()
    a, b = T.dscalar(), T.dscalar()
    out = gemm(z, a, x, y, b)
    zv, xv, yv = RNG.standard_normal((2, 4)), RNG.standard_normal((2, 3)), \
        RNG.standard_normal((3, 4))
    f = symgraph.function([z, a, x, y, b], [out, out.shape])
    value, shape = f(zv, 2.0, xv, yv, 0.5)
    np.testing.assert_allclose(value, 0.5 * zv + 2 * xv @ yv)
    assert tuple(shape) == (2, 4)
    with pytest.raises(ValueError, match="not aligned"):
        f(zv, 2.0, xv, yv.T, 0.5)
    with pytest.raises(ValueError, match="z has shape"):
        f(zv.T, 2.0, xv, yv, 0.5)
    u, v = T.dvector(), T.dvector()
    g = symgraph.function([z, a, u, v], ger(z, a, u, v))
    np.testing.assert_allclose(g(zv, 3.0, xv[:, 0], yv[0]), zv + 3 * np.outer(xv[:, 0], yv[0]))
    h = symgraph.function([u, a, x, v, b], gemv(u, a, x, v, b))
    np.testing.assert_allclose(h(xv[:, 0], 3.0, xv, yv[:, 0], -1.0),
                               -xv[:, 0] + 3 * xv @ yv[:, 0])


def test_ops_have_no_gradient():
    z, x, y = T.dmatrix(), T.dmatrix(), T.dmatrix()
    out = gemm(z, T.constant(1.0), x, y, T.constant(1.0))
    with pytest.raises(NotImplementedError, match="no gradient"):
        T.grad(out.sum(), x)
