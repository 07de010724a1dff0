"""Build script: everything is declared in setup.cfg, except the native libraries.

The runtime (``c_src/runtime.c``, the one C file that includes Python's and
NumPy's headers) is compiled here, once, as the extension ``symgraph._runtime``
(``pip install -e .`` builds it too), so that no process pays for it on its
first compiled function.  ``symgraph/backends/native/runtime.py`` loads it, and
builds the runtime through the compile cache instead when this extension is
missing (a checkout run without installing) or older than ``c_src/`` (its
``source_hash`` differs from :func:`runtime_source_hash`).

The shared support library (``sg_support.c``, generated into ``build/``: the helpers that
kernels call through a table, see ``symgraph/backends/cpu/support_lib.py``)
is built here too, as ``symgraph._support``, with the kernels' own flags
(``-march=native`` among them); it embeds the hash of its sources and of the
CPU it was built for, and ``support_lib`` builds it into the compile cache
instead when either differs.  Its flags and hashes come from symgraph's own
modules, loaded by path (they import only the standard library at the top).
"""

import hashlib
import sys
import importlib.util
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: The files the runtime is compiled from: their hash is embedded in the build.
RUNTIME_SOURCES = ("runtime.c", "sg_kernel.h", "sg_allocator.h")


def runtime_source_hash(c_src=ROOT / "c_src"):
    """sha256 of the runtime's sources (the same as ``runtime.runtime_source_hash``)."""
    digest = hashlib.sha256()
    for name in RUNTIME_SOURCES:
        digest.update(name.encode() + b"\0" + (Path(c_src) / name).read_bytes() + b"\0")
    return digest.hexdigest()


def runtime_extension():
    """The setuptools Extension of ``symgraph._runtime``."""
    import numpy
    from setuptools import Extension

    return Extension(
        "symgraph._runtime", ["c_src/runtime.c"],
        include_dirs=[numpy.get_include(), "c_src"],
        define_macros=[("SG_RUNTIME_PACKAGED", "1"),
                       ("SG_RUNTIME_SOURCE_HASH", '"%s"' % runtime_source_hash())])


def _load(name, relative):
    """A module of the symgraph package loaded from its file, without importing
    the package (whose dependencies may not be installed yet)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def support_extension():
    """The setuptools Extension of ``symgraph._support`` (a plain C library
    loaded with ctypes: it has no Python module init)."""
    from setuptools import Extension

    # generate() reads the codegen modules: the source tree must be importable
    # (an isolated build does not put it on sys.path).
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    compiler = _load("_sg_setup_compiler", "symgraph/backends/cpu/compiler.py")
    support = _load("_sg_setup_support", "symgraph/backends/cpu/support_lib.py")
    flags = [f for f in compiler.BASE_FLAGS if f not in ("-shared", "-fPIC")]
    if "clang" not in (sysconfig.get_config_var("CC") or ""):
        flags += list(compiler.GCC_FLAGS)
    macros = [("SG_SUPPORT_SOURCE_HASH", '"%s"' % support.build_id(
        support.support_source_hash(), compiler.cpu_signature()))]
    libraries = ["m"]
    if compiler.mvec_available():
        macros.append(("SG_USE_MVEC", "1"))
        libraries.insert(0, "mvec")
    # Generated from the codegen modules, never checked in: written into the
    # build folder, compiled from there.
    generated = support.write_files(ROOT / "build" / "sg_support")
    return Extension(
        "symgraph._support", [str((generated / "sg_support.c").relative_to(ROOT))],
        include_dirs=["c_src", str(generated.relative_to(ROOT))], define_macros=macros,
        # OpenMP: the element-wise loop driver shares kernels' loops out
        extra_compile_args=flags + ["-fopenmp"], extra_link_args=["-fopenmp"],
        libraries=libraries)


#: Suffixes of the files of ``c_src/`` that ship in the package: what kernels
#: include and what symgraph compiles at run time.
C_SOURCE_SUFFIXES = (".h", ".inc", ".c", ".cu")


def c_source_files():
    """The files of ``c_src/`` that ship, relative to ``c_src/``."""
    base = ROOT / "c_src"
    return sorted(path.relative_to(base).as_posix() for path in base.rglob("*")
                  if path.is_file() and path.suffix in C_SOURCE_SUFFIXES)


def build_py_with_c_sources():
    """setuptools' build_py, which also copies ``c_src/`` into the built package
    as ``symgraph/c_src`` (package data mapped at build: the folder stays at the
    repository's top level, and ``symgraph.backends.native.c_sources`` finds the
    copy in a wheel or an sdist install)."""
    from setuptools.command.build_py import build_py

    class BuildPy(build_py):
        def run(self):
            super().run()
            if self.editable_mode:   # the checkout's own c_src/ is used
                return
            for name in c_source_files():
                target = Path(self.build_lib) / "symgraph" / "c_src" / name
                self.mkpath(str(target.parent))
                self.copy_file(str(ROOT / "c_src" / name), str(target))

    return BuildPy


if __name__ == "__main__":
    from setuptools import setup

    setup(ext_modules=[runtime_extension(), support_extension()],
          cmdclass={"build_py": build_py_with_c_sources()})
