"""The C compiler wrapper: one gcc run turns generated C into a shared library.

Kernels are plain C (``c_src/sg_kernel.h``), so the compiler is the C
counterpart of the ``cxx`` flag: ``g++`` gives ``gcc`` (``g++-12`` gives
``gcc-12``, ``clang++`` gives ``clang``, ``c++`` gives ``cc``), taken from the
same folder when ``cxx`` is a path; when that is not found, ``gcc`` and then
``cc`` on ``PATH``.  An empty ``cxx`` means "no C code", and compiling is then
an error.

Flags: ``-O2 -march=native`` (and, for GCC, ``-fvect-cost-model=dynamic
-fpeel-loops``) with the individual IEEE-safe parts of ``-ffast-math`` that
pay (no ``errno`` from math functions, no trapping), but never
``-ffast-math`` itself: it assumes no NaN or Inf, which breaks ``isnan``,
``isinf`` and NaN propagation that users rely on.  ``config.gcc.cxxflags`` is
appended, so a user can add (or override) flags (``-O3`` among them).

Why not ``-O3``: the compiler is most of a function's cold compile time, and
``-O3`` costs about 40% more compiler time than this set (GCC 12, the MLP
training step's library: 100 kB of C, 23 kernels and their support code)
without making the kernels faster (element-wise, reductions, softmax, BLAS
wrappers, the whole MLP step; one float64 row maximum was 3 times slower at
``-O3``).  Of ``-O3``'s options, two matter for speed: the vectorizer's
dynamic cost model (plain ``-O2`` only vectorizes loops that need no scalar
epilogue, which left ``expf``/``tanhf`` loops scalar: an element-wise kernel
on 1e6 elements was 50 times slower) and loop peeling (without it the fixed
lane-accumulator loops of reductions and softmax keep their lanes in memory:
maximum and softmax were 15 to 25% slower); they add about 20% to ``-O2``'s
compile time.  Loop unswitching, splitting, distribution, function cloning
for constants and larger inlining, the rest of ``-O3``, mostly grow the
support code that every library carries.

The C sources that generated code includes live in ``c_src/`` at the
repository root and ship inside the package when installed (``c_sources``).
"""

import contextlib
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path

__all__ = [
    "CompileError", "compile_library", "compiler_command", "compiler_signature",
    "cpu_signature", "base_flags", "c_src_dir", "describing", "COMPILE_STATS",
    "CompileStats",
]

#: Flags every library is compiled with (see the module docstring for why).
BASE_FLAGS = (
    "-O2", "-march=native", "-fPIC", "-shared", "-std=gnu11",
    "-fno-math-errno", "-fno-trapping-math", "-fno-semantic-interposition",
    # No fused multiply-add contraction: fused code must round as NumPy does.
    "-ffp-contract=off",
    "-Wno-unused-function",
)

#: Added after BASE_FLAGS for GCC (not clang, which vectorizes at -O2 already):
#: the two -O3 options that make the kernels as fast as -O3 does (see the
#: module docstring), without -O3's other, costly ones.
GCC_FLAGS = ("-fvect-cost-model=dynamic", "-fpeel-loops")

#: Lines of the compiler's stderr kept in a CompileError.
STDERR_LINES = 60


class CompileError(RuntimeError):
    """The C compiler failed (or compiling is disabled by ``compile_no_compile``).

    ``stderr``: the compiler's messages (first lines), ``source_path``: the C file
    kept for inspection (None when nothing was compiled), ``command``: the argv run.
    """

    def __init__(self, message, stderr="", source_path=None, command=None):
        super().__init__(message)
        self.stderr = stderr
        self.source_path = source_path
        self.command = command


