"""Theano 1.0's configuration flags (config.txt) that symgraph declares under their
own names: each can be set as Theano's could, and does what Theano's did where
symgraph has the mechanism (docs/theano_compat.md, the `config` table)."""

import os
import warnings

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import scalar as S
from symgraph.compile.mode import Mode, NanGuardMode
from symgraph.config import Config, ConfigError, config
from symgraph.graph.basic import Apply, Op
from symgraph.graph.test_value import TestValueError, get_test_value, get_test_values

PY = Mode(linker="py")
PY_NOOPT = Mode(linker="py", optimizer=None)


# -- setting them as Theano programs do --------------------------------------------

THEANO_FLAGS = (
    "compute_test_value=raise,compute_test_value_opt=warn,print_test_value=True,"
    "numpy.seterr_all=warn,numpy.seterr_divide=raise,NanGuardMode.nan_is_error=False,"
    "profile_memory=False,profiling.n_apply=5,profiling.n_ops=7,profiling.destination=stdout,"
    "profiling.ignore_first_call=True,profiling.debugprint=True,cast_policy=custom,"
    "int_division=floatX,allow_gc=False,cycle_detection=fast,check_stack_trace=warn,"
    "on_shape_error=warn,warn.ignore_bug_before=all,traceback.compile_limit=5,"
    "base_compiledir=/tmp/base,compiledir_format=cd_%(python_version)s,blas.ldflags=,"
    "experimental.local_alloc_elemwise_assert=False,conv.assert_shape=True,"
    "optimizer_requiring=fast_run,nocleanup=False,compile.timeout=60,compile.wait=2,"
    "DebugMode.check_preallocated_output=,DebugMode.check_preallocated_output_ndim=2,"
    "DebugMode.warn_input_not_reused=False,reoptimize_unpickled_function=False,"
    "cmodule.warn_no_version=True,cmodule.remove_gxx_opt=False,"
    "cmodule.compilation_warning=False,cmodule.preload_cache=True,"
    "cmodule.age_thresh_use=100,cmodule.debug=False,lib.amdlibm=False,"
    "metaopt.verbose=1,metaopt.optimizer_excluding=a,metaopt.optimizer_including=b,"
    "scan.allow_output_prealloc=False,scan.allow_gc=True,scan.debug=True")


def test_theano_flags_string_sets_every_flag():
    cfg = Config(environ={"SYMGRAPH_FLAGS": THEANO_FLAGS}, rc_paths=[])
    assert cfg.compute_test_value == "raise" and cfg.print_test_value is True
    assert cfg.numpy.seterr_divide == "raise" and cfg.profiling.n_apply == 5
    assert cfg.NanGuardMode.nan_is_error is False
    assert cfg.nan_guard.nan_is_error is False  # the alias sets symgraph's own flag
    assert cfg.compile.timeout == 60 and cfg.cmodule.age_thresh_use == 100
    assert cfg.DebugMode.check_preallocated_output_ndim == 2
    assert cfg.scan.debug is True and cfg.metaopt.verbose == 1
    assert cfg.source("allow_gc") == "SYMGRAPH_FLAGS"


def test_rc_file_sections_of_theano(tmp_path):
    rc = tmp_path / "theanorc"
    rc.write_text("[global]\ncompute_test_value = warn\nallow_gc = False\n"
                  "[numpy]\nseterr_all = raise\n[DebugMode]\nwarn_input_not_reused = False\n"
                  "[NanGuardMode]\ninf_is_error = False\n[profiling]\nn_ops = 3\n"
                  "[compile]\nwait = 1\n[cmodule]\npreload_cache = True\n")
    cfg = Config(environ={}, rc_paths=[str(rc)])
    assert cfg.compute_test_value == "warn" and cfg.allow_gc is False
    assert cfg.numpy.seterr_all == "raise" and cfg.DebugMode.warn_input_not_reused is False
    assert cfg.nan_guard.inf_is_error is False and cfg.profiling.n_ops == 3
    assert cfg.compile.wait == 1 and cfg.cmodule.preload_cache is True


