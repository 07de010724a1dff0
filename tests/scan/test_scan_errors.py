"""scan's errors name the argument at fault, the step and the user's line."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T

HERE = __file__.rsplit("/", 1)[-1]


def test_step_output_dtype_differs_from_initial_state():
    with pytest.raises(TypeError, match=r"returns dtype float64 for outputs_info\[0\], but "
                                        r"its initial value has dtype int64.*no implicit"):
        symgraph.scan(lambda h: h * 0.5, outputs_info=T.constant(0, dtype="int64"), n_steps=3)


def test_step_output_ndim_differs_from_initial_state():
    x = T.vector("x")
    with pytest.raises(TypeError, match=r"returns a 2-d value for outputs_info\[0\] 'x', but "
                                        r"each step of it is 1-d") as info:
        symgraph.scan(lambda h: T.outer(h, h), outputs_info=x, n_steps=3)
    assert HERE in str(info.value)


def test_step_output_static_shape_differs():
    x = T.TensorType("float64", shape=(2,))("x")
    with pytest.raises(TypeError, match=r"returns shape \(4,\) for outputs_info\[0\] 'x'"):
        symgraph.scan(lambda h: T.concatenate([h, h]), outputs_info=x, n_steps=3)


def test_step_output_shape_changes_at_run_time():
    x = T.vector("x")
    out, _ = symgraph.scan(lambda h: T.concatenate([h, h]), outputs_info=x, n_steps=3)
    f = symgraph.function([x], out)
    with pytest.raises(ValueError, match=r"at step 0, the step function returned shape \(4,\) "
                                         r"for outputs_info\[0\] 'x', but its initial value "
                                         r"gives each step the shape \(2,\)") as info:
        f(np.ones(2))
    assert f"{HERE}:" in str(info.value)


def test_mapped_output_shape_changes_between_steps():
    n = T.lvector("n")
    out, _ = symgraph.scan(lambda k: T.zeros((k,)), sequences=n)
    f = symgraph.function([n], out)
    with pytest.raises(ValueError, match="at step 1.*returned shape \\(3,\\).*step 0 "
                                         "returned shape \\(2,\\)"):
        f(np.array([2, 3]))


def test_taps_reaching_before_the_start():
    X0 = T.matrix("X0")
    out, _ = symgraph.scan(lambda a, b: a + b, outputs_info=dict(initial=X0, taps=[-3, -1]),
                           n_steps=4)
    f = symgraph.function([X0], out)
    with pytest.raises(ValueError, match=r"outputs_info\[0\] 'X0' reaches 3 step\(s\) back "
                                         r"\(taps \[-3, -1\]\), but its initial value has only "
                                         r"2 entries"):
        f(np.ones((2, 2)))
    with pytest.raises(TypeError, match="needs a leading dimension of at least 2 entries"):
        symgraph.scan(lambda a: a, outputs_info=dict(initial=T.scalar("s"), taps=[-2]),
                      n_steps=2)


def test_bad_taps():
    x = T.vector("x")
    with pytest.raises(ValueError, match="must be negative"):
        symgraph.scan(lambda a: a, outputs_info=dict(initial=x, taps=[0]), n_steps=2)
    with pytest.raises(ValueError, match="must be distinct"):
        symgraph.scan(lambda a, b: a, sequences=dict(input=x, taps=[1, 1]))
    with pytest.raises(ValueError, match="no 'initial' value"):
        symgraph.scan(lambda a: a, outputs_info=dict(taps=[-1]), n_steps=2)
    with pytest.raises(ValueError, match="deprecated"):
        symgraph.scan(lambda a: a, outputs_info=dict(initial=x, return_steps=1), n_steps=2)


def test_sequence_shorter_than_n_steps():
    x = T.vector("x")
    n = T.iscalar("n")
    out, _ = symgraph.scan(lambda a: a * 2, sequences=x, n_steps=n)
    f = symgraph.function([x, n], out)
    with pytest.raises(ValueError, match=r"sequences\[0\] 'x' has 3 entries, but the loop "
                                         r"runs 5 steps \(n_steps\)") as info:
        f(np.ones(3), 5)
    assert f"{HERE}:" in str(info.value)


def test_scalar_is_not_a_sequence():
    with pytest.raises(TypeError, match=r"sequences\[0\].*needs a first dimension"):
        symgraph.scan(lambda a: a, sequences=T.scalar("s"))


def test_non_sequence_that_is_not_a_variable():
    x = T.vector("x")
    with pytest.raises(TypeError, match=r"non_sequences\[1\] is a str \('hello'\), not a "
                                        r"symbolic variable") as info:
        symgraph.scan(lambda a, b, c: a * 2, sequences=x, non_sequences=[x, "hello"])
    assert HERE in str(info.value)
    with pytest.raises(TypeError, match=r"non_sequences\[0\] is a object"):
        symgraph.scan(lambda a, b: a * 2, sequences=x, non_sequences=[object()])
    out, _ = symgraph.scan(lambda a, b: a * b, sequences=x, non_sequences=[3])  # numbers convert
    np.testing.assert_allclose(symgraph.function([x], out)(np.ones(2)), [3, 3])


def test_failure_inside_step_k_says_k():
    x = T.vector("x")
    idx = T.lvector("idx")
    out, _ = symgraph.scan(lambda i, x: x[i], sequences=idx, non_sequences=x, name="gather")
    f = symgraph.function([idx, x], out)
    with pytest.raises(IndexError, match=r"(?s)scan 'gather' \(built at .*\) failed at step 2 "
                                         r"\(of 3\).*out of bounds") as info:
        f(np.array([0, 1, 7]), np.ones(3))
    assert "Scan{gather}" in str(info.value)


def test_negative_n_steps():
    x = T.vector("x")
    with pytest.raises(ValueError, match="n_steps is -2; it must be >= 0"):
        symgraph.scan(lambda h: h, outputs_info=x, n_steps=-2)
    n = T.iscalar("n")
    out, _ = symgraph.scan(lambda h: h * 2, outputs_info=x, n_steps=n)
    f = symgraph.function([x, n], out)
    with pytest.raises(IndexError, match="asked to run -1 steps"):
        f(np.ones(2), -1)
    with pytest.raises(TypeError, match="n_steps must be an int"):
        symgraph.scan(lambda h: h, outputs_info=x, n_steps=2.5)
    with pytest.raises(TypeError, match="n_steps must be an integer scalar"):
        symgraph.scan(lambda h: h, outputs_info=x, n_steps=T.scalar())


def test_until_must_come_last():
    x = T.vector("x")
    with pytest.raises(ValueError, match="must be the last thing returned"):
        symgraph.scan(lambda h: (symgraph.scan_module.until(h.sum() > 1), h),
                      outputs_info=x, n_steps=3)
    with pytest.raises(TypeError, match="must be a scalar"):
        symgraph.scan_module.until(x)


def test_bad_step_return_and_updates():
    x = T.vector("x")
    with pytest.raises(TypeError, match="the step function returned"):
        symgraph.scan(lambda h: "nonsense", outputs_info=x, n_steps=3)
    with pytest.raises(TypeError, match="not a shared variable"):
        symgraph.scan(lambda h: (h, {x: h}), outputs_info=x, n_steps=3)
    a = symgraph.shared(np.zeros(2))
    with pytest.raises(TypeError, match="the update of shared variable"):
        symgraph.scan(lambda h: (h, {a: T.zeros((2, 2))}), outputs_info=x, n_steps=3)


def test_truncate_gradient_and_fn_checked():
    x = T.vector("x")
    with pytest.raises(ValueError, match="truncate_gradient must be -1"):
        symgraph.scan(lambda h: h, outputs_info=x, n_steps=2, truncate_gradient=0)
    with pytest.raises(TypeError, match="fn must be callable"):
        symgraph.scan(3, outputs_info=x, n_steps=2)
