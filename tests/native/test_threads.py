"""symgraph's thread policy (``backends/native/threads.py``, ``docs/threads.md``):
how many threads, the OpenMP runtime's environment, the BLAS pool, and
results that do not depend on the thread count.  Nothing here asserts a time.
"""

import ctypes
import ctypes.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native import threads
from symgraph.config import config

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(11)


# -- how many threads ---------------------------------------------------------------------

def _cgroup(tmp_path, version, quota, period=100000, nested="a/b"):
    """A fake cgroup tree and /proc/self/cgroup for ``cgroup_cpu_limit``."""
    root = tmp_path / "cg"
    if version == 2:
        folder = root / nested
        folder.mkdir(parents=True)
        (folder / "cpu.max").write_text(f"{quota} {period}\n")
        (root / "cgroup.controllers").write_text("cpu\n")
        line = f"0::/{nested}\n"
    else:
        folder = root / "cpu" / nested
        folder.mkdir(parents=True)
        (folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (folder / "cpu.cfs_period_us").write_text(f"{period}\n")
        line = f"4:cpu,cpuacct:/{nested}\n"
    proc = tmp_path / "cgroup"
    proc.write_text(line)
    return str(root), str(proc)


@pytest.mark.parametrize("version", [1, 2])
def test_cgroup_quota_in_cores(tmp_path, version):
    root, proc = _cgroup(tmp_path, version, 150000)
    assert threads.cgroup_cpu_limit(root, proc) == pytest.approx(1.5)
    unlimited = "max" if version == 2 else -1
    root, proc = _cgroup(tmp_path / "u", version, unlimited)
    assert threads.cgroup_cpu_limit(root, proc) is None


def test_the_smallest_quota_along_the_hierarchy_counts(tmp_path):
    root, proc = _cgroup(tmp_path, 2, 400000, nested="outer/inner")
    (Path(root) / "outer" / "cpu.max").write_text("100000 100000\n")
    assert threads.cgroup_cpu_limit(root, proc) == pytest.approx(1.0)


def test_no_cgroup_files_mean_no_limit(tmp_path):
    assert threads.cgroup_cpu_limit(str(tmp_path), str(tmp_path / "missing")) is None


def test_available_cores_is_the_affinity_cut_by_the_quota(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: None)
    assert threads.affinity_cores() == 4 and threads.available_cores() == 4
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 2.5)
    assert threads.available_cores() == 3          # rounded up
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 0.2)
    assert threads.available_cores() == 1
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 16.0)
    assert threads.available_cores() == 4


@pytest.mark.parametrize("text, count", [("3", 3), ("4,2", 4), (" 2 ", 2), ("0", None),
                                         ("-1", None), ("many", None), ("", None)])
def test_omp_num_threads_is_read_as_openmp_reads_it(text, count):
    assert threads.env_threads({"OMP_NUM_THREADS": text}) == count


def test_thread_count_follows_the_flag_then_the_environment_then_the_cores(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 6)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.thread_count(False) == 1
    assert threads.thread_count(True) == 6
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.thread_count(True) == 3
    assert threads.thread_count(False) == 1
    with config.change_flags(openmp=False):
        assert threads.thread_count() == 1


# -- the OpenMP runtime's environment -----------------------------------------------------------

def test_the_runtime_environment_leaves_what_the_user_set(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "affinity_cores", lambda: 2)
    env = {}
    threads.prepare_openmp_runtime(env)
    assert env == {"GOMP_SPINCOUNT": str(threads.SPIN_COUNT)}
    for mine in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "5"},
                 {"OMP_NUM_THREADS": "7"}):
        env = dict(mine)
        threads.prepare_openmp_runtime(env)
        for name, value in mine.items():
            assert env[name] == value
        assert ("GOMP_SPINCOUNT" in env) != ("OMP_WAIT_POLICY" in env)


def test_a_cgroup_quota_below_the_affinity_sets_omp_num_threads(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "affinity_cores", lambda: 8)
    env = {}
    threads.prepare_openmp_runtime(env)
    assert env["OMP_NUM_THREADS"] == "2"
    env = {"OMP_NUM_THREADS": "5"}
    threads.prepare_openmp_runtime(env)
    assert env["OMP_NUM_THREADS"] == "5"