class CompileStats:
    """How many libraries this process compiled and how long the compiler took:
    the "compiler" phase of a compile-time profile.  Thread safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self.count = 0
        self.seconds = 0.0

    def record(self, seconds):
        """Add one compile of ``seconds``."""
        with self._lock:
            self.count += 1
            self.seconds += seconds

    def snapshot(self):
        """``(count, seconds)`` read together."""
        with self._lock:
            return self.count, self.seconds

    def reset(self):
        """Zero the counters (tests and profiles measuring one phase)."""
        with self._lock:
            self.count = 0
            self.seconds = 0.0

    def __repr__(self):
        count, seconds = self.snapshot()
        return f"<CompileStats: {count} compiles, {seconds:.3f} s>"


#: This process's compile counters.
COMPILE_STATS = CompileStats()

# the name a C++ driver's C counterpart has, by the C++ driver's basename suffix
_CXX_TO_C = (("clang++", "clang"), ("g++", "gcc"), ("c++", "cc"))

_signatures = {}            # resolved compiler path -> signature
_signature_lock = threading.Lock()
_cpu_signature = None
_building = threading.local()   # .what: what the cache is building (for errors)


def _c_driver_for(cxx):
    """The C driver matching the C++ driver ``cxx`` (a name or a path), or None."""
    folder, name = os.path.split(cxx)
    for cxx_name, c_name in _CXX_TO_C:
        idx = name.rfind(cxx_name)
        if idx >= 0:
            # keep a target prefix and a version suffix: x86_64-linux-gnu-g++-12
            candidate = name[:idx] + c_name + name[idx + len(cxx_name):]
            found = shutil.which(os.path.join(folder, candidate) if folder else candidate)
            if found:
                return found
    return None


def compiler_command():
    """The argv prefix of the C compiler to run: launcher words of ``cxx`` (a
    ``ccache``, say) kept, its last word mapped to the C driver.  Raises
    CompileError when ``cxx`` is empty or no C compiler is found."""
    from symgraph.config import config

    words = shlex.split(config.cxx)
    if not words:
        raise CompileError("no C compiler: the cxx flag is empty (Python-only "
                           "configuration); set cxx=g++ to compile native code")
    driver = _c_driver_for(words[-1]) or shutil.which("gcc") or shutil.which("cc")
    if driver is None:
        raise CompileError(f"no C compiler: neither the C counterpart of cxx="
                           f"{config.cxx!r} nor gcc or cc was found on PATH")
    return words[:-1] + [os.path.realpath(driver)]


def compiler_signature():
    """A string naming the C compiler: its resolved path and the first line of
    ``--version``.  Part of every cache key; computed once per compiler and process."""
    command = compiler_command()
    path = command[-1]
    with _signature_lock:
        if path not in _signatures:
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=60).stdout
                version = (out.splitlines() or ["unknown version"])[0].strip()
            except (OSError, subprocess.SubprocessError) as exc:
                version = f"unknown version ({exc})"
            _signatures[path] = f"{path}: {version}"
        return _signatures[path]


def cpu_signature():
    """The CPU model and a hash of its feature flags (from /proc/cpuinfo), since
    ``-march=native`` code may not run on another CPU; ``platform.machine()``
    where /proc/cpuinfo is missing."""
    global _cpu_signature
    if _cpu_signature is None:
        model = flags = ""
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    key, _, value = line.partition(":")
                    key = key.strip()
                    if key in ("model name", "Processor", "cpu model") and not model:
                        model = value.strip()
                    elif key in ("flags", "Features") and not flags:
                        flags = " ".join(sorted(value.split()))
                    if model and flags:
                        break
        except OSError:
            pass
        digest = hashlib.sha256(flags.encode()).hexdigest()[:16] if flags else "noflags"
        _cpu_signature = f"{platform.machine()} {model or 'unknown'} flags:{digest}"
    return _cpu_signature


def c_src_dir():
    """The folder of symgraph's C sources (see ``c_sources``)."""
    from symgraph.backends.native.c_sources import C_SRC

    if not (C_SRC / "sg_kernel.h").is_file():
        raise CompileError(f"symgraph's C sources were not found at {C_SRC}: the "
                           "installation is incomplete; reinstall symgraph")
    return C_SRC


@functools.lru_cache(maxsize=None)
def mvec_available():
    """True where glibc's vector math library (libmvec) can be linked."""
    import ctypes.util
    import platform

    return platform.machine() in ("x86_64", "AMD64") and \
        ctypes.util.find_library("mvec") is not None


def _is_clang():
    """True when the C compiler is clang (GCC-only options are then left out)."""
    try:
        return "clang" in compiler_signature().lower()
    except CompileError:
        return False


