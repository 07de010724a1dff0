"""Warm start (compile/warm_start.py): a function compiled before is restored
in a new process without rewriting or generating code, and behaves exactly
like a freshly compiled one."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.compile import warm_start
from symgraph.config import config
from symgraph.printing import debugprint

# A training step: shared parameters, updates, givens, a fused element-wise
# chain, a reduction, a dot; and a call that fails inside a node.  With
# SG_TRIPWIRES set, rewriting, lowering a node to C and compiling are errors.
CHILD = textwrap.dedent('''
    import io, json, os, sys
    import numpy as np
    import symgraph
    import symgraph.tensor as T
    from symgraph.compile import warm_start
    from symgraph.compile.warm_key import code_stamp
    from symgraph.printing import debugprint

    if os.environ.get("SG_TRIPWIRES"):
        if code_stamp() != os.environ["SG_TRIPWIRES"]:
            # symgraph's files changed since the cold run (so the key): run again
            print(json.dumps({"stamp": code_stamp()}))
            sys.exit(0)
        import symgraph.opt
        import symgraph.backends.native.linker as linker

        def tripwire(*args, **kwargs):
            raise AssertionError("a warm start rewrote or generated code")

        symgraph.opt.optimize = tripwire
        linker.build_program = tripwire
        linker.node_kernel = tripwire
        symgraph.config.compile_no_compile = True

    rng = np.random.default_rng(0)
    w = symgraph.shared(rng.standard_normal((4, 3)).astype("float32"), name="w")
    b = symgraph.shared(np.zeros(3, dtype="float32"), name="b")
    x, y = T.matrix("x", dtype="float32"), T.lvector("y")
    scale = T.scalar("scale", dtype="float32")
    h = T.tanh(T.dot(x, w) + b) * scale
    logp = T.nnet.logsoftmax(h, axis=-1)
    cost = -T.mean(logp[T.arange(y.shape[0]), y])
    gw, gb = symgraph.grad(cost, [w, b])
    f = symgraph.function([x, y], [cost, h.sum(axis=0)],
                          updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)],
                          givens={scale: np.float32(0.5)}, profile=True)
    xv = rng.standard_normal((5, 4)).astype("float32")
    yv = np.array([0, 1, 2, 1, 0])
    out = [f(xv, yv) for _ in range(2)]
    try:
        f(np.ones((5, 7), dtype="float32"), yv)
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    text = io.StringIO()
    debugprint(f, file=text)
    print(json.dumps({
        "stamp": code_stamp(), "stats": warm_start.stats,
        "out": [[np.asarray(v).tolist() for v in o] for o in out],
        "w": w.get_value().tolist(), "b": b.get_value().tolist(),
        "error": error, "debugprint": text.getvalue(),
        "profiled_ops": sorted(f.profile.op_time()), "calls": f.profile.calls,
        "phases": sorted(f.maker.timings)}))
''')


def _run_child(script, compiledir, tripwires=None, flags=""):
    """The child's JSON line; ``tripwires``: the code stamp of the cold run."""
    env = dict(os.environ)
    env["SYMGRAPH_FLAGS"] = ",".join(f for f in (f"compiledir={compiledir}", flags) if f)
    env.pop("SG_TRIPWIRES", None)
    if tripwires:
        env["SG_TRIPWIRES"] = tripwires
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cold_then_warm(tmp_path, tries=3):
    """(cold, warm) results of two fresh processes over one compile cache.  A
    checkout edited between the two runs changes symgraph's code stamp (so the
    key): the pair is run again then."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for attempt in range(tries):
        compiledir = tmp_path / f"cache{attempt}"
        cold = _run_child(script, compiledir)
        warm = _run_child(script, compiledir, tripwires=cold["stamp"])
        if cold["stamp"] == warm["stamp"]:
            return cold, warm, script, compiledir
    pytest.fail("symgraph's files changed during every attempt")


def test_new_process_restores_without_rewriting_or_compiling(tmp_path):
    cold, warm, script, compiledir = _cold_then_warm(tmp_path)
    assert cold["stats"]["stored"] == 1 and cold["stats"]["restored"] == 0
    assert "rewriting" in cold["phases"]
    # the tripwires make any rewrite, lowering or compile an error
    assert warm["stats"]["restored"] == 1 and warm["stats"]["stored"] == 0
    assert "rewriting" not in warm["phases"] and "codegen" not in warm["phases"]
    # the same results, updates of the shared variables, graph and error
    assert warm["out"] == cold["out"]
    assert warm["w"] == cold["w"] and warm["b"] == cold["b"]
    assert warm["debugprint"] == cold["debugprint"]
    assert warm["error"] == cold["error"]
    assert warm["error"] is not None and str(script) in warm["error"]
    assert warm["profiled_ops"] == cold["profiled_ops"] and len(warm["profiled_ops"]) > 3
    assert warm["calls"] == cold["calls"] == 2


def test_new_process_with_another_flag_misses(tmp_path):
    cold, _, script, compiledir = _cold_then_warm(tmp_path)
    other = _run_child(script, compiledir, flags="optimizer_excluding=fusion")
    assert other["stats"]["restored"] == 0 and other["stats"]["missed"] == 1
    assert other["stats"]["stored"] == 1
    assert np.allclose(other["out"][0][0], cold["out"][0][0], rtol=1e-5)


def test_processes_compiling_at_once_share_one_valid_entry(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for attempt in range(3):
        compiledir = tmp_path / f"cache{attempt}"
        env = dict(os.environ, SYMGRAPH_FLAGS=f"compiledir={compiledir}")
        env.pop("SG_TRIPWIRES", None)
        procs = [subprocess.Popen([sys.executable, str(script)], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        assert all(r["out"] == results[0]["out"] for r in results)
        warm = _run_child(script, compiledir, tripwires=results[0]["stamp"])
        if all(r["stamp"] == warm["stamp"] for r in results):
            assert warm["stats"]["restored"] == 1 and warm["out"] == results[0]["out"]
            return
    pytest.fail("symgraph's files changed during every attempt")


# -- in one process (the same entries; cheaper than new processes)

def _step(offset=1.0):
    w = symgraph.shared(np.arange(6, dtype="float64").reshape(2, 3), name="w")
    x = T.matrix("x")
    out = T.exp(T.dot(x, w) * 0.5) + offset
    return w, x, out


def _compile(x, out, w):
    return symgraph.function([x], out.sum(axis=1), updates=[(w, w * 0.9)])


def _same_results(f, g, w):
    """``f`` and ``g`` give the same results from the same value of ``w``
    (each call updates it)."""
    xv, w0 = np.ones((2, 2)), w.get_value()
    first = f(xv)
    w.set_value(w0)
    np.testing.assert_array_equal(first, g(xv))


def _delta(before):
    return {k: warm_start.stats[k] - before[k] for k in before}


def test_same_graph_restored_and_equivalent():
    xv = np.arange(8, dtype="float64").reshape(4, 2) / 10
    w, x, out = _step()
    fresh = _compile(x, out, w)
    expected = [fresh(xv) for _ in range(2)]
    w_after = w.get_value()
    w.set_value(np.arange(6, dtype="float64").reshape(2, 3))
    before = dict(warm_start.stats)
    again = _compile(x, out, w)
    assert _delta(before)["restored"] == 1
    got = [again(xv) for _ in range(2)]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(w.get_value(), w_after)   # this process's w
    assert debugprint(again, file="str") == debugprint(fresh, file="str")


def test_changed_graph_misses():
    w, x, out = _step(offset=1.0)
    first = _compile(x, out, w)
    w2, x2, out2 = _step(offset=2.0)      # another constant: another key
    f = _compile(x2, out2, w2)
    assert f.maker.warm.key != first.maker.warm.key
    xv = np.ones((1, 2))
    np.testing.assert_allclose(f(xv), (np.exp(xv @ np.arange(6.).reshape(2, 3) * .5) + 2)
                               .sum(axis=1))


def test_changed_flag_misses():
    w, x, out = _step()
    first = _compile(x, out, w)
    with config.change_flags(optimizer_excluding="fusion"):
        other = _compile(x, out, w)
    assert other.maker.warm.key != first.maker.warm.key
    assert debugprint(other, file="str") != debugprint(first, file="str")


def _entry_of(f):
    from symgraph.backends.native.cache import get_cache

    return os.path.join(get_cache().root, "functions", f"{f.maker.warm.key}.pkl")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_damaged_entry_is_rebuilt(damage):
    w, x, out = _step(offset=3.0)
    f = _compile(x, out, w)
    path = _entry_of(f)
    data = open(path, "rb").read()
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "garbage":
        data = b"not an entry"
    else:
        data = data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    with open(path, "wb") as handle:
        handle.write(data)
    before = dict(warm_start.stats)
    again = _compile(x, out, w)      # compiled as usual, the entry stored anew
    assert _delta(before)["damaged"] == 1 and _delta(before)["stored"] == 1
    _same_results(again, f, w)
    before = dict(warm_start.stats)
    _compile(x, out, w)
    assert _delta(before)["restored"] == 1


def test_missing_library_relinks(tmp_path):
    w, x, out = _step(offset=4.0)
    f = _compile(x, out, w)
    source = _entry_of(f)
    before = dict(warm_start.stats)
    with config.change_flags(compiledir=str(tmp_path / "cache")):
        # another compile cache holds the entry but none of the libraries it names
        target = _entry_of(f)
        os.makedirs(os.path.dirname(target), mode=0o700)
        with open(source, "rb") as src, open(target, "wb") as dst:
            dst.write(src.read())
        again = _compile(x, out, w)
    delta = _delta(before)
    assert delta["damaged"] == 1 and delta["restored"] == 0 and delta["stored"] == 1
    _same_results(again, f, w)


def test_op_without_value_form_is_not_stored():
    from symgraph.ops.from_graph import as_op

    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def double(v):
        return v * 2

    x = T.dvector("x")
    before = dict(warm_start.stats)
    f = symgraph.function([x], double(x) + 1)
    g = symgraph.function([x], double(x) + 1)
    assert _delta(before)["uncacheable"] == 2 and _delta(before)["restored"] == 0
    np.testing.assert_array_equal(g(np.ones(2)), f(np.ones(2)))


def test_flag_off_neither_stores_nor_restores():
    w, x, out = _step(offset=5.0)
    before = dict(warm_start.stats)
    with config.change_flags(compile_warm_start=False):
        _compile(x, out, w)
        _compile(x, out, w)
    assert _delta(before) == {k: 0 for k in before}


def test_cache_command_counts_prunes_and_clears_warm_entries(tmp_path):
    from symgraph.backends.native.cache import ModuleCache

    cache = ModuleCache(tmp_path / "cache")
    folder = cache.private_folder("functions")
    for k, age in enumerate((300, 200, 100)):       # seconds since the last use
        path = folder / f"{k:064x}.pkl"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (path.stat().st_mtime - age,) * 2)
    (folder / ".tmp-write-in-progress").write_bytes(b"x")
    info = cache.stats()
    assert info["functions"] == 3 and info["functions_bytes"] == 3000
    removed = cache.prune(max_bytes=1500)         # least recently used first
    assert sorted(e.key[-1] for e in removed) == ["0", "1"]
    assert cache.stats()["functions"] == 1
    cache.clear()
    assert cache.stats()["functions"] == 0


def test_python_linker_restored_and_copied():
    from symgraph.compile.mode import Mode

    def compile_py(x, out, w):      # one line builds the sum: one key
        return symgraph.function([x], out.sum(axis=1), updates=[(w, w * 0.9)],
                                 mode=Mode(linker="py"))

    w, x, out = _step(offset=6.0)
    fresh = compile_py(x, out, w)
    before = dict(warm_start.stats)
    again = compile_py(x, out, w)
    assert fresh.maker.warm.key == again.maker.warm.key
    assert _delta(before)["restored"] == 1
    assert again.native is None and again.vm is not None
    _same_results(again, fresh, w)
    twin = again.copy(delete_updates=True)
    w0 = w.get_value()
    np.testing.assert_array_equal(twin(np.ones((2, 2))), fresh(np.ones((2, 2))))
    w.set_value(w0)
    twin(np.ones((2, 2)))
    np.testing.assert_array_equal(w.get_value(), w0)     # the copy updates nothing