def test_str_config_lists_the_theano_flags():
    text = str(config)
    for name in ("compute_test_value", "numpy.seterr_all", "profiling.n_apply",
                 "NanGuardMode.nan_is_error", "cmodule.age_thresh_use", "scan.debug"):
        assert f"\n{name} (" in "\n" + text


# -- compute_test_value, compute_test_value_opt, print_test_value ---------------------

def _model():
    x = T.dmatrix("x")
    x.tag.test_value = np.random.RandomState(0).rand(5, 4)
    W = symgraph.shared(np.ones((4, 3)), name="W")
    return x, W


def test_test_values_follow_the_graph_as_it_is_built():
    with config.change_flags(compute_test_value="raise"):
        x, W = _model()
        h = T.tanh(T.dot(x, W) + 1)
        cost = T.nnet.softmax(h).mean()
        grad = T.grad(cost, W)
    assert h.tag.test_value.shape == (5, 3)
    np.testing.assert_allclose(h.tag.test_value, np.tanh(x.tag.test_value @ np.ones((4, 3)) + 1))
    assert grad.tag.test_value.shape == (4, 3)
    assert get_test_value(W).shape == (4, 3) and get_test_value(T.constant(2.0)) == 2.0
    assert h.get_test_value() is h.tag.test_value


def test_shape_error_is_raised_at_the_users_line():
    with config.change_flags(compute_test_value="raise"):
        x, W = _model()
        h = T.dot(x, W)
        with pytest.raises(ValueError, match="not aligned") as info:
            T.dot(h, W)  # (5, 3) . (4, 3)
    assert "(5, 3) float64, (4, 3) float64" in str(info.value)
    frames = [f for f in info.traceback if f.path == __file__ or str(f.path) == __file__]
    assert frames and "T.dot(h, W)" in str(frames[-1].statement)


def test_same_graph_without_test_values_builds_silently():
    x, W = _model()  # the flag is off: nothing is evaluated
    h = T.dot(T.dot(x, W), W)
    assert "test_value" not in vars(h.tag)


