"""The convolution algorithm library: compiled once, shared by every conv kernel.

The algorithms of ``c_src/conv/`` (``sg_conv.h`` and its templates, for float
and double, with the bias/ReLU epilogue of ``sg_conv_fused.inc``) are several
seconds of gcc.  Rather than compile them into every kernel, they are built
into one shared library (``c_src/conv/sg_conv_library.c``), kept in the same
compile cache as the kernels (:class:`~symgraph.backends.native.cache.ModuleCache`,
so the usual locking, atomic placement, corruption checks and pruning apply)
and loaded with ctypes once per process.  Its BLAS pointers are set once, at
load.  The generated kernels include only ``conv/sg_conv_api.h`` and reach
the algorithms through its exported table ``sg_conv_algorithms``, whose
address they receive through ``CKernel.symbols`` (:data:`SYMBOLS`).

The key hashes what the library is made of and nothing else: the sources
(every file of ``c_src/conv``), the compiler and its flags (OpenMP included
when the ``openmp`` flag is on: two variants), the CPU (``-march=native``),
the cache format and the symgraph version.  Flags that change only kernels
(``floatX``, the ``dnn.conv`` flags) do not rebuild it.

:func:`prefetch` starts the build on a background thread as soon as a conv
kernel is generated, so that on a cold cache it overlaps the kernels' own
compile instead of following it.
"""

import ctypes
import functools
import hashlib
import threading

from symgraph.backends.native.assemble import C_SRC

__all__ = ["library_key", "load", "library_address", "prefetch", "sources_digest",
           "blas_threads", "SYMBOLS", "LIBRARY_VERSION"]

#: Bump when the way the library is built or set up changes in a way its
#: sources would not show.
LIBRARY_VERSION = "1"

_SOURCE = '#include "conv/sg_conv_library.c"\n'

_lock = threading.Lock()
_loaded = {}        # key -> (CDLL, address of sg_conv_algorithms, path of lib.so)
_present = set()    # (compile cache root, key) known to hold the library
_pending = {}       # key -> threading.Thread building it
_errors = {}        # key -> the exception of a background build


