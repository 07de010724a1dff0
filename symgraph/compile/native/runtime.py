"""Building and loading the native runtime (``c_src/runtime.c``).

The runtime is the one extension module that includes Python's and NumPy's
headers; it is compiled once per Python/NumPy/compiler combination and kept in
the compile cache like any other library.
"""

import importlib.machinery
import importlib.util
import sysconfig

import numpy as np

from symgraph.compile.native.assemble import C_SRC

_RUNTIME = None
RUNTIME_VERSION = 1


def _runtime_key():
    from symgraph.compile.native.cache import environment_parts, make_key

    return make_key(source=(C_SRC / "runtime.c").read_text(),
                    header=(C_SRC / "sg_kernel.h").read_text(),
                    python_include=sysconfig.get_paths()["include"], numpy_full=np.__version__,
                    version=str(RUNTIME_VERSION), **environment_parts())


def load_runtime():
    """The runtime extension module (built on first use, then cached)."""
    global _RUNTIME
    if _RUNTIME is not None:
        return _RUNTIME
    from symgraph.compile.native.cache import get_cache
    from symgraph.compile.native.compiler import compile_library

    source = (C_SRC / "runtime.c").read_text()

    def build(tmp_dir):
        compile_library(source, tmp_dir / "lib.so",
                        include_dirs=(sysconfig.get_paths()["include"], np.get_include()))

    path = get_cache().get_or_build(_runtime_key(), build)
    loader = importlib.machinery.ExtensionFileLoader("symgraph_runtime", str(path))
    spec = importlib.util.spec_from_file_location("symgraph_runtime", str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    _RUNTIME = module
    return module