def test_missing_test_value_by_mode():
    y = T.dvector("y")
    with config.change_flags(compute_test_value="raise"):
        with pytest.raises(TestValueError, match="input 0 \\(y\\) has no test value"):
            y * 2
    with config.change_flags(compute_test_value="warn"):
        with pytest.warns(UserWarning, match="has no test value"):
            z = y * 2
    assert "test_value" not in vars(z.tag)
    with config.change_flags(compute_test_value="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        z = y * 2
    assert "test_value" not in vars(z.tag)


def test_test_value_assignment_is_checked_against_the_type():
    x = T.fmatrix("x")
    with pytest.raises(TypeError, match="does not fit"):
        x.tag.test_value = np.zeros(3, dtype="float32")
    x.tag.test_value = np.zeros((2, 3), dtype="float32")
    assert x.tag.test_value.shape == (2, 3)
    import pickle

    again = pickle.loads(pickle.dumps(x))  # the check survives pickling
    assert again.tag.test_value.shape == (2, 3)
    with pytest.raises(TypeError, match="does not fit"):
        again.tag.test_value = np.zeros(3, dtype="float32")


def test_get_test_values():
    a, b = T.dscalar("a"), T.dscalar("b")
    a.tag.test_value = 1.0
    assert get_test_values(a) == []  # flag off
    with config.change_flags(compute_test_value="ignore"):
        assert get_test_values(a, b) == []
        b.tag.test_value = 2.0
        assert [float(v) for v in get_test_values(a, b, 3)] == [1.0, 2.0, 3.0]


def test_compute_test_value_opt_governs_rewrites():
    with config.change_flags(compute_test_value="raise"):
        x, W = _model()
        cost = -T.log(T.nnet.softmax(T.dot(x, W))).mean() + (W ** 2).sum()
        grad = T.grad(cost, W)
    # off (the default) while compiling: rewrites build nodes freely
    with config.change_flags(compute_test_value="raise"):
        f = symgraph.function([x], cost, updates=[(W, W - 0.1 * grad)])
    # raise while compiling: the nodes rewrites build are evaluated too, and
    # any input they lack is computed from its own node
    x2, W2 = _model()
    with config.change_flags(compute_test_value="raise", compute_test_value_opt="raise",
                             on_opt_error="raise"):
        cost2 = -T.log(T.nnet.softmax(T.dot(x2, W2))).mean() + (W2 ** 2).sum()
        g = symgraph.function([x2], cost2, updates=[(W2, W2 - 0.1 * T.grad(cost2, W2))])
    value = x.tag.test_value
    np.testing.assert_allclose(f(value), g(value))


def test_test_values_through_scan():
    with config.change_flags(compute_test_value="raise"):
        seq = T.dvector("seq")
        seq.tag.test_value = np.arange(6.0)
        init = T.dvector("init")
        init.tag.test_value = np.array([1.0, 2.0])
        out, _ = symgraph.scan(lambda a, b, h2, h1: a + b + h2 + h1,
                               sequences=dict(input=seq, taps=[-1, 1]),
                               outputs_info=dict(initial=init, taps=[-2, -1]))
    f = symgraph.function([seq, init], out)
    np.testing.assert_allclose(out.tag.test_value, f(np.arange(6.0), np.array([1.0, 2.0])))


def test_print_test_value():
    x = T.dvector("x")
    x.tag.test_value = np.array([1.5, 2.5])
    assert repr(x) == "x"
    with config.change_flags(print_test_value=True):
        assert repr(x) == "x\narray([1.5, 2.5])"
        assert repr(T.dvector("no_value")) == "no_value"


# -- NumPy's error state -------------------------------------------------------------

def test_numpy_seterr_flags_around_calls():
    x = T.dvector("x")
    f = symgraph.function([x], T.log(x) / x, mode=PY_NOOPT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(f(np.array([-1.0]))[0])  # default: NaN propagates quietly
    with config.change_flags(**{"numpy.seterr_all": "raise"}):
        with pytest.raises(FloatingPointError, match="invalid"):
            f(np.array([-1.0]))
    with config.change_flags(**{"numpy.seterr_divide": "raise"}):
        assert np.isnan(f(np.array([-1.0]))[0])  # invalid is not divide
        with pytest.raises(FloatingPointError, match="divide"):
            f(np.array([0.0]))
    with config.change_flags(**{"numpy.seterr_all": "raise", "numpy.seterr_invalid": "ignore"}):
        assert np.isnan(f(np.array([-1.0]))[0])


def test_numpy_state_restored_after_call():
    before = np.geterr()
    x = T.dvector("x")
    f = symgraph.function([x], x * 2, mode=PY)
    with config.change_flags(**{"numpy.seterr_all": "raise"}):
        f(np.ones(2))
    assert np.geterr() == before


# -- NanGuardMode, profiling, DebugMode -----------------------------------------------

def test_nanguardmode_flags_are_defaults_of_nanguardmode():
    with config.change_flags(**{"NanGuardMode.nan_is_error": False,
                                "NanGuardMode.big_is_error": False}):
        mode = NanGuardMode()
        assert config.nan_guard.nan_is_error is False
    assert mode.nan_is_error is False and mode.big_is_error is False
    assert mode.inf_is_error is True
    x = T.dvector("x")
    f = symgraph.function([x], T.log(x), mode=mode)
    assert np.isnan(f(np.array([-1.0]))[0])  # NaN allowed by the flag
    with pytest.raises(Exception, match="(?i)inf"):
        f(np.array([0.0]))


def _profiled(linker):
    x = T.dvector("x")
    return symgraph.function([x], [T.exp(x).sum(), T.log(x) * 2, T.sqrt(x) + 1],
                             profile=True, mode=Mode(linker=linker))


@pytest.mark.parametrize("linker", ["py", "c|py"])
def test_profiling_tables_and_first_call(linker):
    with config.change_flags(**{"profiling.n_apply": 1, "profiling.n_ops": 1,
                                "profiling.ignore_first_call": True}):
        f = _profiled(linker)
        f(np.ones(4))
        assert f.profile.calls == 0 and sum(f.profile.node_time.values()) == 0
        f(np.ones(4))
        assert f.profile.calls == 1
        text = f.profile.summary(file="str")
    assert "more nodes (profiling.n_apply)" in text and "more ops (profiling.n_ops)" in text
    node_rows = text.split("time per node")[1].splitlines()[1:]
    assert len([r for r in node_rows if "%" in r]) == 1
    assert "calls: 1," in text
    f2 = _profiled(linker)
    f2(np.ones(4))
    assert f2.profile.calls == 1  # the flag is off: the first call counts


def test_profiling_destination_and_debugprint(tmp_path):
    path = tmp_path / "profile.txt"
    with config.change_flags(**{"profiling.destination": str(path),
                                "profiling.debugprint": True}):
        f = _profiled("py")
        f(np.ones(2))
        f.profile.summary()
    text = path.read_text()
    assert "Function profile" in text and "optimized graph:" in text and "[id A]" in text


def test_flags_without_effect_warn_or_raise():
    with pytest.warns(UserWarning, match="profiles no memory|not memory"):
        with config.change_flags(profile_memory=True):
            pass
    with pytest.warns(UserWarning, match="SciPy"):
        with config.change_flags(**{"blas.ldflags": "-lopenblas"}):
            pass
    with pytest.warns(UserWarning, match="allocate their own outputs"):
        with config.change_flags(**{"DebugMode.check_preallocated_output": "c_contiguous"}):
            pass
    with pytest.raises(ConfigError, match="amdlibm"):
        config.lib.amdlibm = True
    with pytest.raises(ConfigError, match="gcc.cxxflags=-O0"):
        config.cmodule.remove_gxx_opt = True
    assert config.lib.amdlibm is False and config.cmodule.remove_gxx_opt is False


# -- dtypes: cast_policy, int_division ----------------------------------------------

def test_cast_policy_custom_only():
    assert config.cast_policy == "custom"
    with pytest.raises(ConfigError, match="NumPy 1's value-based casting"):
        config.cast_policy = "numpy+floatX"
    # Theano's custom policy: a Python number takes the tensor's dtype when it fits
    assert (T.fvector() * 0.5).dtype == "float32"
    assert (T.bvector() + 1).dtype == "int8"
    assert (T.ivector() * 1.5).dtype == "float64"


@pytest.mark.parametrize("value", ["int", "raise", "floatX"])
def test_int_division_under_python3(value):
    # Theano 1.0 under Python 3: '/' is true division whatever the flag says
    with config.change_flags(int_division=value):
        a, b = T.iscalar("a"), T.iscalar("b")
        f = symgraph.function([a, b], [a / b, a // b], mode=PY)
    quotient, floor = f(7, 2)
    assert float(quotient) == 3.5 and int(floor) == 3
    assert (a / b).dtype == "float64" and (a // b).dtype == "int32"


# -- graph checks ---------------------------------------------------------------------

class _BadShape(Op):
    """Identity whose infer_shape is broken, as a user op's may be."""

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0].copy()

    def infer_shape(self, fgraph, node, shapes):
        raise ValueError("broken infer_shape")


def test_on_shape_error():
    x = T.dvector("x")
    y = _BadShape()(x)
    with config.change_flags(on_opt_error="raise"):
        with pytest.raises(Exception, match="broken infer_shape"):
            symgraph.function([x], y.shape[0] * 2)
    with config.change_flags(on_shape_error="warn"):
        with pytest.warns(UserWarning, match="on_shape_error=warn"):
            f = symgraph.function([x], y.shape[0] * 2)
    assert int(f(np.ones(3))) == 6


def test_check_stack_trace():
    from symgraph.compile.stack_check import StackTraceError, check_stack_traces, user_traces
    from symgraph.graph.fg import FunctionGraph
    from symgraph.graph.trace import SourceLine

    x = T.dmatrix("x")
    W = symgraph.shared(np.ones((2, 2)))
    cost = -T.log(T.nnet.softmax(T.dot(x, W))).mean() + (W ** 2).sum() / 1 - 0
    with config.change_flags(check_stack_trace="raise"):
        # every rewrite of a real program keeps the user's lines
        symgraph.function([x], cost, updates=[(W, W - T.grad(cost, W))])
    fgraph = FunctionGraph([x], [T.exp(x) * 3])
    before = user_traces(fgraph)
    node = fgraph.outputs[0].owner
    node.tag.trace = SourceLine("symgraph/opt/some_rewrite.py", 1, "rewrite", "")
    assert check_stack_traces(fgraph, before) == []  # off by default
    with config.change_flags(check_stack_trace="raise"):
        with pytest.raises(StackTraceError, match="1 node\\(s\\) .* lost the user's source"):
            check_stack_traces(fgraph, before)
    with config.change_flags(check_stack_trace="warn"):
        with pytest.warns(UserWarning, match="lost the user's source line"):
            assert check_stack_traces(fgraph, before) == [node]


def test_optimizer_requiring_flag():
    tags = ("canonicalize",)
    with config.change_flags(optimizer_requiring="canonicalize"):
        from_flag = Mode().excluding_tags()
    assert set(from_flag) == set(Mode().requiring(*tags).excluding_tags())
    assert set(from_flag) - set(Mode().excluding_tags())  # some rewrites are left out
    x = T.dvector("x")
    with config.change_flags(optimizer_requiring="canonicalize"):
        f = symgraph.function([x], T.exp(x) * 2 + 0)
    np.testing.assert_allclose(f(np.zeros(2)), [2.0, 2.0])
    with config.change_flags(optimizer_requiring="no_such_tag"):
        with pytest.raises(Exception, match="no_such_tag"):
            symgraph.function([x], x * 2)


# -- the compile cache's folder --------------------------------------------------------

def test_base_compiledir_and_format(tmp_path):
    from symgraph.configdefaults_theano import effective_compiledir

    cfg = Config(environ={}, rc_paths=[])
    assert effective_compiledir(cfg) == cfg.compiledir
    cfg.base_compiledir = str(tmp_path)
    cfg.compiledir_format = "cd_%(python_version)s_%(short_platform)s"
    folder = effective_compiledir(cfg)
    assert os.path.dirname(folder) == str(tmp_path)
    assert os.path.basename(folder).startswith("cd_3.")
    cfg.compiledir = str(tmp_path / "explicit")  # compiledir, once set, wins
    assert effective_compiledir(cfg) == str(tmp_path / "explicit")
    with pytest.raises(ConfigError, match="not a template"):
        cfg.compiledir_format = "cd_%(no_such_key)s"
    with pytest.raises(ConfigError, match="relative folder"):
        cfg.compiledir_format = "/abs"


def test_base_compiledir_names_the_cache_folder(tmp_path):
    import subprocess
    import sys

    environ = {k: v for k, v in os.environ.items() if k not in ("SYMGRAPH_FLAGS", "SYMGRAPHRC")}
    environ["SYMGRAPH_FLAGS"] = f"base_compiledir={tmp_path},compiledir_format=c_%(processor)s"
    environ["SYMGRAPHRC"] = str(tmp_path / "none.rc")
    code = ("from symgraph.backends.native.cache import get_cache; print(get_cache().root)")
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    root = done.stdout.strip()
    assert os.path.dirname(root) == str(tmp_path) and os.path.basename(root).startswith("c_")


def test_theano_bug_warning_flags_are_accepted_and_silent():
    names = ["argmax_pushdown_bug", "gpusum_01_011_0111_bug", "sum_sum_bug",
             "sum_div_dimshuffle_bug", "subtensor_merge_bug", "gpu_set_subtensor1",
             "vm_gc_bug", "signal_conv2d_interface", "reduce_join", "inc_set_subtensor1",
             "round", "inc_subtensor1_opt", "identify_1pexp_bug"]
    cfg = Config(environ={"SYMGRAPH_FLAGS": ",".join(f"warn.{n}=True" for n in names)},
                 rc_paths=[])
    assert all(getattr(cfg.warn, n) is True for n in names)
    # Theano's defaults under warn.ignore_bug_before=0.9: only bugs fixed later warn.
    cfg = Config(environ={}, rc_paths=[])
    assert cfg.warn.inc_subtensor1_opt is True and cfg.warn.subtensor_merge_bug is False
    assert cfg.warn.ignore_bug_before == "0.9"
    cfg = Config(environ={"SYMGRAPH_FLAGS": "warn.ignore_bug_before=1.0.5"}, rc_paths=[])
    assert cfg.warn.ignore_bug_before == "1.0.5"
    with pytest.raises(Exception, match="warn.round"):
        Config(environ={"SYMGRAPH_FLAGS": "warn.round=maybe"}, rc_paths=[])
    # The tutorials' line: no warning, and the x[a:b:-1][c] results of the bug are right.
    x = T.dvector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with config.change_flags(**{"warn.subtensor_merge_bug": True}):
            f = symgraph.function([x], x[5:1:-1][1:3])
    np.testing.assert_array_equal(f(np.arange(8.0)), np.arange(8.0)[5:1:-1][1:3])


def test_accepted_flags_leave_results_unchanged():
    x = T.dvector("x")
    expected = symgraph.function([x], T.exp(x).sum(), mode=PY)(np.arange(3.0))
    with config.change_flags(allow_gc=False, cycle_detection="fast",
                             **{"warn.ignore_bug_before": "all",
                                "traceback.compile_limit": 3, "scan.allow_gc": True,
                                "experimental.local_alloc_elemwise_assert": False}):
        got = symgraph.function([x], T.exp(x).sum(), mode=PY)(np.arange(3.0))
    assert got == expected


# -- symgraph.scalar -------------------------------------------------------------------

def test_scalar_types_are_zero_d_tensor_types():
    assert S.float64 == T.dscalar and T.dscalar == S.float64
    assert hash(S.float64) == hash(T.dscalar) and S.int32 != T.iscalar.clone(dtype="int64")
    assert isinstance(S.float32, S.ScalarType) and S.Scalar is S.ScalarType
    assert S.get_scalar_type("int16") is S.int16 and S.int16.dtype == "int16"
    assert str(S.float32) == "Scalar(float32)"
    assert S.float64 in S.float_types and S.bool in S.discrete_types
    assert S.complex64 in S.continuous_types and len(S.all_types) == 14
    x = S.float64("x")
    assert x.type is S.float64 and x.type == T.dscalar and x.ndim == 0


def test_scalar_graphs_compile_and_mix_with_tensors():
    x, y = S.float64("x"), S.float64("y")
    z = S.add(x, y, x) * 2 + S.exp(y)  # add takes any number of inputs
    f = symgraph.function([x, y], z)
    assert float(f(1.0, 0.0)) == 5.0
    v = T.dvector("v")
    g = symgraph.function([v, x], v * x + S.sqr(x))
    np.testing.assert_allclose(g(np.ones(2), 3.0), [12.0, 12.0])
    assert str(T.elemwise.Elemwise(S.mul)) == "Elemwise{mul}"
    assert S.cast(x, "float32").dtype == "float32" and S.cast(x, S.int32).dtype == "int32"


def test_scalar_upcast_keeps_floatx():
    assert S.upcast("int32", "float32") == "float64"
    assert S.upcast("int8", "int16") == "int16"
    with config.change_flags(floatX="float32"):
        assert S.upcast("int32", "float32") == "float32"
        assert S.upcast("float32", "int64") == "float32"
        assert S.upcast("float64", "int8") == "float64"  # asked for explicitly
        assert S.upcast("int32", "int64") == "int64"


def test_as_scalar_and_constant():
    c = S.constant(1.5)
    assert c.type == S.float64 and float(c.data) == 1.5 and c.ndim == 0
    assert S.constant(np.float32(2)).dtype == "float32"
    assert S.as_scalar(3).dtype == "int64"
    x = T.dscalar("x")
    assert S.as_scalar(x) is x and S.as_scalar(x.owner or x) is x
    assert S.as_scalar((x * 2).owner).owner.op == (x * 2).owner.op
    with pytest.raises(TypeError, match="1 dimensions"):
        S.as_scalar(T.dvector())
    with pytest.raises(TypeError, match="takes a scalar"):
        S.constant([1.0, 2.0])