def _run(script, **env):
    """Run ``script`` in a fresh interpreter with ``env`` added; its stdout lines."""
    full = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMP_SPINCOUNT",
                 "OMP_WAIT_POLICY", "SYMGRAPH_FLAGS"):
        full.pop(name, None)
    flags = os.environ.get("SYMGRAPH_FLAGS", "")
    full.update(env)
    if flags:
        full["SYMGRAPH_FLAGS"] = ",".join(f for f in (flags, env.get("SYMGRAPH_FLAGS")) if f)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=full,
                          capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split("\n")


_STEP = """
    import os, ctypes, numpy as np
    import scipy.linalg.cython_blas              # SciPy's OpenBLAS and its pool
    import symgraph, symgraph.tensor as T
    from symgraph.backends.native import threads
    if os.environ.get("SG_TEST_CORES"):          # a cgroup quota of that many cores
        threads.available_cores = lambda: int(os.environ["SG_TEST_CORES"])

    def tasks():
        return len(os.listdir("/proc/self/task"))

    rng = np.random.default_rng(0)
    x, w = T.fmatrix("x"), T.fmatrix("w")
    y = T.tanh(T.dot(x, w))
    f = symgraph.function([x, w], [T.sum(T.exp(y)), y * 2])
    a = rng.standard_normal((256, 512)).astype("float32")
    b = rng.standard_normal((512, 512)).astype("float32") * 0.05
    before = tasks()
    for _ in range(3):
        f(a, b)
    print(before, tasks(), threads.thread_count())
    ctl = threads.blas_thread_control()
    print(ctypes.CFUNCTYPE(ctypes.c_int)(ctl[0])() if ctl else "none")
"""


def test_the_flag_off_starts_no_thread():
    before, after, count = map(int, _run(_STEP, SYMGRAPH_FLAGS="openmp=False",
                                         OMP_NUM_THREADS="2")[0].split())
    assert count == 1 and after == before


def test_the_flag_on_runs_omp_num_threads_threads():
    before, after, count = map(int, _run(_STEP, SYMGRAPH_FLAGS="openmp=True",
                                         OMP_NUM_THREADS="2")[0].split())
    assert count == 2 and after == before + 1       # libgomp's one worker


# -- the BLAS pool ------------------------------------------------------------------------------

def _blas_threads():
    control = threads.blas_thread_control()
    if control is None:
        pytest.skip("no BLAS with a settable thread count here")
    return ctypes.CFUNCTYPE(ctypes.c_int)(control[0])


def test_the_thread_runtime_is_part_of_the_support_library():
    # built at install with it: a cold cache compiles no library of its own
    from symgraph.backends.cpu import support_lib

    lib = threads.library()
    if lib is None:
        pytest.skip("the thread library is not available")
    assert lib is support_lib.load_support()
    assert threads.routine_address("dgemm") == ctypes.cast(
        support_lib.load_support().sg_threads_dgemm, ctypes.c_void_p).value


def test_symgraph_blas_calls_leave_the_pool_as_they_found_it():
    get = _blas_threads()
    lib = threads.library()
    if lib is None:
        pytest.skip("the thread library is not available")
    before = get()
    x, w = T.dmatrix("x"), T.dmatrix("w")
    f = symgraph.function([x, w], T.dot(x, w))
    holds = ctypes.c_int64.in_dll(lib, "sg_threads_holds").value
    f(RNG.standard_normal((300, 200)), RNG.standard_normal((200, 100)))
    assert get() == before
    if before > 1:       # lowered to one thread for the call, then restored
        assert ctypes.c_int64.in_dll(lib, "sg_threads_holds").value > holds


def test_the_pool_is_capped_at_symgraph_count_unless_the_user_sized_it():
    capped = _run(_STEP, SYMGRAPH_FLAGS="openmp=True", SG_TEST_CORES="1")[1]
    if capped == "none":
        pytest.skip("no BLAS with a settable thread count here")
    assert capped == "1"
    mine = _run(_STEP, SYMGRAPH_FLAGS="openmp=True", SG_TEST_CORES="1",
                OPENBLAS_NUM_THREADS="2")[1]
    assert mine == str(min(2, threads.affinity_cores()))    # OpenBLAS's own cap


# -- results independent of the thread count ---------------------------------------------------------

_GOMP = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")


def _on(count, fn, *args):
    before = _GOMP.omp_get_max_threads()
    _GOMP.omp_set_num_threads(count)
    try:
        return [np.asarray(o).copy() for o in fn(*args)]
    finally:
        _GOMP.omp_set_num_threads(before)