@functools.lru_cache(maxsize=1)
def sources_digest():
    """A hash of every file of ``c_src/conv`` (the algorithms and their API)."""
    digest = hashlib.sha256()
    for path in sorted((C_SRC / "conv").iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def _openmp():
    from symgraph.config import config

    return bool(config.openmp)


def _parts(openmp):
    from symgraph.version import __version__
    from symgraph.backends.cpu import compiler
    from symgraph.backends.native.cache_keys import CACHE_FORMAT

    return {"what": "conv algorithm library", "format": CACHE_FORMAT,
            "version": LIBRARY_VERSION, "sources": sources_digest(),
            "compiler": compiler.compiler_signature(),
            "flags": " ".join(compiler.base_flags(openmp)),
            "cpu": compiler.cpu_signature(), "symgraph": __version__}


def library_key(openmp=None):
    """The compile-cache key of the library (``openmp``: default the flag)."""
    from symgraph.backends.native.cache_keys import make_key

    return make_key(**_parts(_openmp() if openmp is None else openmp))


def _build(openmp):
    def build(tmp_dir):
        from symgraph.backends.cpu.compiler import compile_library

        compile_library(_SOURCE, tmp_dir / "lib.so", openmp=openmp,
                        what="the convolution algorithm library")
    return build


def _set_blas(lib):
    """Point the library's GEMM at SciPy's BLAS (else its plain loops run),
    through the thread library's wrappers (one BLAS thread inside the
    algorithms' own parallel loops: ``backends/native/threads.py``), and its
    team at the thread runtime's (one thread while backing off under load)."""
    from symgraph.backends.cpu.blas.support import blas_available, routine_address

    if blas_available():
        for name in ("sgemm", "dgemm"):
            ctypes.c_void_p.in_dll(lib, f"sg_conv_blas_{name}").value = routine_address(name)
    # the algorithms' parallel loops run on one thread while the calling thread
    # backs off under load, as symgraph's other loops do
    from symgraph.backends.native.threads import library as thread_library

    runtime = thread_library()
    if runtime is not None:
        ctypes.c_void_p.in_dll(lib, "sg_conv_region_team").value = ctypes.cast(
            runtime.sg_threads_region_team, ctypes.c_void_p).value


def load(openmp=None):
    """``(CDLL, address of sg_conv_algorithms)``, built and loaded once per
    process (per OpenMP variant)."""
    openmp = _openmp() if openmp is None else openmp
    key = library_key(openmp)
    with _lock:
        found = _loaded.get(key)
        pending = _pending.get(key)
    if found is not None:
        _ensure_cached(key, found[2])
        return found[:2]
    if pending is not None:
        pending.join()
        with _lock:
            _pending.pop(key, None)
            error = _errors.pop(key, None)
            found = _loaded.get(key)
        if found is not None:
            _ensure_cached(key, found[2])
            return found[:2]
        if error is not None:
            raise error
    return _load_now(openmp, key)[:2]


def _load_now(openmp, key):
    from symgraph.backends.native.cache import get_cache
    from symgraph.backends.native.prebuilt import Prebuilt

    cache = get_cache()
    if openmp:
        from symgraph.backends.cpu.compiler import prepare_openmp_environment

        prepare_openmp_environment()
    # never built at install: it follows the openmp flag, and most users never convolve
    lib = Prebuilt("the convolution algorithm library", key=lambda: key, build=_build(openmp),
                   parts=_parts(openmp)).cached()
    with _lock:
        if key not in _loaded:
            _set_blas(lib)
            set_parallel_min(lib)
            table = ctypes.addressof(ctypes.c_char.in_dll(lib, "sg_conv_algorithms"))
            _loaded[key] = (lib, table, lib._name)
            _present.add((str(cache.root), key))
        return _loaded[key]


def _ensure_cached(key, path):
    """Put the library this process loaded into the current compile cache too
    (a copy, not a compile), so that a compiledir this process used holds
    everything its functions need, as ``compile_no_compile`` expects of a warm
    cache, even when the library was loaded from another compiledir."""
    import shutil

    from symgraph.backends.native.cache import get_cache

    cache = get_cache()
    where = (str(cache.root), key)
    if where in _present:
        return
    cache.get_or_build(key, lambda tmp_dir: shutil.copyfile(path, tmp_dir / "lib.so"),
                       what="the convolution algorithm library")
    with _lock:
        _present.add(where)


def set_parallel_min(lib):
    """The library's parallel threshold (multiply-adds) from the
    ``openmp_conv_minsize`` flag: read when a conv kernel is linked."""
    from symgraph.config import config

    ctypes.c_int64.in_dll(lib, "sg_conv_parallel_min").value = int(config.openmp_conv_minsize)


def library_address():
    """The address of the library's ``sg_conv_algorithms`` (the kernels'
    ``sg_conv_lib``): what :data:`SYMBOLS` hands the linker."""
    lib, address = load()
    set_parallel_min(lib)
    return address


def prefetch():
    """Start building (or loading) the library on a background thread unless it
    is loaded or on its way; :func:`load` joins it.  Errors are kept for
    :func:`load` to raise on the caller's thread."""
    openmp = _openmp()
    try:
        key = library_key(openmp)
    except Exception:  # noqa: BLE001 - no compiler: load() will say so
        return
    with _lock:
        if key in _loaded or key in _pending:
            return

        def work():
            try:
                _load_now(openmp, key)
            except BaseException as exc:  # noqa: BLE001 - re-raised by load()
                with _lock:
                    _errors[key] = exc

        thread = threading.Thread(target=work, name="symgraph-conv-library", daemon=True)
        _pending[key] = thread
    thread.start()


#: CKernel.symbols of every conv kernel: the algorithm table.
SYMBOLS = (("sg_conv_lib", library_address),)


# -- threads ---------------------------------------------------------------------------

_BLAS_THREAD_FUNCTIONS = ("scipy_openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
                          "openblas_get_num_threads", "openblas_get_num_threads64_",
                          "MKL_Get_Max_Threads", "bli_thread_get_num_threads")


@functools.lru_cache(maxsize=1)
def _blas_thread_function():
    try:
        from scipy.linalg import cython_blas

        lib = ctypes.CDLL(cython_blas.__file__)
    except (ImportError, OSError):
        return None
    for name in _BLAS_THREAD_FUNCTIONS:
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_int, []
            return fn
    return None


def blas_threads():
    """The threads SciPy's BLAS uses now (it may change at run time, as
    threadpoolctl does), as a string for keys: a number, or 'unknown'."""
    fn = _blas_thread_function()
    if fn is None:
        return "unknown"
    try:
        return str(int(fn()))
    except Exception:  # noqa: BLE001
        return "unknown"
