"""How many threads symgraph runs, and the one policy for its OpenMP team and
the BLAS pool (``docs/threads.md``).

**How many.**  With the ``openmp`` flag off, one.  With it on (the default):
``OMP_NUM_THREADS`` when the user set it (its first value), else the cores
this process may use: the CPUs of its affinity mask (``sched_getaffinity``,
what ``taskset`` and container cpusets give), fewer when a cgroup CPU quota
(``cpu.max`` of cgroup v2, ``cpu.cfs_quota_us`` of v1, rounded up) allows
less.  libgomp counts the affinity mask itself; when the quota is lower,
``OMP_NUM_THREADS`` is set to the count before libgomp is loaded (so that
processes started from this one, in the same cgroup, count the same).

**Waiting.**  libgomp's threads spin after each parallel region before they
sleep, by default for 300,000 rounds (milliseconds): a spinning thread takes
the core that a descheduled peer, another process or the BLAS pool needs.
Sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) makes every parallel region
pay a wake-up instead, 30 to 55 µs on the 2-core development VM, more than a
whole element-wise kernel of 1e5 elements.  Unless the user set
``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``, symgraph sets ``GOMP_SPINCOUNT``
to :data:`SPIN_COUNT` before libgomp is loaded (libgomp reads its environment
once, when it is loaded): a waiting thread spins about 25 µs, enough to
catch the next kernel of a step, far below the scheduler's time slice, then
sleeps.

**The BLAS pool.**  A BLAS routine called by a symgraph kernel runs on one
BLAS thread; a large matrix product is cut into blocks that symgraph's
OpenMP team shares out with a dynamic schedule (``c_src/cpu/threads``).  The
BLAS library's own thread count (OpenBLAS of SciPy, found from the address of
its ``dgemm``) is lowered to one while a symgraph BLAS call runs and restored
after, so the program's own SciPy calls keep their pool; that pool is capped
at symgraph's count unless the user set its size (``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` ...).  With the ``openmp`` flag off, symgraph's BLAS
calls run on one thread too.  A split product that waited at its end for a
descheduled thread makes the next products run unsplit for a back-off.
"""

import ctypes
import logging
import math
import os
import threading
from pathlib import Path

__all__ = ["available_cores", "affinity_cores", "cgroup_cpu_limit", "env_threads",
           "thread_count", "prepare_openmp_runtime", "routine_address", "prefetch",
           "sync_enabled", "blas_thread_control", "describe", "GEMM_MIN", "GEMM_GRAIN",
           "SPIN_COUNT"]

_log = logging.getLogger("symgraph.compile.threads")

#: libgomp's spin rounds before a waiting thread sleeps (``GOMP_SPINCOUNT``):
#: about 25 µs on the development machine (a round is a ``pause``); a region
#: that follows within that time starts in about 1 µs instead of 30 to 55.
SPIN_COUNT = 1000

#: Smallest product (m * n * k multiply-adds) that symgraph splits over its
#: threads.  Measured on the 2-core AMD EPYC development machine (float32,
#: OpenBLAS 0.3.30 SkylakeX kernels, docs/threads.md): 2 threads first beat
#: one at about 2**19 (0.6x at 2**20, 128x512x16 is 1.0x); below that the wake-up of the
#: second thread costs more than its half.
GEMM_MIN = 1 << 19
#: Rows (or columns) of the result per block at least: each block packs the
#: other operand again, which costs about a block of 32 rows' worth of work.
GEMM_GRAIN = 64

# Variables by which a user sizes the BLAS pool (OpenBLAS reads them in this order).
_BLAS_ENV = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS",
             "OPENBLAS_DEFAULT_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
# (get, set) thread-count functions of the BLAS libraries symgraph knows.
_BLAS_CONTROLS = (
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("bli_thread_get_num_threads", "bli_thread_set_num_threads"),
    ("MKL_Get_Max_Threads", "MKL_Set_Num_Threads"),
)

#: The BLAS routines symgraph's kernels call, each through a wrapper.
ROUTINES = tuple(p + r for p in "sd" for r in ("gemm", "gemv", "dot", "ger"))
#: Guards _state; held only for a moment, so prefetch() never waits behind a
#: compile (the loader holds _load_lock while it builds the library).
_lock = threading.Lock()
_load_lock = threading.Lock()
_state = {"lib": None, "tried": False, "pending": None, "blas": None}


# -- how many threads ---------------------------------------------------------------------

