"""The compile cache's guarantees (docs/native.md), tried as a hostile user would.

* index records: damaged, of the wrong types, or tampered with (another
  library, another prefix) are misses, rebuilt, never another kernel's code;
* pruning never removes a library that a process is loading, and the size cap
  holds once all processes stop;
* every folder and file under the compiledir is private whatever the umask,
  and one that others may write is refused before it is used;
* without a compiler, cached kernels still load, with one warning naming cxx.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native import linker
from symgraph.backends.cpu import support_lib
from symgraph.backends.native.cache import CacheSecurityError, ModuleCache, get_cache
from symgraph.config import config


@pytest.fixture
def root(tmp_path):
    """A fresh compiledir for the test."""
    path = tmp_path / "cache"
    with config.change_flags(compiledir=str(path)):
        yield path


def _kernel_records(root):
    """{record path: record} of the kernel index entries (those naming a library)."""
    out = {}
    for item in (root / "index").iterdir():
        record = json.loads(item.read_text())
        value = record.get("value")
        if isinstance(value, dict) and "prefix" in value:
            out[item] = record
    return out


def _write(path, record):
    path.write_text(json.dumps(record))


def _compile(out_fn):
    x = T.dmatrix("x")
    return symgraph.function([x], out_fn(x))


VALUE = np.linspace(-1.0, 1.0, 6).reshape(2, 3)


# ----------------------------------------------------------------------------- the index

def test_record_naming_another_library_is_a_miss(root):
    f_exp = _compile(lambda x: T.exp(x) * 2 + 1)
    exp_records = _kernel_records(root)
    f_tanh = _compile(lambda x: T.tanh(x) * 3 - 1)
    tanh_records = {p: r for p, r in _kernel_records(root).items() if p not in exp_records}
    assert len(exp_records) == 1 and len(tanh_records) == 1
    (exp_path, exp_rec), = exp_records.items()
    (_, tanh_rec), = tanh_records.items()
    own = dict(exp_rec["value"])
    # the exp kernel's record now names the tanh kernel's library and prefix
    exp_rec["value"] = dict(tanh_rec["value"])
    _write(exp_path, exp_rec)
    again = _compile(lambda x: T.exp(x) * 2 + 1)
    np.testing.assert_allclose(again(VALUE), np.exp(VALUE) * 2 + 1, rtol=1e-12)
    # a miss: its library found again (content-addressed) and the record repaired
    assert json.loads(exp_path.read_text())["value"] == own
    np.testing.assert_allclose(f_tanh(VALUE), np.tanh(VALUE) * 3 - 1, rtol=1e-12)
    np.testing.assert_allclose(f_exp(VALUE), np.exp(VALUE) * 2 + 1, rtol=1e-12)


def test_record_with_another_prefix_is_a_miss(root):
    with config.change_flags(openmp=False):    # OpenMP kernels carry more C: 2 libraries
        _record_with_another_prefix_is_a_miss(root)


def _record_with_another_prefix_is_a_miss(root):
    def build(x):   # two kernels in one library: a fused loop and a reduction
        return [T.exp(x) * 2 + 1, T.tanh(x).max(axis=0)]

    x = T.dmatrix("x")
    symgraph.function([x], build(x))
    records = _kernel_records(root)
    libs = {r["value"]["lib"] for r in records.values()}
    prefixes = sorted(r["value"]["prefix"] for r in records.values())
    assert len(libs) == 1 and len(prefixes) >= 2
    for path, record in records.items():   # swap the prefixes around
        k = prefixes.index(record["value"]["prefix"])
        record["value"]["prefix"] = prefixes[(k + 1) % len(prefixes)]
        _write(path, record)
    f = symgraph.function([x], build(x))
    got = f(VALUE)
    np.testing.assert_allclose(got[0], np.exp(VALUE) * 2 + 1, rtol=1e-12)
    np.testing.assert_allclose(got[1], np.tanh(VALUE).max(axis=0), rtol=1e-12)


@pytest.mark.parametrize("value", [
    {"lib": 5, "prefix": "sgk0"},
    {"lib": None, "prefix": None},
    {"lib": "../../etc", "prefix": "sgk0"},
    {"lib": "0" * 64, "prefix": "sgk0"},          # well formed, no such library
    {"lib": "LIB", "prefix": "sgk0; rm"},
    {"prefix": "sgk0"},
    {"lib": "LIB"},
    {"lib": "LIB", "prefix": 0},
    {"lib": "LIB", "prefix": ["sgk0"]},
    ["not", "a", "dict"],
    "text",
])
def test_records_of_the_wrong_shape_are_rebuilt(root, value):
    fn = lambda x: T.sin(x) * 0.5 + 2   # noqa: E731
    _compile(fn)
    (path, record), = _kernel_records(root).items()
    lib = record["value"]["lib"]
    if isinstance(value, dict):
        value = {k: (lib if v == "LIB" else v) for k, v in value.items()}
    record["value"] = value
    _write(path, record)
    for _ in range(2):   # rebuilt once, then a hit: never an error on a later run
        f = _compile(fn)
        np.testing.assert_allclose(f(VALUE), np.sin(VALUE) * 0.5 + 2, rtol=1e-12)
    assert json.loads(path.read_text())["value"]["lib"] == lib


@pytest.mark.parametrize("damage", [b"", b"{", b"\x00\xff garbage", b"[]", b"null",
                                    b'{"format": "1"}'])
def test_garbage_records_are_rebuilt(root, damage):
    fn = lambda x: T.cos(x) - 0.25   # noqa: E731
    _compile(fn)
    (path, _), = _kernel_records(root).items()
    path.write_bytes(damage)
    f = _compile(fn)
    np.testing.assert_allclose(f(VALUE), np.cos(VALUE) - 0.25, rtol=1e-12)
    assert json.loads(path.read_text())["value"]["prefix"].startswith("sgk")


def test_record_naming_a_library_without_manifest_is_a_miss(root):
    """The support library is a real, verified entry, but holds no kernel."""
    fn = lambda x: T.exp(-x) + x   # noqa: E731
    _compile(fn)
    (path, record), = _kernel_records(root).items()
    other = [e.key for e in get_cache().list_entries() if e.key != record["value"]["lib"]]
    for key in other:
        record["value"]["lib"] = key
        _write(path, record)
        f = _compile(fn)
        np.testing.assert_allclose(f(VALUE), np.exp(-VALUE) + VALUE, rtol=1e-12)


# ----------------------------------------------------------------------------- pruning

def test_cap_zero_with_kernels_split_over_libraries(root, monkeypatch):
    """Each library is loaded before any pruning can take it (it used to fail
    with 'lib.so: cannot open shared object file' every time)."""
    def one_library_each(missing):
        return [[(key, linker.kernel_prefix(0))] for key in sorted(missing)]

    monkeypatch.setattr(linker, "_groups", one_library_each)
    x, w = T.dmatrix("x"), T.dmatrix("w")
    h = T.tanh(T.dot(x, w))
    cost = (T.nnet.softmax(h) ** 2).sum() + T.exp(x).max()
    with config.change_flags(compile_cache_size_mb=0):
        f = symgraph.function([x, w], [cost] + symgraph.grad(cost, [w]))
        xv, wv = np.eye(2, 3) + 0.5, np.ones((3, 4)) * 0.25
        ref = symgraph.function([x, w], [cost] + symgraph.grad(cost, [w]),
                                mode=symgraph.Mode(linker="py"))
        for a, b in zip(f(xv, wv), ref(xv, wv)):
            np.testing.assert_allclose(a, b, rtol=1e-10)
        # at most the last library remains: the cap holds
        assert len(get_cache().list_entries()) <= 1


def test_prune_skips_an_entry_being_loaded(root):
    cache = ModuleCache(root)
    for key in ("aaaa0001", "bbbb0002"):
        cache.get_or_build(key, lambda tmp: (tmp / "lib.so").write_bytes(b"x" * 1000))
    with cache._key_lock("aaaa0001", shared=True):   # a process loading it
        removed = cache.prune(max_bytes=0)
        assert [e.key for e in removed] == ["bbbb0002"]
        assert cache.get("aaaa0001") is not None
    assert [e.key for e in cache.prune(max_bytes=0)] == ["aaaa0001"]


def test_load_returns_what_it_checked_under_the_lock(root):
    cache = ModuleCache(root)
    seen = []
    got = cache.load("cccc0003", lambda tmp: (tmp / "lib.so").write_bytes(b"abc"),
                     loader=lambda path: seen.append(open(path, "rb").read()) or path)
    assert seen == [b"abc"] and got.endswith("lib.so")
    assert cache.load("dddd0004") is None   # missing, and nothing to build it with


_WORKER = textwrap.dedent("""
    import sys
    import numpy as np
    import symgraph, symgraph.tensor as T
    from symgraph.config import config
    seed = int(sys.argv[1])
    x = T.dmatrix("x")
    v = np.linspace(-1, 1, 6).reshape(2, 3)
    for k in range(3):
        c = float(seed % 2 + k)   # two processes share each graph, others differ
        f = symgraph.function([x], [T.tanh(x) * c + T.exp(x).sum(axis=0), (x * c).max()])
        got = f(v)
        assert np.allclose(got[0], np.tanh(v) * c + np.exp(v).sum(axis=0)), got
        assert np.isclose(got[1], (v * c).max())
    print("ok")