def _same_bits(fn, *args):
    one, two, three = (_on(n, fn, *args) for n in (1, 2, 3))
    for a, b, c in zip(one, two, three):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes() == c.tobytes()


SMALL = dict(openmp_elemwise_minsize=0, openmp_reduce_minsize=0, openmp_softmax_minsize=0,
             openmp_pool_minsize=0, openmp_conv_minsize=0, openmp_batchnorm_minsize=0)


def test_element_wise_reductions_and_softmax_give_the_same_bits_on_any_thread_count():
    x = T.fmatrix("x")
    outs = [T.exp(-x * x) * 3 + T.tanh(x), T.sum(T.exp(x)), T.sum(x, axis=0),
            T.max(x, axis=1), T.argmax(x, axis=None), T.nnet.softmax(x),
            T.sum(x[:, :3], axis=0)]
    with config.change_flags(openmp=True, **SMALL):
        f = symgraph.function([x], outs)
    _same_bits(f, RNG.standard_normal((3000, 257)).astype("float32"))


def test_matrix_products_give_the_same_bits_on_any_thread_count():
    x, w = T.fmatrix("x"), T.fmatrix("w")
    with config.change_flags(openmp=True):
        f = symgraph.function([x, w], [T.dot(x, w), T.dot(w.T, x.T), T.dot(x[:, :7], w[:7])])
    _same_bits(f, RNG.standard_normal((300, 257)).astype("float32"),
               RNG.standard_normal((257, 190)).astype("float32"))


def test_convolution_pooling_and_their_gradients_give_the_same_bits_on_any_thread_count():
    from symgraph.tensor.signal.pool import pool_2d

    x, w = T.tensor4("x", dtype="float32"), T.tensor4("w", dtype="float32")
    c = T.nnet.conv2d(x, w, filter_flip=False)
    p = pool_2d(T.nnet.relu(c), ws=(2, 2), ignore_border=True)
    cost = T.sum(p * p)
    with config.change_flags(openmp=True, **SMALL):
        f = symgraph.function([x, w], [c, p, *T.grad(cost, [x, w])])
    _same_bits(f, RNG.standard_normal((9, 4, 14, 14)).astype("float32"),
               RNG.standard_normal((6, 4, 3, 3)).astype("float32"))


def test_batch_norm_gives_the_same_bits_on_any_thread_count():
    from symgraph.tensor.nnet.bn import batch_normalization_train

    x = T.tensor4("x", dtype="float32")
    g, b = T.tensor4("g", dtype="float32"), T.tensor4("b", dtype="float32")
    out, mean, invstd = batch_normalization_train(x, g, b, axes="spatial")[:3]
    with config.change_flags(openmp=True, **SMALL):
        f = symgraph.function([x, g, b], [out, mean, invstd, *T.grad(T.sum(out ** 2), [x, g])])
    _same_bits(f, RNG.standard_normal((7, 5, 9, 11)).astype("float32") * 3 + 1,
               RNG.standard_normal((1, 5, 1, 1)).astype("float32"),
               RNG.standard_normal((1, 5, 1, 1)).astype("float32"))


def test_prefetch_and_library_from_many_threads_at_once(monkeypatch):
    """A thread asking for the library while another one's prefetch is starting
    its loader waits for it (joining a thread not yet started used to raise)."""
    import threading as th

    real_start = th.Thread.start

    def slow_start(self):
        # Widen the window between the loader's creation and its start.
        import time

        time.sleep(0.01)
        real_start(self)

    for _ in range(3):
        monkeypatch.setattr(threads, "_state", {"lib": None, "tried": False, "pending": None,
                                          "blas": threads._state["blas"]})
        monkeypatch.setattr(threads, "_load", lambda: "loaded")
        monkeypatch.setattr(th.Thread, "start", slow_start)
        errors, results = [], []

        def ask():
            try:
                threads.prefetch()
                results.append(threads.library())
            except Exception as exc:  # noqa: BLE001 - the test reports it
                errors.append(exc)

        workers = [th.Thread(target=ask) for _ in range(6)]
        for w in workers:
            real_start(w)
        for w in workers:
            w.join()
        monkeypatch.setattr(th.Thread, "start", real_start)
        assert not errors and results == ["loaded"] * 6