def affinity_cores():
    """The number of CPUs this process may run on (its affinity mask)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cgroup_dirs(root, cgroup_file):
    """(version, folder) of each cgroup of this process, innermost first, then
    its ancestors up to ``root``."""
    found = []
    try:
        lines = Path(cgroup_file).read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            base, version = Path(root), 2
            if (base / "unified").is_dir() and not (base / "cgroup.controllers").exists():
                base = base / "unified"
        elif "cpu" in controllers.split(","):
            base, version = Path(root) / "cpu", 1
            if not base.is_dir():
                base = Path(root) / controllers
        else:
            continue
        rel = Path(path.lstrip("/"))
        while True:
            found.append((version, base / rel))
            if rel == Path("") or str(rel) == ".":
                break
            rel = rel.parent
    return found


def cgroup_cpu_limit(root="/sys/fs/cgroup", cgroup_file="/proc/self/cgroup"):
    """The CPU quota of this process's cgroups in cores (a float), the smallest
    along the hierarchy, or None when there is none."""
    limit = None
    for version, folder in _cgroup_dirs(root, cgroup_file):
        try:
            if version == 2:
                quota, _, period = (folder / "cpu.max").read_text().strip().partition(" ")
                if quota == "max":
                    continue
                cores = int(quota) / int(period or 100000)
            else:
                quota = int((folder / "cpu.cfs_quota_us").read_text())
                period = int((folder / "cpu.cfs_period_us").read_text())
                if quota <= 0 or period <= 0:
                    continue
                cores = quota / period
        except (OSError, ValueError):
            continue
        if cores > 0 and (limit is None or cores < limit):
            limit = cores
    return limit


def available_cores():
    """The cores this process is given: its affinity mask, fewer when a cgroup
    CPU quota allows less (rounded up: a quota of 1.5 cores runs 2 threads)."""
    cores = affinity_cores()
    quota = cgroup_cpu_limit()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota - 1e-9)))
    return cores


def env_threads(environ=None):
    """The thread count ``OMP_NUM_THREADS`` asks for (its first value), or None."""
    text = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "")
    try:
        value = int(text.split(",")[0].strip())
    except ValueError:
        return None
    return value if value > 0 else None


def thread_count(openmp=None):
    """Threads symgraph runs: 1 with the ``openmp`` flag off, else
    ``OMP_NUM_THREADS`` when set, else :func:`available_cores`."""
    if openmp is None:
        from symgraph.config import config

        openmp = bool(config.openmp)
    if not openmp:
        return 1
    return env_threads() or available_cores()


# -- the OpenMP runtime's environment --------------------------------------------------------

def _gomp_loaded():
    """True when libgomp is already loaded (its environment was read then)."""
    try:
        ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    return True


def prepare_openmp_runtime(environ=None):
    """Set libgomp's environment before it is loaded, leaving what the user set:
    idle threads spin briefly, then sleep (``GOMP_SPINCOUNT`` :data:`SPIN_COUNT`,
    unless ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set), and
    ``OMP_NUM_THREADS`` is the cgroup's quota when that is below the affinity
    mask (unless set)."""
    env = os.environ if environ is None else environ
    if "GOMP_SPINCOUNT" not in env and "OMP_WAIT_POLICY" not in env:
        env["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    if "OMP_NUM_THREADS" not in env:
        cores = available_cores()
        if cores < affinity_cores():
            env["OMP_NUM_THREADS"] = str(cores)
            if environ is None:
                _state["ours"] = env["OMP_NUM_THREADS"]
    if environ is None and _gomp_loaded() and not _state.get("warned"):
        _state["warned"] = True
        _log.debug("libgomp was loaded before symgraph set its environment; "
                   "its wait policy and thread count are what it found then")


# -- the BLAS library's thread count ------------------------------------------------------------

class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _library_of(address):
    """The path of the loaded shared library holding ``address``, or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def blas_thread_control():
    """(get, set) addresses of the thread-count functions of the BLAS library
    symgraph calls (the one holding SciPy's ``dgemm``), or None."""
    if _state["blas"] is not None:
        return _state["blas"] or None
    found = ()
    try:
        from symgraph.backends.cpu.blas.support import blas_address, blas_available

        path = _library_of(blas_address("dgemm")) if blas_available() else None
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY) if path else None
    except OSError:
        lib = None
    for get_name, set_name in _BLAS_CONTROLS if lib is not None else ():
        try:
            get_fn, set_fn = getattr(lib, get_name), getattr(lib, set_name)
        except AttributeError:
            continue
        found = (ctypes.cast(get_fn, ctypes.c_void_p).value,
                 ctypes.cast(set_fn, ctypes.c_void_p).value)
        break
    _state["blas"] = found
    return found or None


