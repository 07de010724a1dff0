"""The support library's source hash, recorded in the compile cache under the
stamp of symgraph's files: read back in later processes instead of generating
the library's text, never read for other sources, and a stale installed build
still refused."""

import ctypes
import importlib.util
import os
import time

import pytest

import symgraph
from symgraph.backends.cpu import support_lib
from symgraph.backends.cpu.compiler import cpu_signature
from symgraph.backends.native import source_stamp as stamps
from symgraph.backends.native.cache import get_cache
from symgraph.compile.warm_key import code_stamp

OLD = time.time_ns() - 3600 * 10**9   # files an hour old: a settled stamp


@pytest.fixture
def private(tmp_path, monkeypatch):
    """A compile cache of its own and a per-process memo emptied, so that each
    test sees what a new process sees."""
    monkeypatch.setattr(support_lib, "_CURRENT_HASH", {})
    with symgraph.config.change_flags(compiledir=str(tmp_path / "cache")):
        yield get_cache()


def _stamp(monkeypatch, digest, newest=OLD):
    monkeypatch.setattr(stamps, "source_stamp",
                        lambda: stamps.Stamp(digest, newest, time.time_ns()))


def _no_generation(monkeypatch):
    def refuse():
        raise AssertionError("the library's text was generated")

    monkeypatch.setattr(support_lib, "support_source_hash", refuse)


def test_the_current_hash_is_the_generated_one(private):
    assert support_lib.current_source_hash() == support_lib.support_source_hash()


def test_a_later_process_reads_the_hash_instead_of_generating(private, monkeypatch):
    _stamp(monkeypatch, "a" * 64)
    first = support_lib.current_source_hash()
    assert private.lookup(support_lib._hash_record_name("a" * 64)) == {"source_hash": first}
    monkeypatch.setattr(support_lib, "_CURRENT_HASH", {})     # a new process
    _no_generation(monkeypatch)
    assert support_lib.current_source_hash() == first
    assert support_lib._expected_build_id() == support_lib.build_id(first, cpu_signature())


def test_edited_sources_are_hashed_again_and_a_stale_install_is_refused(private, monkeypatch):
    spec = importlib.util.find_spec("symgraph._support")
    if spec is None:
        pytest.skip("no installed support library (pip install -e . builds it)")
    built = support_lib._installed_build_id(ctypes.CDLL(spec.origin))
    if built.split()[-1] != support_lib.build_id("x", cpu_signature()).split()[-1]:
        pytest.skip("the installed support library was built for another CPU")
    installed_hash = built.split()[1]
    # the sources as installed: their hash is recorded, the install is taken
    _stamp(monkeypatch, "b" * 64)
    monkeypatch.setattr(support_lib, "support_source_hash", lambda: installed_hash)
    assert support_lib.current_source_hash() == installed_hash
    assert support_lib.prebuilt().installed() is not None
    # an edit gives another stamp and another hash: the old record is not
    # taken for the new sources, and the install is refused
    monkeypatch.setattr(support_lib, "_CURRENT_HASH", {})
    _stamp(monkeypatch, "c" * 64)
    monkeypatch.setattr(support_lib, "support_source_hash", lambda: "e" * 64)
    assert support_lib.current_source_hash() == "e" * 64
    assert support_lib._expected_build_id().split()[1] == "e" * 64
    assert support_lib.prebuilt().installed() is None
    # and the sources as installed again (a revert): the install is taken again
    monkeypatch.setattr(support_lib, "_CURRENT_HASH", {})
    _stamp(monkeypatch, "b" * 64)
    _no_generation(monkeypatch)
    assert support_lib.prebuilt().installed() is not None


def test_a_fresh_stamp_records_nothing(private, monkeypatch):
    # a file modified a moment ago may change again within its mtime's tick
    _stamp(monkeypatch, "d" * 64, newest=time.time_ns())
    assert support_lib.current_source_hash() == support_lib.support_source_hash()
    assert private.lookup(support_lib._hash_record_name("d" * 64)) is None


def test_a_damaged_record_is_a_miss(private, monkeypatch):
    _stamp(monkeypatch, "f" * 64)
    private.record(support_lib._hash_record_name("f" * 64), {"source_hash": "not a hash"})
    assert support_lib.current_source_hash() == support_lib.support_source_hash()
    assert private.lookup(support_lib._hash_record_name("f" * 64)) == {
        "source_hash": support_lib.support_source_hash()}


def test_record_names_differ_by_checkout_and_stamp():
    name = support_lib._hash_record_name("1" * 64)
    assert name != support_lib._hash_record_name("2" * 64)
    assert os.path.dirname(os.path.abspath(symgraph.__file__)) in name


def test_stamp_follows_every_edit(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "notes.txt").write_text("ignored by suffix\n")
    folders = ((tmp_path, (".py",)),)
    first, newest = stamps.stamp_folders(folders)
    assert newest == max(os.stat(p).st_mtime_ns for p in (tmp_path / "a.py", tmp_path / "sub" / "b.py"))
    # a byte cache and a file of another suffix do not count
    (tmp_path / "__pycache__" / "a.pyc.py").write_text("z")
    (tmp_path / "notes.txt").write_text("changed\n")
    assert stamps.stamp_folders(folders)[0] == first
    # a content change that keeps the size still moves the mtime
    os.utime(tmp_path / "sub" / "b.py", ns=(newest + 10**6, newest + 10**6))
    second = stamps.stamp_folders(folders)[0]
    assert second != first
    (tmp_path / "c.py").write_text("")
    assert stamps.stamp_folders(folders)[0] not in (first, second)


def test_settled_needs_every_file_older_than_the_racy_window():
    now = time.time_ns()
    assert stamps.Stamp("x", now - int(3 * 1e9), now).settled
    assert not stamps.Stamp("x", now - int(0.5 * 1e9), now).settled


def test_warm_start_key_shares_the_stamp():
    assert code_stamp() == stamps.source_stamp().digest


def test_generated_files_written_before_are_not_generated_again(private, monkeypatch):
    monkeypatch.setattr(support_lib, "_DIRS", {})
    folder = support_lib.generated_dir()
    header = folder / "support" / "sg_support.h"
    assert header.read_text() == support_lib.generate()[0]
    # a new process: the files are there, checked by their hash, not regenerated
    monkeypatch.setattr(support_lib, "_DIRS", {})
    saved = support_lib.generate, support_lib._generated

    def refuse():
        raise AssertionError("generated again")

    # (the source hash stays known: the recorded one, as another test checks)
    monkeypatch.setattr(support_lib, "generate", refuse)
    monkeypatch.setattr(support_lib, "_generated", refuse)
    assert support_lib.generated_dir() == folder
    # a file damaged by hand is written anew
    monkeypatch.setattr(support_lib, "_DIRS", {})
    monkeypatch.setattr(support_lib, "generate", saved[0])
    monkeypatch.setattr(support_lib, "_generated", saved[1])
    header.write_text("/* damaged */\n")
    assert support_lib.generated_dir() == folder
    assert header.read_text() == support_lib.generate()[0]
