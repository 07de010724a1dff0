"""The rewrites abstract -> concrete convolution (``opt/conv_concrete.py``), the flags
that choose algorithm and precision, and the tuning cache of ``time_*``.

The flag tests only optimize graphs (no compile); the values of every
algorithm are checked kernel by kernel in ``tests/native/test_conv_c.py``.
Two functions are compiled here: a DebugMode check of the three concrete ops
with the default flags, and a ``time_once`` function in a compiledir of its
own, which two further processes load from the compile cache to show that the
tuning cache spares them the timing (and that a corrupt tuning file is
ignored and rewritten).
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.cpu.conv import tuning as conv_tuning
from symgraph.config import ConfigError
from symgraph.graph.fg import FunctionGraph
from symgraph.ops import conv_reference as ref
from symgraph.ops.conv import AbstractConv, AbstractConvGradInputs, AbstractConvGradWeights
from symgraph.ops.conv_algorithms import ALGOS, DnnConv, DnnConvGradI, DnnConvGradW
from symgraph.opt.pipeline import optimize
from symgraph.tensor.nnet.abstract_conv import conv2d, conv3d

ROOT = Path(__file__).resolve().parents[2]
CONCRETE = (DnnConv, DnnConvGradI, DnnConvGradW)
ABSTRACT = (AbstractConv, AbstractConvGradInputs, AbstractConvGradWeights)


def _graph(dtype="float32", **conv_args):
    """(inputs, [conv, d conv / d x, d conv / d w]) of a 2D convolution."""
    x = T.tensor(dtype, shape=(None,) * 4, name="x")
    w = T.tensor(dtype, shape=(None,) * 4, name="w")
    y = conv2d(x, w, **conv_args)
    gx, gw = symgraph.grad(y.sum(), [x, w])
    return [x, w], [y, gx, gw]


def _optimized(outputs, inputs, flags=None, optimizer="fast_run", excluding=()):
    with symgraph.config.change_flags(flags or {}):
        fgraph = FunctionGraph(inputs, outputs)
        optimize(fgraph, optimizer=optimizer, excluding=excluding)
    return fgraph


def _ops(fgraph, kinds):
    return [node.op for node in fgraph.toposort() if isinstance(node.op, kinds)]


def _one(fgraph, cls):
    (op,) = _ops(fgraph, (cls,))
    return op


# -- flags -> ops ---------------------------------------------------------------------------

@pytest.mark.parametrize("algo", ALGOS["fwd"])
def test_algo_fwd_flag(algo):
    inputs, outputs = _graph()
    fgraph = _optimized(outputs[:1], inputs, {"dnn.conv.algo_fwd": algo})
    assert str(_one(fgraph, DnnConv)) == f"DnnConv{{algo='{algo}', precision='float32'}}"
    assert not _ops(fgraph, ABSTRACT)


@pytest.mark.parametrize("algo", ALGOS["bwd_data"])
def test_algo_bwd_data_flag(algo):
    inputs, outputs = _graph()
    fgraph = _optimized(outputs, inputs, {"dnn.conv.algo_bwd_data": algo,
                                          "dnn.conv.algo_bwd_filter": "none"})
    assert str(_one(fgraph, DnnConvGradI)) == \
        f"DnnConvGradI{{algo='{algo}', precision='float32'}}"
    assert _one(fgraph, DnnConvGradW).algo == "none"


@pytest.mark.parametrize("algo", ALGOS["bwd_filter"])
def test_algo_bwd_filter_flag(algo):
    inputs, outputs = _graph()
    fgraph = _optimized(outputs, inputs, {"dnn.conv.algo_bwd_filter": algo})
    assert str(_one(fgraph, DnnConvGradW)) == \
        f"DnnConvGradW{{algo='{algo}', precision='float32'}}"


def test_algo_bwd_sets_both():
    inputs, outputs = _graph()
    fgraph = _optimized(outputs, inputs, {"dnn.conv.algo_bwd": "deterministic"})
    assert _one(fgraph, DnnConvGradI).algo == "deterministic"
    assert _one(fgraph, DnnConvGradW).algo == "deterministic"


@pytest.mark.parametrize("flag,dtype,expected", [
    ("as_input_f32", "float16", "float32"), ("as_input_f32", "float32", "float32"),
    ("as_input_f32", "float64", "float64"), ("as_input", "float16", "float16"),
    ("as_input", "float64", "float64"), ("float16", "float32", "float16"),
    ("float32", "float64", "float32"), ("float64", "float32", "float64"),
    ("float64", "float16", "float64"),
])
def test_precision_flag(flag, dtype, expected):
    """The precision is the flag resolved for the data's dtype, in every direction."""
    inputs, outputs = _graph(dtype)
    fgraph = _optimized(outputs, inputs, {"dnn.conv.precision": flag})
    ops = _ops(fgraph, CONCRETE)
    assert len(ops) == 3 and all(op.precision == expected for op in ops)
    assert all(f"precision='{expected}'" in str(op) for op in ops)


