"""Packaging: the C sources ship inside the package, and an installed symgraph
reads its own copy.  (CI also builds a wheel, installs it into a fresh venv and
runs the demos and .ci/smoke_installed.py from outside the checkout.)"""

import importlib.util
from pathlib import Path

from symgraph.backends.native import c_sources

ROOT = Path(__file__).resolve().parents[2]


def _setup_module():
    spec = importlib.util.spec_from_file_location("_sg_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_c_source_ships():
    shipped = set(_setup_module().c_source_files())
    present = {p.relative_to(ROOT / "c_src").as_posix()
               for p in (ROOT / "c_src").rglob("*") if p.is_file()}
    assert shipped == present   # a new kind of file must be added to C_SOURCE_SUFFIXES
    assert {"sg_kernel.h", "runtime.c", "conv/sg_conv_library.c"} <= shipped


def test_sdist_manifest_carries_the_c_sources():
    manifest = (ROOT / "MANIFEST.in").read_text()
    assert "recursive-include c_src" in manifest
    for suffix in _setup_module().C_SOURCE_SUFFIXES:
        assert f"*{suffix}" in manifest


def test_the_package_copy_is_preferred(tmp_path, monkeypatch):
    package = tmp_path / "site" / "symgraph"
    (package / "c_src").mkdir(parents=True)
    (package / "c_src" / "sg_kernel.h").write_text("/* installed */")
    (tmp_path / "site" / "c_src").mkdir()   # a stray folder beside the package
    (tmp_path / "site" / "c_src" / "sg_kernel.h").write_text("/* stray */")
    monkeypatch.setattr(c_sources, "_PACKAGE", package)
    assert c_sources.find_c_src() == package / "c_src"


def test_a_checkout_uses_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(c_sources, "_PACKAGE", ROOT / "symgraph")
    assert c_sources.find_c_src() == ROOT / "c_src"
    assert c_sources.C_SRC.is_dir()