def base_flags(openmp=False, clang=None):
    """The compiler flags (a tuple) for a library, without include folders:
    what the cache key must hash.  ``clang`` (default: asked of the compiler)
    says whether the compiler is clang."""
    from symgraph.config import config

    flags = list(BASE_FLAGS)
    if not (_is_clang() if clang is None else clang):
        flags += GCC_FLAGS
    if mvec_available():
        # glibc's vector math library: kernels declare its SIMD variants of
        # expf, tanhf, ... under SG_USE_MVEC (math.h only does so with -ffast-math).
        flags.append("-DSG_USE_MVEC")
    if openmp and config.openmp:
        flags.append("-fopenmp")
    flags += shlex.split(config.gcc.cxxflags)
    return tuple(flags)


@contextlib.contextmanager
def describing(what):
    """Within the block, a ``compile_no_compile`` error on this thread names ``what``
    (the cache sets it to the entry being built)."""
    previous = getattr(_building, "what", None)
    _building.what = what
    try:
        yield
    finally:
        _building.what = previous


def _disabled_error(out_path, what):
    what = what or getattr(_building, "what", None) or f"the library {out_path}"
    return CompileError(f"compilation is disabled (compile_no_compile=True) but {what} "
                        "is missing from the cache")


def compile_library(source, out_path, *, openmp=False, include_dirs=(), extra_flags=(),
                    what=None):
    """Compile C ``source`` into the shared library ``out_path``.

    The source is written beside ``out_path`` (same name, ``.c``) and kept there, so
    a failing build can be inspected.  ``openmp`` adds ``-fopenmp`` when the openmp
    flag is on too; ``include_dirs`` come after ``c_src/`` and the generated support
    header's folder; ``extra_flags`` come
    after the source file (libraries to link: ``-lmvec``).  ``what`` names the
    library in the ``compile_no_compile`` error.  Raises CompileError.
    """
    from symgraph.config import config

    out_path = Path(out_path)
    if config.compile_no_compile:
        raise _disabled_error(out_path, what)
    source_path = out_path.with_suffix(".c")
    source_path.write_text(source, encoding="utf-8")
    command = compiler_command()
    command += list(base_flags(openmp))
    command += ["-I", str(c_src_dir())]
    # The generated support header ("support/sg_support.h", support_lib.py).
    from symgraph.backends.cpu.support_lib import generated_dir

    command += ["-I", str(generated_dir())]
    for folder in include_dirs:
        command += ["-I", str(folder)]
    libraries = ["-lmvec"] if mvec_available() else []
    command += ["-o", str(out_path), str(source_path), *extra_flags, *libraries, "-lm"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace",
                              cwd=str(out_path.parent))
    except OSError as exc:
        raise CompileError(f"cannot run the C compiler {command[0]}: {exc}",
                           source_path=str(source_path), command=command) from None
    finally:
        COMPILE_STATS.record(time.perf_counter() - start)
    if proc.returncode != 0:
        lines = proc.stderr.splitlines()
        stderr = "\n".join(lines[:STDERR_LINES])
        if len(lines) > STDERR_LINES:
            stderr += f"\n... ({len(lines) - STDERR_LINES} more lines)"
        raise CompileError(
            f"C compilation failed (exit status {proc.returncode}); the source is kept "
            f"at {source_path}\ncommand: {shlex.join(command)}\n{stderr}",
            stderr=stderr, source_path=str(source_path), command=command)
    if not out_path.is_file():
        raise CompileError(f"the C compiler exited 0 but wrote no {out_path}",
                           stderr=proc.stderr, source_path=str(source_path),
                           command=command)


def prepare_openmp_environment():
    """Call before loading a library compiled with OpenMP: unless the user chose
    otherwise, OpenMP's threads spin only briefly before they sleep
    (``GOMP_SPINCOUNT``) and their number respects a cgroup CPU quota
    (``backends/native/threads.prepare_openmp_runtime``, ``docs/threads.md``).

    libgomp reads its environment once, when it is loaded.  By default its
    threads spin for milliseconds after each parallel region; so do OpenBLAS's
    after each BLAS call.  A training step alternates the two (fused loops, then
    a GEMM), and on a machine with few cores each pool's spinning threads take
    the cores the other needs: the 2-thread convnet step measured 21 ms with
    spinning threads, 11 ms with passive ones, 10.5 ms on one thread.
    """
    from symgraph.backends.native.threads import prepare_openmp_runtime

    prepare_openmp_runtime()