@pytest.mark.parametrize("flag", ["dnn.conv.algo_fwd", "dnn.conv.algo_bwd_data",
                                  "dnn.conv.algo_bwd_filter", "dnn.conv.algo_bwd",
                                  "dnn.conv.precision"])
def test_bad_flag_value_lists_the_good_ones(flag):
    with pytest.raises(ConfigError, match=r"allowed: .*(none|float32)"):
        with symgraph.config.change_flags({flag: "winograd_x"}):
            pass


def test_fast_compile_and_excluding():
    """FAST_COMPILE makes convolutions concrete too; excluding conv_dnn keeps them abstract."""
    inputs, outputs = _graph()
    assert len(_ops(_optimized(outputs, inputs, optimizer="fast_compile"), CONCRETE)) == 3
    fgraph = _optimized(outputs, inputs, excluding=["conv_dnn"])
    assert not _ops(fgraph, CONCRETE) and len(_ops(fgraph, ABSTRACT)) == 3


def test_parameters_carried_over():
    x, w = T.tensor5("x"), T.tensor5("w")
    y = conv3d(x, w, border_mode=(1, 0, 2), subsample=(1, 2, 1), filter_dilation=(2, 1, 1),
               filter_flip=False, num_groups=2)
    op = _one(_optimized([y], [x, w]), DnnConv)
    assert (op.convdim, op.border_mode, op.subsample, op.filter_dilation, op.filter_flip,
            op.num_groups) == (3, (1, 0, 2), (1, 2, 1), (2, 1, 1), False, 2)
    assert op.abstract() == y.owner.op


# -- static fallback ------------------------------------------------------------------------

@pytest.mark.parametrize("conv_args,reason", [
    (dict(subsample=(2, 2)), "subsample (2, 2)"),
    (dict(filter_dilation=(1, 2)), "filter_dilation (1, 2)"),
    (dict(filter_shape=(4, 3, 5, 5)), "filters of spatial shape (5, 5)"),
])
def test_winograd_static_fallback(conv_args, reason):
    """What the graph shows Winograd cannot do becomes GEMM ('large') at
    rewrite time; the print says what was asked and why."""
    inputs, outputs = _graph(**conv_args)
    fgraph = _optimized(outputs[:1], inputs, {"dnn.conv.algo_fwd": "winograd"})
    op = _one(fgraph, DnnConv)
    assert str(op) == "DnnConv{algo='large', precision='float32', requested='winograd'}"
    text = symgraph.printing.debugprint(fgraph, file="str")
    assert "fallback from 'winograd'" in text and reason in text


def test_winograd_kept_when_it_may_apply():
    inputs, outputs = _graph(filter_shape=(4, 3, 3, 3))
    fgraph = _optimized(outputs[:1], inputs, {"dnn.conv.algo_fwd": "winograd"})
    assert str(_one(fgraph, DnnConv)) == "DnnConv{algo='winograd', precision='float32'}"


# -- compiled -------------------------------------------------------------------------------

