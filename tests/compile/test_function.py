"""function(): inputs, defaults, keywords, outputs, updates, givens, borrow."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import In, Out, function, shared
from symgraph.compile.errors import InputError, MissingInputError, UnusedInputError


def test_single_output_and_list_of_outputs():
    x = T.dvector("x")
    f = function([x], x * 2)
    np.testing.assert_allclose(f([1.0, 2.0]), [2.0, 4.0])
    g = function([x], [x * 2, x + 1])
    a, b = g([1.0, 2.0])
    np.testing.assert_allclose(a, [2.0, 4.0])
    np.testing.assert_allclose(b, [2.0, 3.0])


def test_defaults_and_keywords():
    x, y = T.dscalars("x", "y")
    f = function([x, In(y, value=10.0)], x + y)
    assert f(1.0) == 11.0
    assert f(1.0, 2.0) == 3.0
    assert f(1.0, y=5.0) == 6.0
    assert f(x=2.0, y=3.0) == 5.0
    with pytest.raises(TypeError, match="no input named 'z'"):
        f(1.0, z=3.0)
    with pytest.raises(TypeError, match="twice"):
        f(1.0, x=2.0)


def test_in_name_overrides_variable_name():
    x = T.dscalar("x")
    f = function([In(x, name="alpha")], x * 3)
    assert f(alpha=2.0) == 6.0


def test_wrong_number_of_arguments_names_inputs():
    x, y = T.dvectors("x", "y")
    f = function([x, y], x + y, name="adder")
    with pytest.raises(TypeError, match=r"takes 2 inputs \('x', 'y'\), got 3"):
        f([1.0], [2.0], [3.0])
    with pytest.raises(TypeError, match=r"missing input 'y'"):
        f([1.0])


def test_wrong_rank_names_input_position_and_consumer():
    x, y = T.dvectors("x", "y")
    f = function([x, y], x + y)
    with pytest.raises(InputError) as info:
        f([1.0], np.zeros((2, 2)))
    message = str(info.value)
    assert "'y'" in message and "position 1" in message
    assert "wrong number of dimensions" in message
    assert "test_function.py" in message  # the user's line that built the node


def test_unsafe_cast_is_refused_unless_allowed():
    x = T.fvector("x")
    f = function([x], x * 2)
    with pytest.raises(InputError, match="cannot safely cast"):
        f(np.array([1.0, 2.0], dtype="float64"))
    g = function([x], x * 2, allow_input_downcast=True)
    assert g(np.array([1.0], dtype="float64")).dtype == np.float32
    # Python floats that fit are accepted without asking.
    assert f([1.5]).dtype == np.float32


def test_safe_upcast_is_accepted():
    x = T.dvector("x")
    f = function([x], x + 1)
    np.testing.assert_allclose(f(np.array([1, 2], dtype="int32")), [2.0, 3.0])


def test_shape_mismatch_at_run_time_names_op_and_line():
    x, y = T.dvectors("x", "y")
    z = x + y  # the failing node is built here
    f = function([x, y], z)
    with pytest.raises(ValueError) as info:
        f(np.ones(3), np.ones(4))
    message = str(info.value)
    assert "Elemwise{add}" in message
    assert "z = x + y" in message


def test_exception_verbosity_high_adds_strides_and_graph():
    x, y = T.dvectors("x", "y")
    f = function([x, y], x * y)
    with symgraph.config.change_flags(exception_verbosity="high"):
        with pytest.raises(ValueError) as info:
            f(np.ones(3), np.ones(4))
    assert "strides" in str(info.value)
    assert "subgraph" in str(info.value)


def test_updates_applied_after_outputs():
    w = shared(np.array([1.0, 2.0]), name="w")
    x = T.dvector("x")
    f = function([x], w * x, updates=[(w, w + x)])
    np.testing.assert_allclose(f([1.0, 1.0]), [1.0, 2.0])  # old value in the output
    np.testing.assert_allclose(w.get_value(), [2.0, 3.0])


def test_failing_call_changes_no_shared_variable():
    w = shared(np.array([1.0, 2.0]), name="w")
    c = shared(np.array(0.0), name="counter")
    x = T.dvector("x")
    f = function([x], (w + x).sum(), updates={c: c + 1, w: w * 2})
    with pytest.raises(ValueError):
        f(np.ones(5))
    np.testing.assert_allclose(w.get_value(), [1.0, 2.0])
    assert c.get_value() == 0.0


def test_updates_are_simultaneous():
    a = shared(np.array(1.0), name="a")
    b = shared(np.array(2.0), name="b")
    swap = function([], [], updates=[(a, b), (b, a)])
    swap()
    assert (a.get_value(), b.get_value()) == (2.0, 1.0)
    a.set_value(np.array(5.0))
    swap()
    assert (a.get_value(), b.get_value()) == (1.0, 5.0)


def test_update_type_mismatch_is_an_error():
    w = shared(np.zeros(2, dtype="float32"), name="w")
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match="update of shared variable w"):
        function([x], [], updates=[(w, x)])
    with pytest.raises(TypeError, match="only change shared variables"):
        function([x], [], updates=[(x, x)])


def test_update_keeps_shared_dtype():
    w = shared(np.zeros(2, dtype="float32"), name="w")
    f = function([], [], updates=[(w, w + 1.5)])  # a Python float stays float32
    f()
    assert w.get_value().dtype == np.float32
    with pytest.raises(TypeError, match="cast the expression"):
        function([], [], updates=[(w, w + np.float64(1.5))])  # float64: explicit cast needed
    c = shared(np.zeros(2), name="c")
    g = function([], [], updates=[(c, T.ones_like(c, dtype="int32"))])  # a safe upcast
    g()
    assert c.get_value().tolist() == [1.0, 1.0]


def test_givens():
    x = T.dscalar("x")
    y = T.dscalar("y")
    w = shared(np.array(3.0), name="w")
    f = function([y], x * w, givens={x: y + 1})
    assert f(1.0) == 6.0
    g = function([x], x * w, givens=[(w, T.constant(2.0, dtype="float64"))])
    assert g(4.0) == 8.0


def test_missing_input_names_the_variable():
    x, y = T.dscalars("x", "y")
    with pytest.raises(MissingInputError, match="'y'"):
        function([x], x + y)


def test_unused_input_policy():
    x, y = T.dscalars("x", "y")
    with pytest.raises(UnusedInputError):
        function([x, y], x * 2)
    with pytest.warns(UserWarning):
        function([x, y], x * 2, on_unused_input="warn")
    f = function([x, y], x * 2, on_unused_input="ignore")
    assert f(1.0, 2.0) == 2.0


def test_shared_borrow_semantics():
    value = np.ones(3)
    s = shared(value, borrow=False)
    value[0] = 5.0
    assert s.get_value()[0] == 1.0
    b = shared(value, borrow=True)
    assert b.get_value(borrow=True) is value
    got = s.get_value()
    got[1] = 7.0
    assert s.get_value()[1] == 1.0


def test_outputs_do_not_alias_inputs_or_shared():
    w = shared(np.ones(3), name="w")
    f = function([], w)
    out = f()
    out[0] = 100.0
    assert w.get_value()[0] == 1.0
    x = T.dvector("x")
    g = function([x], x)
    arr = np.zeros(2)
    res = g(arr)
    res[0] = 3.0
    assert arr[0] == 0.0


def test_same_output_twice_gives_independent_arrays():
    x = T.dvector("x")
    y = x * 2
    f = function([x], [y, y])
    a, b = f([1.0, 2.0])
    np.testing.assert_allclose(a, b)
    a[0] = -1.0
    assert b[0] == 2.0


def test_returned_outputs_survive_later_calls():
    x = T.dvector("x")
    f = function([x], Out(x * 2, borrow=False))
    first = f([1.0])
    f([5.0])
    assert first[0] == 2.0


def test_constant_output_and_eval():
    x = T.dvector("x")
    assert (x * 2).eval({x: np.array([1.0, 2.0])}).tolist() == [2.0, 4.0]
    f = function([], T.constant(3.0))
    assert f() == 3.0


def test_intermediate_variable_as_input_cuts_the_graph():
    x = T.dscalar("x")
    y = x * 2
    z = y + 1
    f = function([y], z)
    assert f(10.0) == 11.0


def test_pickle_function_and_shared():
    w = shared(np.array([1.0, 2.0]), name="w")
    x = T.dvector("x")
    f = function([x], (w * x).sum(), updates=[(w, w + 1)])
    g = pickle.loads(pickle.dumps(f))
    assert g([1.0, 1.0]) == 3.0
    assert g([1.0, 1.0]) == 5.0
    assert w.get_value().tolist() == [2.0, 3.0] or w.get_value().tolist() == [1.0, 2.0]
    s = pickle.loads(pickle.dumps(w))
    assert s.get_value().tolist() == w.get_value().tolist()


def test_unpickled_function_runs_in_a_new_process(tmp_path):
    x = T.dvector("x")
    w = shared(np.array([2.0, 3.0]), name="w")
    f = function([x], T.exp(x) * w, updates=[(w, w * 2)])
    path = tmp_path / "f.pkl"
    path.write_bytes(pickle.dumps(f))
    script = textwrap.dedent(f"""
        import pickle, numpy as np
        f = pickle.loads(open({str(path)!r}, "rb").read())
        print(f(np.zeros(2)).tolist(), f(np.zeros(2)).tolist())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[2.0, 3.0] [4.0, 6.0]"


