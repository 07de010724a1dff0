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
import logging
import sysconfig

import numpy as np

from symgraph.backends.native.assemble import C_SRC

__all__ = ["load_runtime", "packaged_runtime", "runtime_source_hash", "RUNTIME_VERSION"]

_RUNTIME = None
#: Bump to rebuild the cached runtime when how it is built changes.
RUNTIME_VERSION = 1
#: The files the runtime is compiled from (setup.py hashes the same ones).
RUNTIME_SOURCES = ("runtime.c", "sg_kernel.h")
_log = logging.getLogger("symgraph.compile.runtime")


def runtime_source_hash(c_src=C_SRC):
    """sha256 of the runtime's sources, as setup.py embeds it in the extension."""
    digest = hashlib.sha256()
    for name in RUNTIME_SOURCES:
        digest.update(name.encode() + b"\0" + (c_src / name).read_bytes() + b"\0")
    return digest.hexdigest()


def packaged_runtime():
    """The runtime built at install time (``symgraph._runtime``), or None when it
    is missing, cannot be imported, or was built from other sources than
    ``c_src/`` holds now."""
    try:
        _runtime = importlib.import_module("symgraph._runtime")
    except ImportError as exc:
        _log.debug("no installed runtime extension (%s): building it in the cache", exc)
        return None
    try:
        current = runtime_source_hash()
    except OSError:
        return _runtime         # no c_src/ to compare with: the installed one is all there is
    if getattr(_runtime, "source_hash", None) != current:
        _log.info("the installed runtime extension %s is older than c_src/runtime.c; "
                  "building the current one in the compile cache (reinstall with "
                  "pip install -e . to avoid this)", getattr(_runtime, "__file__", _runtime))
        return None
    return _runtime


def _runtime_key():
    from symgraph.backends.native.cache import environment_parts, make_key

    return make_key(source=(C_SRC / "runtime.c").read_text(),
                    header=(C_SRC / "sg_kernel.h").read_text(),
                    python_include=sysconfig.get_paths()["include"], numpy_full=np.__version__,
                    version=str(RUNTIME_VERSION), **environment_parts())


def _cached_runtime():
    """The runtime compiled through the compile cache (built on first use)."""
    from symgraph.backends.native.cache import get_cache
    from symgraph.backends.cpu.compiler import compile_library

    source = (C_SRC / "runtime.c").read_text()

    def build(tmp_dir):
        compile_library(source, tmp_dir / "lib.so",
                        include_dirs=(sysconfig.get_paths()["include"], np.get_include()))

    def load_module(path):
        loader = importlib.machinery.ExtensionFileLoader("symgraph_runtime", path)
        spec = importlib.util.spec_from_file_location("symgraph_runtime", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module

    return get_cache().load(_runtime_key(), build, loader=load_module,
                            what="the native runtime")


def load_runtime():
    """The runtime extension module: the installed one when it is current, else
    the one built (once) in the compile cache."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = packaged_runtime() or _cached_runtime()
    return _RUNTIME