def test_prefetch_does_not_wait_for_the_build_it_started(monkeypatch):
    """The compile of kernels goes on while the thread library builds: a second
    prefetch (one per BLAS node) returns at once instead of waiting for it."""
    import threading as th

    entered, release = th.Event(), th.Event()

    def slow_load():
        entered.set()
        release.wait(2)
        return "loaded"

    monkeypatch.setattr(threads, "_state", {"lib": None, "tried": False, "pending": None,
                                            "blas": threads._state["blas"]})
    monkeypatch.setattr(threads, "_load", slow_load)
    threads.prefetch()
    assert entered.wait(10)
    threads.prefetch()
    threads.prefetch()
    returned_while_building = not threads._state["tried"]
    release.set()
    assert returned_while_building
    assert threads.library() == "loaded"


def test_a_thread_that_backs_off_runs_its_regions_on_one_thread():
    # The team every parallel region asks for (element-wise loops, softmax
    # rows, split products): one while the calling thread backs off after a
    # region waited for a descheduled thread, the whole team after it.
    import time

    lib = threads.library()
    if lib is None:
        pytest.skip("the thread library is not available")
    lib.sg_threads_back_off.argtypes = [ctypes.c_double]
    team = lib.sg_threads_region_team
    lib.sg_threads_back_off(0.0)    # an earlier test's regions may have started one
    whole = team()
    assert whole == _GOMP.omp_get_max_threads()
    lib.sg_threads_back_off(0.2)
    assert team() == 1
    # regions run on one thread meanwhile, with the same bits
    x = T.fvector("x")
    m = x[:300000].reshape((600, 500))
    with symgraph.config.change_flags(openmp=True, **SMALL):
        f = symgraph.function([x], [T.exp(x) * 2 + T.tanh(x), T.sum(T.exp(x)),
                                    T.sum(m, axis=0), T.max(m, axis=1), T.nnet.softmax(m)])
    value = RNG.standard_normal(300001).astype("float32")
    lib.sg_threads_back_off(0.0)
    want = [np.asarray(o).copy() for o in f(value)]
    lib.sg_threads_back_off(5.0)
    for got, expected in zip(f(value), want):
        np.testing.assert_array_equal(got, expected)
    lib.sg_threads_back_off(0.0)
    time.sleep(0.001)
    assert team() == whole


def test_every_parallel_region_of_the_convolution_library_follows_the_back_off():
    # its team comes from sg_conv_team / sg_conv_team_of (one thread while the
    # calling thread backs off); the direct algorithms' regions ran on the
    # whole team under load
    import re

    regions = 0
    for path in sorted((ROOT / "c_src" / "conv").iterdir()):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"#pragma omp parallel(?:[^\n]*\\\n)*[^\n]*", text):
            regions += 1
            assert "num_threads(sg_conv_team" in match.group(0), (path.name, match.group(0))
    assert regions >= 10


def test_convolution_pooling_and_batch_norm_follow_the_back_off_with_the_same_bits():
    # the convolution library's loops ask the thread runtime for their team;
    # batch norm's passes size their workspaces for the team they are given
    from symgraph.backends.cpu.conv import library as conv_library
    from symgraph.tensor.nnet.bn import batch_normalization_train

    lib = threads.library()
    if lib is None:
        pytest.skip("the thread library is not available")
    conv, _ = conv_library.load(True)
    assert ctypes.c_void_p.in_dll(conv, "sg_conv_region_team").value == ctypes.cast(
        lib.sg_threads_region_team, ctypes.c_void_p).value
    lib.sg_threads_back_off.argtypes = [ctypes.c_double]
    from symgraph.tensor.signal.pool import pool_2d

    x, w = T.tensor4("x", dtype="float32"), T.tensor4("w", dtype="float32")
    y = T.nnet.conv2d(x, w)
    p = pool_2d(T.nnet.relu(y), ws=(2, 2), ignore_border=True)
    g = T.ones((1, 6, 1, 1), dtype="float32")
    n = batch_normalization_train(p, g, g * 0, axes="spatial")[0]
    with symgraph.config.change_flags(openmp=True, **SMALL):
        f = symgraph.function([x, w], [y, p, n, *T.grad(T.sum(n ** 2), [x, w])])
    xv = RNG.standard_normal((8, 3, 17, 15)).astype("float32")
    wv = RNG.standard_normal((6, 3, 3, 3)).astype("float32")
    lib.sg_threads_back_off(0.0)
    want = f(xv, wv)
    lib.sg_threads_back_off(5.0)
    got = f(xv, wv)
    lib.sg_threads_back_off(0.0)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
