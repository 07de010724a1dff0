"""The on-disk compile cache: keys, atomic builds, per-key locks across processes,
self-healing entries, security checks, LRU pruning, the index and the CLI.

Every test uses its own compiledir under tmp_path: never the user's real cache.
"""

import ctypes
import json
import multiprocessing
import os
import signal
import stat
import threading
import time
import warnings

import pytest

from symgraph.__main__ import main as symgraph_main
from symgraph.backends.native import cache as cache_mod
from symgraph.backends.native.cache import (
    CacheError, CacheSecurityError, ModuleCache, environment_parts, get_cache, make_key)
from symgraph.backends.cpu.compiler import COMPILE_STATS, CompileError, compile_library
from symgraph.config import config


def _source(factor):
    return f"#include <stdint.h>\nint64_t answer(int64_t x) {{ return x * {factor}; }}\n"


def _key(factor):
    return make_key(source=_source(factor), **environment_parts())


def _builder(factor, log=None, delay=0.0):
    """A build_fn compiling _source(factor); appends a line to ``log`` per build."""
    def build(tmp):
        if log is not None:
            with open(log, "a") as handle:
                handle.write(f"{os.getpid()}\n")
        time.sleep(delay)
        compile_library(_source(factor), tmp / "lib.so")
    return build


def _call(path, x=7):
    lib = ctypes.CDLL(str(path))
    lib.answer.restype = ctypes.c_int64
    lib.answer.argtypes = [ctypes.c_int64]
    return lib.answer(x)