""")


@pytest.mark.parametrize("cap_mb", [0, 1])
def test_processes_pruning_each_other(root, tmp_path, cap_mb):
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    env = dict(os.environ, SYMGRAPH_FLAGS=f"compiledir={root},compile_cache_size_mb={cap_mb}")
    procs = [subprocess.Popen([sys.executable, str(script), str(seed)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "ok", err
    cache = ModuleCache(root)
    entries = cache.list_entries()
    total = sum(e.size for e in entries)
    # the cap holds once all have stopped (beyond it: at most the newest entry)
    assert total <= cap_mb * 2**20 or len(entries) == 1


# ----------------------------------------------------------------------------- permissions

def _walk(root):
    for folder, dirs, files in os.walk(root):
        yield folder
        for name in files:
            yield os.path.join(folder, name)


def test_everything_is_private_under_umask_000(tmp_path):
    root = tmp_path / "open"
    old = os.umask(0)
    try:
        with config.change_flags(compiledir=str(root)):
            support_lib._DIRS.clear()
            x = T.dmatrix("x")
            f = symgraph.function([x], T.exp(x).sum(axis=1) * 2 + T.tanh(x).max())
            f(VALUE)
            from symgraph.backends.cpu.conv import tuning as conv_tuning
            conv_tuning.store("shape-key", "gemm", {"gemm": 1.0})
    finally:
        os.umask(old)
        support_lib._DIRS.clear()
    paths = list(_walk(root))
    assert any("generated" in p for p in paths) and any("tuning" in p for p in paths)
    for path in paths:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        assert not mode & 0o077, f"{path} has mode {mode:#o}"


@pytest.mark.parametrize("where", ["generated", "generated/HASH", "generated/HASH/support",
                                   "tuning"])
def test_a_folder_others_may_write_is_refused(root, where):
    x = T.dmatrix("x")
    symgraph.function([x], T.exp(x) + 1)
    from symgraph.backends.cpu.conv import tuning as conv_tuning
    conv_tuning.store("shape-key", "gemm", {"gemm": 1.0})
    digest = support_lib.support_source_hash()[:24]
    path = root / where.replace("HASH", digest)
    path.chmod(0o777)
    support_lib._DIRS.clear()
    try:
        with pytest.raises(CacheSecurityError, match="writable by group or others"):
            if where == "tuning":
                conv_tuning.load("shape-key")
            else:
                symgraph.function([x], T.exp(x) + 7.5)   # a new kernel: compiled
    finally:
        path.chmod(0o700)
        support_lib._DIRS.clear()


def test_a_planted_header_is_refused(root):
    x = T.dmatrix("x")
    symgraph.function([x], T.exp(x) + 1)
    folder = root / "generated" / support_lib.support_source_hash()[:24] / "support"
    header = folder / support_lib.HEADER_NAME
    header.chmod(0o666)   # as if written by another user's process
    support_lib._DIRS.clear()
    try:
        with pytest.raises(CacheSecurityError, match="writable by group or others"):
            symgraph.function([x], T.exp(x) + 8.25)
    finally:
        header.chmod(0o600)
        support_lib._DIRS.clear()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
def test_a_header_of_another_user_is_refused(root):
    x = T.dmatrix("x")
    symgraph.function([x], T.exp(x) + 1)
    folder = root / "generated" / support_lib.support_source_hash()[:24] / "support"
    header = folder / support_lib.HEADER_NAME
    os.chown(header, 65534, 65534)
    support_lib._DIRS.clear()
    try:
        with pytest.raises(CacheSecurityError, match="owned by uid 65534"):
            symgraph.function([x], T.exp(x) + 9.5)
    finally:
        os.chown(header, 0, 0)
        support_lib._DIRS.clear()


# ----------------------------------------------------------------------------- no compiler

_NO_CC = textwrap.dedent("""
    import warnings
    import numpy as np
    import symgraph, symgraph.tensor as T
    from symgraph.backends.cpu.compiler import COMPILE_STATS
    x = T.dmatrix("x")
    v = np.linspace(-1, 1, 6).reshape(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warm = symgraph.function([x], T.exp(x) * 2 + 1)
        cold = symgraph.function([x], T.sin(x).sum(axis=0) * 3 + 1.5)
    assert np.allclose(warm(v), np.exp(v) * 2 + 1)
    assert np.allclose(cold(v), np.sin(v).sum(axis=0) * 3 + 1.5)
    print("warnings", [str(w.message) for w in caught])
    print("warm python nodes", len(warm.native.python_nodes) if warm.native else "vm")
    print("cold python nodes", len(cold.native.python_nodes) if cold.native else "vm")
    print("compiles", COMPILE_STATS.snapshot()[0])
""")


def _run_without_compiler(tmp_path, flags):
    script = tmp_path / "nocc.py"
    script.write_text(_NO_CC)
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    env = dict(os.environ, PATH=str(empty), SYMGRAPH_FLAGS=flags)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_without_a_compiler_cached_kernels_still_load(root, tmp_path):
    x = T.dmatrix("x")
    symgraph.function([x], T.exp(x) * 2 + 1)    # the warm kernel, with a compiler
    out = _run_without_compiler(tmp_path, f"compiledir={root}")
    assert "warm python nodes 0" in out            # native, from the cache
    assert "cold python nodes" in out and "cold python nodes 0" not in out
    assert "compiles 0" in out
    warnings_line = next(line for line in out.splitlines() if line.startswith("warnings"))
    assert warnings_line.count("no C compiler was found") == 1   # once per process
    assert "cxx" in warnings_line


def test_python_only_by_choice_is_silent(root, tmp_path):
    out = _run_without_compiler(tmp_path, f"compiledir={root},cxx=")
    assert "warnings []" in out
    assert "warm python nodes vm" in out


def test_no_compiler_warning_names_the_flag_and_the_users_line(root, monkeypatch):
    monkeypatch.setattr(linker, "_warned_no_compiler", False)
    monkeypatch.setattr(linker, "native_available", lambda: False)
    x = T.dmatrix("x")
    with config.change_flags(cxx="no-such-compiler-g++"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = symgraph.function([x], T.exp(x) * 2 + 1)
    assert len(caught) == 1
    assert caught[0].category is linker.NoCompilerWarning
    assert "cxx='no-such-compiler-g++'" in str(caught[0].message)
    assert caught[0].filename == __file__
    np.testing.assert_allclose(f(VALUE), np.exp(VALUE) * 2 + 1)


# ----------------------------------------------------------------------------- deleted functions

def _mapped_libraries(root):
    with open("/proc/self/maps") as handle:
        return {line.split()[-1] for line in handle if str(root) in line}


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_deleted_functions_leave_no_library_mapped_nor_op_alive(root):
    import gc
    import weakref

    from symgraph.ops.composite import Composite

    x = T.dmatrix("x")
    ops = []
    for i in range(12):   # distinct graphs: a library and a fused op each
        f = symgraph.function([x], T.exp(x) * (i + 0.5) + T.tanh(x).sum() * i)
        np.testing.assert_allclose(f(VALUE), np.exp(VALUE) * (i + 0.5)
                                   + np.tanh(VALUE).sum() * i)
        ops += [weakref.ref(n.op.scalar_op) for n in f.maker.fgraph.apply_nodes
                if isinstance(getattr(n.op, "scalar_op", None), Composite)]
        assert _mapped_libraries(root)
        del f
    gc.collect()
    assert ops and all(ref() is None for ref in ops)
    assert not _mapped_libraries(root)
    # a library unloaded is loaded again when a function needs it
    f = symgraph.function([x], T.exp(x) * 3.5 + T.tanh(x).sum() * 3)
    np.testing.assert_allclose(f(VALUE), np.exp(VALUE) * 3.5 + np.tanh(VALUE).sum() * 3)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_a_backend_that_keeps_its_libraries_loaded_never_unloads_them(root, monkeypatch):
    # CUDA on a GPU: unloading a library unregisters its kernels, and a
    # library loaded later at the same address failed its launches
    import gc

    from symgraph.backends.cpu.backend import CpuBackend

    monkeypatch.setattr(CpuBackend, "keeps_libraries_loaded", lambda self: True)
    x = T.dmatrix("x")
    f = symgraph.function([x], T.exp(x) * 7.25 + 0.5)
    np.testing.assert_allclose(f(VALUE), np.exp(VALUE) * 7.25 + 0.5)
    mapped = _mapped_libraries(root)
    assert mapped
    del f
    gc.collect()
    assert _mapped_libraries(root) >= mapped


def test_cuda_keeps_its_libraries_loaded_on_a_gpu_only(monkeypatch):
    from symgraph.backends.cuda import backend as cuda_backend

    monkeypatch.setattr(cuda_backend, "_emulated", lambda: False)
    assert cuda_backend.CudaBackend().keeps_libraries_loaded()
    monkeypatch.setattr(cuda_backend, "_emulated", lambda: True)
    assert not cuda_backend.CudaBackend().keeps_libraries_loaded()