def _cap_blas_pool(control, count):
    """Lower the BLAS pool to ``count`` threads unless the user sized it."""
    user = [name for name in _BLAS_ENV if name in os.environ]
    if user and not (user == ["OMP_NUM_THREADS"] and
                     os.environ["OMP_NUM_THREADS"] == _state.get("ours")):
        return                          # sized by the user (symgraph's own setting aside)
    get_fn = ctypes.CFUNCTYPE(ctypes.c_int)(control[0])
    set_fn = ctypes.CFUNCTYPE(None, ctypes.c_int)(control[1])
    if get_fn() > count:
        set_fn(count)


# -- the thread library (c_src/cpu/threads) -------------------------------------------------------

def _load():
    """The thread library (the shared support library, which holds it: built at
    install, else once into the compile cache) set up; None when it cannot be
    (no compiler, compiling disabled): BLAS is then called directly."""
    from symgraph.backends.cpu.blas.support import blas_address, blas_available
    from symgraph.backends.cpu.support_lib import load_support

    if not blas_available():
        return None
    prepare_openmp_runtime()
    lib = load_support()
    for name in ROUTINES:
        ctypes.c_void_p.in_dll(lib, f"sg_threads_real_{name}").value = blas_address(name)
    ctypes.c_int64.in_dll(lib, "sg_threads_gemm_min").value = GEMM_MIN
    ctypes.c_int64.in_dll(lib, "sg_threads_gemm_grain").value = GEMM_GRAIN
    control = blas_thread_control()
    if control:
        _cap_blas_pool(control, thread_count(True))
        ctypes.c_void_p.in_dll(lib, "sg_threads_blas_get").value = control[0]
        ctypes.c_void_p.in_dll(lib, "sg_threads_blas_set").value = control[1]
    _sync(lib)
    return lib


def library():
    """The loaded thread library, or None (see :func:`_load`)."""
    with _lock:
        if _state["tried"]:
            return _state["lib"]
        pending = _state["pending"]
    if pending is not None and pending is not threading.current_thread():
        pending.join()
    with _load_lock:
        with _lock:
            if _state["tried"]:
                return _state["lib"]
        try:
            lib = _load()
        except Exception as exc:  # noqa: BLE001 - BLAS is then called directly
            _log.info("symgraph's thread library is not available (%s): BLAS "
                      "routines are called directly", exc)
            lib = None
        with _lock:
            _state["lib"], _state["tried"] = lib, True
        return lib


def prefetch():
    """Build (or load) the thread library on a background thread, so that on a
    cold cache its compile overlaps the kernels' own."""
    with _lock:
        if _state["tried"] or _state["pending"] is not None:
            return
        thread = threading.Thread(target=library, name="symgraph-threads", daemon=True)
        # Started under the lock: another thread that finds it pending joins it,
        # and joining a thread not yet started raises.  (start() returns once
        # the thread runs; it builds under _load_lock, not this one.)
        thread.start()
        _state["pending"] = thread


def _sync(lib):
    from symgraph.config import config

    ctypes.c_int.in_dll(lib, "sg_threads_enabled").value = int(bool(config.openmp))


def sync_enabled():
    """Tell the thread library whether the ``openmp`` flag is on now (called
    when a kernel library is loaded): off, symgraph's products run on one thread."""
    lib = _state["lib"]
    if lib is not None:
        _sync(lib)


def routine_address(name):
    """The address to call for BLAS routine ``name`` (one of :data:`ROUTINES`):
    the thread library's wrapper, or SciPy's routine when it is unavailable."""
    from symgraph.backends.cpu.blas.support import blas_address

    lib = library()
    if lib is None or name not in ROUTINES:
        return blas_address(name)
    return ctypes.cast(getattr(lib, f"sg_threads_{name}"), ctypes.c_void_p).value


def describe():
    """What the policy gives in this process (for docs and bug reports)."""
    control = blas_thread_control()
    blas = None
    if control:
        blas = ctypes.CFUNCTYPE(ctypes.c_int)(control[0])()
    return {"threads": thread_count(), "affinity": affinity_cores(),
            "cgroup_quota": cgroup_cpu_limit(), "OMP_NUM_THREADS": os.environ.get(
                "OMP_NUM_THREADS"), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
            "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT"), "blas_pool": blas,
            "thread_library": _state["lib"] is not None}