def _count(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def root(tmp_path):
    """A fresh compiledir, set as the flag for the test."""
    path = tmp_path / "cache"
    with config.change_flags(compiledir=str(path)):
        yield path


def _fork_context():
    # fork: the children inherit the imported modules, so 8 of them start in ms
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork")
    return multiprocessing.get_context("fork")


# ----------------------------------------------------------------------------- keys

def test_make_key_is_deterministic_and_order_free():
    a = make_key(source="x", flags="-O3")
    assert a == make_key(flags="-O3", source="x") and len(a) == 64
    assert a != make_key(source="x", flags="-O2")
    # length prefixes: moving text between parts changes the key
    assert make_key(a="xy", b="z") != make_key(a="x", b="yz")


def test_environment_parts_follow_code_flags():
    parts = environment_parts()
    assert {"compiler", "flags", "cpu", "numpy", "python", "symgraph",
            "config"} <= set(parts)
    with config.change_flags(floatX="float32"):
        assert environment_parts()["config"] != parts["config"]
    with config.change_flags(profile=True):  # not a code flag
        assert environment_parts() == parts


# ----------------------------------------------------------------------------- basics

def test_build_load_and_hit(root, tmp_path):
    log = tmp_path / "log"
    cache = get_cache()
    assert cache.root == root and get_cache(str(root)) is cache
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    key = _key(6)
    before = COMPILE_STATS.snapshot()[0]
    path = cache.get_or_build(key, _builder(6, log), parts={"source": _source(6)})
    assert _call(path) == 42
    assert path == root / key[:2] / key / "lib.so"
    meta = json.loads((path.parent / "meta.json").read_text())
    assert meta["size"] == path.stat().st_size and len(meta["sha256"]) == 64
    assert meta["parts"]["source"].startswith("<64 chars, sha256 ")  # summarized
    # the same key again compiles nothing, in this object or a new one
    assert cache.get_or_build(key, _builder(6, log)) == path
    assert ModuleCache(root).get_or_build(key, _builder(6, log)) == path
    assert _count(log) == 1 and COMPILE_STATS.snapshot()[0] == before + 1
    assert cache.get(key) == path and cache.get(_key(99)) is None
    assert list((root / "tmp").iterdir()) == []


def test_load_returns_the_library(root):
    lib = get_cache().load(_key(2), _builder(2))
    lib.answer.restype = ctypes.c_int64
    assert lib.answer(ctypes.c_int64(21)) == 42


def test_bad_keys_are_refused(root):
    for key in ("../../etc", "", "a/b", 12):
        with pytest.raises(CacheError, match="bad cache key"):
            get_cache().get_or_build(key, _builder(1))


def test_build_without_lib_is_an_error(root):
    with pytest.raises(CacheError, match="wrote no lib.so"):
        get_cache().get_or_build(_key(1), lambda tmp: None)
    assert get_cache().get(_key(1)) is None


def test_threads_build_once(root, tmp_path):
    log, key = tmp_path / "log", _key(5)
    cache, results = get_cache(), []

    def work():
        results.append(_call(cache.get_or_build(key, _builder(5, log, delay=0.1)), 3))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [15] * 8 and _count(log) == 1


# ----------------------------------------------------------------------------- processes

def _process_worker(root, key, factor, log, barrier, results):
    barrier.wait()
    path = ModuleCache(root).get_or_build(key, _builder(factor, log, delay=0.2))
    results.put(_call(path))


@pytest.mark.parametrize("nproc", [2, 8])
def test_processes_compile_a_key_once(root, tmp_path, nproc):
    ctx = _fork_context()
    log, key = tmp_path / "log", _key(4)
    barrier, results = ctx.Barrier(nproc), ctx.Queue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        procs = [ctx.Process(target=_process_worker,
                             args=(str(root), key, 4, str(log), barrier, results))
                 for _ in range(nproc)]
        for proc in procs:
            proc.start()
    values = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert values == [28] * nproc
    assert _count(log) == 1


def _killed_worker(root, key, log):
    def build(tmp):
        (tmp / "lib.so").write_bytes(b"\x7fELF half a libr")
        with open(log, "a") as handle:
            handle.write("started\n")
        time.sleep(0.3)  # the parent is waiting on the key's lock now
        os.kill(os.getpid(), signal.SIGKILL)
    ModuleCache(root).get_or_build(key, build)


def test_killed_compiler_leaves_the_cache_usable(root, tmp_path):
    ctx = _fork_context()
    log, key = tmp_path / "log", _key(3)
    get_cache()  # make the root before forking
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        proc = ctx.Process(target=_killed_worker, args=(str(root), key, str(log)))
        proc.start()
    deadline = time.time() + 30
    while _count(log) == 0 and time.time() < deadline:
        time.sleep(0.01)
    # the dying process holds the key's lock: this waits for it, then builds
    path = get_cache().get_or_build(key, _builder(3))
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    assert _call(path) == 21
    leftovers = list((root / "tmp").iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.startswith("build-")
    assert get_cache().clean_tmp() == 0  # young: maybe a build in progress
    old = time.time() - 2 * 3600
    os.utime(leftovers[0], (old, old))
    get_cache().prune()
    assert list((root / "tmp").iterdir()) == []


def test_failing_build_fn_leaves_no_entry(root, tmp_path):
    def broken(tmp):
        (tmp / "lib.so").write_bytes(b"partial")
        raise RuntimeError("boom")

    cache = get_cache()
    with pytest.raises(RuntimeError, match="boom"):
        cache.get_or_build(_key(8), broken)
    assert list((root / "tmp").iterdir()) == []
    assert _call(cache.get_or_build(_key(8), _builder(8))) == 56


def test_compile_error_keeps_the_source(root):
    def bad(tmp):
        compile_library("int broken( {\n", tmp / "lib.so")

    with pytest.raises(CompileError) as info:
        get_cache().get_or_build("deadbeef" * 8, bad)
    assert os.path.exists(info.value.source_path)
    assert get_cache().get("deadbeef" * 8) is None


# ----------------------------------------------------------------------------- healing

def _built(root, factor, log):
    key = _key(factor)
    path = get_cache().get_or_build(key, _builder(factor, log))
    return key, path


def test_truncated_library_is_rebuilt(root, tmp_path):
    log = tmp_path / "log"
    key, path = _built(root, 9, log)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert get_cache().get(key) is None
    path = get_cache().get_or_build(key, _builder(9, log))
    assert _count(log) == 2 and _call(path) == 63


def test_same_size_corruption_is_rebuilt(root, tmp_path):
    log = tmp_path / "log"
    key, path = _built(root, 10, log)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = ModuleCache(root)  # a new process: checks the sha256 on first load
    path = fresh.get_or_build(key, _builder(10, log))
    assert _count(log) == 2 and _call(path) == 70


@pytest.mark.parametrize("damage", ["garbage", "missing", "no_size"])
def test_bad_meta_is_rebuilt(root, tmp_path, damage):
    log = tmp_path / "log"
    key, path = _built(root, 11, log)
    meta = path.parent / "meta.json"
    if damage == "garbage":
        meta.write_bytes(b"{not json\x00")
    elif damage == "missing":
        meta.unlink()
    else:
        meta.write_text(json.dumps({"sha256": "x"}))
    path = get_cache().get_or_build(key, _builder(11, log))
    assert _count(log) == 2 and _call(path) == 77
    assert json.loads(meta.read_text())["size"] == path.stat().st_size


# ----------------------------------------------------------------------------- security

def test_world_writable_root_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(CacheSecurityError) as info:
        ModuleCache(root)
    message = str(info.value)
    assert str(root) in message and "chmod go-w" in message and "writable" in message
    root.chmod(0o755)
    ModuleCache(root)  # fixed as the message says


def test_writable_entry_folder_is_refused(root):
    key, path = _built(root, 12, None)
    path.parent.chmod(0o777)
    with pytest.raises(CacheSecurityError, match="chmod go-w"):
        get_cache().get_or_build(key, _builder(12))
    path.parent.chmod(0o700)
    path.chmod(0o666)
    with pytest.raises(CacheSecurityError, match="library"):
        get_cache().get(key)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder away")
def test_folder_of_another_user_is_refused(tmp_path):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    with pytest.raises(CacheSecurityError, match="owned by uid 65534"):
        ModuleCache(root)


def test_group_writable_umask_still_makes_safe_entries(root):
    old = os.umask(0o002)
    try:
        key, path = _built(root, 13, None)
    finally:
        os.umask(old)
    assert not path.stat().st_mode & 0o022
    assert _call(ModuleCache(root).get_or_build(key, _builder(13))) == 91


# ----------------------------------------------------------------------------- pruning

def _blob_builder(nbytes):
    def build(tmp):
        (tmp / "lib.so").write_bytes(os.urandom(nbytes))
    return build


def _age(cache, key, seconds):
    meta = cache.entry_dir(key) / "meta.json"
    when = time.time() - seconds
    os.utime(meta, (when, when))


def test_size_cap_prunes_least_recently_used(root):
    cache = get_cache()
    with config.change_flags(compile_cache_size_mb=1):
        cache.get_or_build("aaaa0001", _blob_builder(400_000))
        cache.get_or_build("bbbb0002", _blob_builder(400_000))
        _age(cache, "aaaa0001", 100)
        _age(cache, "bbbb0002", 200)
        assert cache.get("aaaa0001") is not None  # a use: a is now the newest
        cache.get_or_build("cccc0003", _blob_builder(400_000))
    keys = {entry.key for entry in cache.list_entries()}
    assert keys == {"aaaa0001", "cccc0003"}
    assert not (root / "locks" / "bbbb0002.lock").exists()  # locks/ does not grow
    assert (root / "locks" / "aaaa0001.lock").exists()
    # a cap below one entry still keeps the entry just built
    with config.change_flags(compile_cache_size_mb=0):
        path = cache.get_or_build("dddd0004", _blob_builder(1000))
    assert [entry.key for entry in cache.list_entries()] == ["dddd0004"]
    assert path.exists()



def _count_scans(cache, monkeypatch):
    scans = []
    real = cache._prune

    def counted(*args, **kwargs):
        scans.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache, "_prune", counted)
    return scans


def test_builds_under_the_cap_do_not_scan_the_cache_each_time(root, monkeypatch):
    from symgraph.backends.native import cache_cap

    cache = get_cache()
    scans = _count_scans(cache, monkeypatch)
    with config.change_flags(compile_cache_size_mb=10):
        for i in range(4):
            cache.get_or_build(f"ffff000{i}", _blob_builder(1000))
        assert len(scans) == 1                  # the first build, with no total yet
        state = json.loads((root / cache_cap.STATE_NAME).read_text())
        assert state["total"] >= 4000
        # a scan once SCAN_SECONDS have passed, whatever the total
        monkeypatch.setattr(cache_cap, "SCAN_SECONDS", 0.0)
        cache.get_or_build("ffff0009", _blob_builder(1000))
        assert len(scans) == 2
        # a warm-start function written counts too: over the cap, a scan prunes
        monkeypatch.setattr(cache_cap, "SCAN_SECONDS", 3600.0)
        cache.note_added(11 * 2**20)
        assert len(scans) == 3


def test_a_damaged_running_total_is_rebuilt_by_a_scan(root, monkeypatch):
    from symgraph.backends.native import cache_cap

    cache = get_cache()
    cache.get_or_build("abab0001", _blob_builder(1000))
    scans = _count_scans(cache, monkeypatch)
    for text in ("not json", '{"total": -5, "scanned": 0}', '{"total": "x"}', ""):
        (root / cache_cap.STATE_NAME).write_text(text)
        cache.get_or_build(f"abab{len(scans) + 2:04d}", _blob_builder(1000))
        state = json.loads((root / cache_cap.STATE_NAME).read_text())
        assert state["total"] == sum(e.size for e in cache.list_entries())
    assert len(scans) == 4
    cache.clear()
    assert not (root / cache_cap.STATE_NAME).exists()

def test_prune_and_stats(root):
    cache = get_cache()
    for i, age in enumerate((30, 20, 10)):
        key = f"eeee000{i}"
        cache.get_or_build(key, _blob_builder(1000))
        _age(cache, key, age)
    info = cache.stats()
    assert info["entries"] == 3 and info["bytes"] > 3000 and info["incomplete"] == 0
    assert info["oldest"] < info["newest"]
    removed = cache.prune(max_bytes=info["bytes"] - 1)
    assert [entry.key for entry in removed] == ["eeee0000"]
    assert cache.clear() == 2 and cache.stats()["entries"] == 0


# ----------------------------------------------------------------------------- index

def test_index_round_trip_and_garbage(root):
    cache = get_cache()
    assert cache.lookup("fn-1234") is None
    cache.record("fn-1234", {"key": "abc", "n": [1, 2]})
    assert cache.lookup("fn-1234") == {"key": "abc", "n": [1, 2]}
    odd = "function with spaces / and slashes"
    cache.record(odd, {"x": 1})
    assert cache.lookup(odd) == {"x": 1}
    path = root / "index" / "fn-1234.json"
    for garbage in (b"", b"{truncated", b"[1, 2]", b'{"name_key": "other", "value": {}}'):
        path.write_bytes(garbage)
        assert cache.lookup("fn-1234") is None
    cache.record("fn-1234", {"key": "new"})  # a garbage record is simply replaced
    assert cache.lookup("fn-1234") == {"key": "new"}
    with pytest.raises(TypeError):
        cache.record("fn-1234", ["not", "a", "dict"])
    assert not [p for p in (root / "index").iterdir() if p.name.startswith(".tmp")]


# ----------------------------------------------------------------------------- no compile

def test_no_compile_with_warm_and_cold_cache(root):
    key = _key(14)
    get_cache().get_or_build(key, _builder(14))
    before = COMPILE_STATS.snapshot()[0]
    with config.change_flags(compile_no_compile=True):
        fresh = ModuleCache(root)  # a new process on a warm cache
        assert _call(fresh.get_or_build(key, _builder(14))) == 98
        with pytest.raises(CompileError, match=r"compile_no_compile=True.*cache entry "
                                               r"[0-9a-f]+ is missing from the cache"):
            fresh.get_or_build(_key(15), _builder(15))
    assert COMPILE_STATS.snapshot()[0] == before
    assert list((root / "tmp").iterdir()) == []  # no empty build folder left


# ----------------------------------------------------------------------------- CLI

def test_cli(root, capsys):
    cache = get_cache()
    cache.get_or_build("ffff0001", _blob_builder(2000))
    cache.get_or_build(_key(16), _builder(16), parts={"source": _source(16)})
    assert symgraph_main(["cache", "list", "-v"]) == 0
    out = capsys.readouterr().out
    assert "2 entries" in out and "ffff0001" in out and "source:" in out
    assert symgraph_main(["cache"]) == 0
    assert "entries:       2" in capsys.readouterr().out
    assert symgraph_main(["cache", "--dir", str(root), "prune", "--max-mb", "0"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    cache.get_or_build("ffff0002", _blob_builder(10))
    assert symgraph_main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert cache.list_entries() == []


def test_cli_reports_an_unsafe_root(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    bad.chmod(0o777)
    assert symgraph_main(["cache", "--dir", str(bad), "stats"]) == 1
    assert "chmod go-w" in capsys.readouterr().err


def test_module_constants():
    assert cache_mod.LIB_NAME == "lib.so" and cache_mod.META_NAME == "meta.json"