def test_function_needs_a_list_of_inputs():
    x = T.dscalar("x")
    with pytest.raises(TypeError, match="list of inputs"):
        function(x, x)


def test_duplicate_input_is_an_error():
    x = T.dscalar("x")
    with pytest.raises(ValueError, match="twice"):
        function([x, x], x)


def test_profile_records_nodes():
    x = T.dvector("x")
    f = function([x], T.exp(x) + 1, profile=True)
    f(np.ones(3))
    text = f.profile.summary(file="str")
    assert "calls: 1" in text and "exp" in text


def test_nan_guard_mode_names_node():
    x = T.dvector("x")
    y = T.log(x)
    f = function([x], y * 2, mode="NanGuardMode")
    with pytest.raises(FloatingPointError, match="NaN"):
        f(np.array([-1.0]))


def test_debug_mode_runs_and_checks():
    w = shared(np.array([1.0, 2.0]), name="w")
    x = T.dvector("x")
    f = function([x], T.exp(x) * w, updates=[(w, w + 1)], mode="DebugMode")
    np.testing.assert_allclose(f([0.0, 0.0]), [1.0, 2.0])
    np.testing.assert_allclose(w.get_value(), [2.0, 3.0])


def test_debug_mode_catches_undeclared_destroy():
    from symgraph.graph.basic import Apply, Op

    class Sneaky(Op):
        __props__ = ()

        def make_node(self, x):
            return Apply(self, [x], [x.type()])

        def perform(self, node, inputs, out):
            inputs[0] *= 2  # overwrites its input without saying so
            out[0][0] = inputs[0].copy()

    x = T.dvector("x")
    f = function([x], Sneaky()(T.exp(x)), mode="DebugMode")
    with pytest.raises(AssertionError, match="destroy_map"):
        f([0.0])
