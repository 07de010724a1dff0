"""Loading the native runtime (``c_src/runtime.c``).

The runtime is the one extension module that includes Python's and NumPy's
headers.  Installing symgraph (``pip install -e .``) compiles it once as
``symgraph._runtime`` (see ``setup.py``), so a process's first compiled
function does not wait for it.  Where that extension is missing (a checkout
used without installing) or was built from other sources than today's
``c_src/`` (runtime.c edited since the install), the runtime is compiled
through the compile cache instead, once per Python/NumPy/compiler
combination, and kept there like any other library.
"""

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sysconfig

import numpy as np

from symgraph.backends.native.assemble import C_SRC
from symgraph.backends.native.prebuilt import Prebuilt

__all__ = ["load_runtime", "runtime_source_hash", "RUNTIME_VERSION"]

_RUNTIME = None
#: Bump to rebuild the cached runtime when how it is built changes.
RUNTIME_VERSION = 1
#: The files the runtime is compiled from (setup.py hashes the same ones).
RUNTIME_SOURCES = ("runtime.c", "sg_kernel.h", "sg_allocator.h")


def runtime_source_hash(c_src=C_SRC):
    """sha256 of the runtime's sources, as setup.py embeds it in the extension."""
    digest = hashlib.sha256()
    for name in RUNTIME_SOURCES:
        digest.update(name.encode() + b"\0" + (c_src / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _runtime_key():
    from symgraph.backends.native.cache import environment_parts, make_key

    return make_key(source=(C_SRC / "runtime.c").read_text(),
                    headers="".join((C_SRC / name).read_text() for name in RUNTIME_SOURCES[1:]),
                    python_include=sysconfig.get_paths()["include"], numpy_full=np.__version__,
                    version=str(RUNTIME_VERSION), **environment_parts())


def _import_installed(path):
    """The extension setup.py built into the package (``path`` is where it is)."""
    return importlib.import_module("symgraph._runtime")


def _load_cached(path):
    """The extension the compile cache built, imported from ``path``."""
    loader = importlib.machinery.ExtensionFileLoader("symgraph_runtime", path)
    spec = importlib.util.spec_from_file_location("symgraph_runtime", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _build(tmp_dir):
    from symgraph.backends.cpu.compiler import compile_library

    compile_library((C_SRC / "runtime.c").read_text(), tmp_dir / "lib.so",
                    include_dirs=(sysconfig.get_paths()["include"], np.get_include()))


#: The runtime as a Prebuilt: the installed extension, or the cache's build.
PREBUILT = Prebuilt("the native runtime", key=_runtime_key, build=_build, loader=_load_cached,
                    installed="symgraph._runtime", open_installed=_import_installed,
                    build_id=lambda module: getattr(module, "source_hash", None),
                    expected_id=runtime_source_hash)


def load_runtime():
    """The runtime extension module: the installed one when it is current, else
    the one built (once) in the compile cache."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = PREBUILT.load()
    return _RUNTIME