def _values(rng, dtype="float32"):
    x = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    w = rng.standard_normal((4, 3, 3, 2)).astype(dtype)
    return x, w


def _reference(x, w, pads=(0, 0)):
    y = ref.conv_forward(x, w, pads, (1, 1), (1, 1))
    gx = ref.conv_backward_data(np.ones_like(y), w, x.shape[2:], pads, (1, 1), (1, 1))
    gw = ref.conv_backward_filter(x, np.ones_like(y), w.shape[2:], pads, (1, 1), (1, 1))
    return y, gx, gw


def test_debugmode_default_flags(rng):
    """The three concrete ops, C against Python (DebugMode), against the reference."""
    inputs, outputs = _graph()
    f = symgraph.function(inputs, outputs, mode="DebugMode")
    assert len(_ops(f.maker.fgraph, CONCRETE)) == 3
    x, w = _values(rng)
    for got, want in zip(f(x, w), _reference(x, w)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import symgraph
    from symgraph.backends.cpu.conv import tuning as conv_tuning
    from tests.opt.test_conv_concrete import _graph, _values
    conv_tuning.MIN_CPU_SHARE = 0  # a loaded machine must not keep the files out
    inputs, outputs = _graph()
    f = symgraph.function(inputs, outputs)
    f(*_values(np.random.default_rng(0)))
    print(json.dumps({"timings": conv_tuning.timings_run(),
                      "sources": sorted(c.source for by_shape in conv_tuning.choices().values()
                                        for c in by_shape.values())}))
""")


def _child(compiledir):
    """Run _CHILD in a new process with time_once flags; its JSON report."""
    env = dict(os.environ, SYMGRAPH_FLAGS=f"compiledir={compiledir},dnn.conv.algo_fwd=time_once,"
                                          f"dnn.conv.algo_bwd=time_once,compile_no_compile=True")
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_time_once_and_the_tuning_cache(tmp_path, rng, monkeypatch):
    """time_once times each kernel once per process; a second process finds the
    tuning cache warm and times nothing; a corrupt tuning file is ignored,
    the timing is done again and the file rewritten.  (Disturbed timings are
    let in: on a loaded machine they would stay out of the cache, see
    tests/native/test_conv_library.py.)"""
    monkeypatch.setattr(conv_tuning, "MIN_CPU_SHARE", 0)
    flags = {"compiledir": str(tmp_path), "dnn.conv.algo_fwd": "time_once",
             "dnn.conv.algo_bwd": "time_once"}
    conv_tuning.reset()
    try:
        with symgraph.config.change_flags(flags):
            inputs, outputs = _graph()
            f = symgraph.function(inputs, outputs, profile=True)
            x, w = _values(rng)
            for got, want in zip(f(x, w), _reference(x, w)):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            f(x, w)
            f(x[:1, :, :5], w)  # another shape: time_once keeps its choice
            assert conv_tuning.timings_run() == 3
            text = symgraph.printing.debugprint(f, file="str")
            # the profile names the algorithm that ran
            summary = f.profile.summary(file="str")
            assert re.search(r"DnnConv\{algo='time_once', precision='float32'\} \[(" +
                             "|".join(conv_tuning.IMPLS) + r")\]", summary), summary
        for line in text.splitlines():
            if line.startswith(("DnnConv", " |DnnConv")):
                assert "(timing: " in line, text
    finally:
        conv_tuning.reset()
    files = sorted((tmp_path / "tuning").glob("*.json"))
    assert len(files) == 3
    assert all(json.loads(p.read_text())["impl"] in conv_tuning.IMPLS for p in files)

    warm = _child(tmp_path)
    assert warm == {"timings": 0, "sources": ["tuning cache"] * 3}

    for path in files:
        path.write_text('{"key": {"truncated')
    again = _child(tmp_path)
    assert again == {"timings": 3, "sources": ["timing"] * 3}
    assert all(json.loads(p.read_text())["impl"] in conv_tuning.IMPLS for p in files)
