"""The convolution algorithm choices: a process registry and a tuning cache on disk.

The C kernels of the concrete convolution ops (``ops/conv_algorithms.py``, code from
``conv_codegen.py``, choice logic in ``c_src/conv/sg_conv_choose.h``) pick an
algorithm on the first call with a geometry (or once, for the ``*_once`` flag
values).  They tell Python what they chose through two C function pointers
that the linker sets after loading the library (``CKernel.symbols``); the
ctypes callbacks behind them live here, kept alive for the process:

* ``lookup(shape_key) -> impl or -1``: the tuning cache's answer for a key,
  asked before timing;
* ``record(op_key, shape_key, impl, source, times, n)``: a choice made (and,
  for a timing, every candidate's time in seconds, -1 when not timed).

The **registry** keeps every choice of this process by op and shape, with its
source ('flag', 'fallback', 'guess', 'timing', 'tuning cache') and times, and
counts the timings run: debugprint shows a node's choices from it
(:func:`describe`), tests check that ``time_once`` times once.

The **tuning cache** (``<compiledir>/tuning/``) holds one small JSON file per
key, named by a hash over the kernel's shape key (direction, compute type,
geometry, candidate set, workspace limit, epilogue, the algorithm library's
OpenMP threads: built in C), the BLAS threads at the time of the timing, the
CPU, the symgraph version and the algorithms' sources.  Times measured on one
thread say nothing of two, hence the thread counts.  A file is written to a
temporary name and renamed into place, so a reader sees a whole file or none
and concurrent writers are safe (the last rename wins, and both wrote a valid
answer); a file that does not parse, or whose recorded key differs, is a miss
and gets rewritten.

**Disturbed timings are not kept for later processes.**  The kernel measures
how much CPU the process got while it timed (process CPU seconds over wall
seconds, over all candidates' runs).  Below :data:`MIN_CPU_SHARE` the runs
mostly waited for a CPU (a loaded machine), so their ranking is noise: the
choice serves this process (its kernel remembers it) and is registered with
``disturbed=True`` (debugprint says so), but no tuning file is written, so a
later process times again rather than inherit a bad choice.  A single
preemption within a run is not detected; the repeats of short runs (best of
up to 3) absorb those.
"""

import contextlib
import ctypes
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass, field

from symgraph.ops.conv_algorithms import register_choice_reporter

__all__ = ["IMPLS", "SOURCES", "Choice", "choices", "choices_for", "describe",
           "timings_run", "reset", "tuning_dir", "load", "store", "disk_key",
           "tuning_symbols", "op_key"]

#: The algorithm implementations, in the order of ``sg_conv.h``'s enum.
IMPLS = ("direct", "tiled", "gemm", "fft", "fft_tiled", "winograd")
#: Where a choice came from, in the order of ``sg_conv_choose.h``'s enum.
SOURCES = ("flag", "fallback", "guess", "timing", "tuning cache")
#: Bump when the meaning of a tuning file changes.
TUNING_FORMAT = "2"
#: A timing that got less CPU than this share of its wall time is disturbed
#: (see the module docstring): used, but not written to the tuning cache.
MIN_CPU_SHARE = 0.5

_log = logging.getLogger("symgraph.compile.conv_tuning")


@dataclass
class Choice:
    """One algorithm choice: the implementation, its source, and (for a timing)
    the seconds each candidate took ({impl: seconds})."""

    impl: str
    source: str
    times: dict = field(default_factory=dict)
    #: A timing whose runs got less than MIN_CPU_SHARE of a CPU (not cached).
    disturbed: bool = False

    def text(self):
        """``gemm (timing: gemm 1.2 ms, direct 9.8 ms)``."""
        source = self.source + (", disturbed: not cached" if self.disturbed else "")
        if not self.times:
            return f"{self.impl} ({source})"
        ranked = sorted(self.times.items(), key=lambda kv: kv[1])
        times = ", ".join(f"{name} {seconds * 1e3:.3g} ms" for name, seconds in ranked)
        return f"{self.impl} ({source}: {times})"


class _Registry:
    """The choices of this process: {op key: {shape key: Choice}}."""

    def __init__(self):
        self.lock = threading.Lock()
        self.choices = {}
        self.timings = 0

    def add(self, op, shape, choice):
        with self.lock:
            self.choices.setdefault(op, {})[shape] = choice
            if choice.source == "timing":
                self.timings += 1


_REGISTRY = _Registry()


def choices():
    """A copy of every choice of this process: {op key: {shape key: Choice}}."""
    with _REGISTRY.lock:
        return {op: dict(by_shape) for op, by_shape in _REGISTRY.choices.items()}


def op_key(op):
    """The key under which the kernel of ``op`` records its choices: its
    class and props (equal ops share a kernel, hence their choices)."""
    return repr((type(op).__name__,) + tuple(op._props()))


def choices_for(op):
    """The choices made for nodes of ``op``: {shape key: Choice}."""
    with _REGISTRY.lock:
        return dict(_REGISTRY.choices.get(op_key(op), {}))


def describe(op):
    """A one-line summary of the choices made for ``op`` ('' when none yet)."""
    found = choices_for(op)
    if not found:
        return ""
    texts = []
    for shape, choice in found.items():
        text = choice.text()
        if text not in texts:
            texts.append(text)
    return "; ".join(texts)


def timings_run():
    """How many timings (of a set of candidate algorithms) this process ran."""
    return _REGISTRY.timings


def reset():
    """Forget this process's choices and the timing count (the kernels' own
    memos stay: a kernel that chose keeps its choice)."""
    with _REGISTRY.lock:
        _REGISTRY.choices.clear()
        _REGISTRY.timings = 0


# -- the tuning cache on disk ---------------------------------------------------------

def tuning_dir():
    """``<compiledir>/tuning``, created (0700) when missing, refused when another
    user owns it or may write it (its records choose the code that runs)."""
    from symgraph.backends.native.cache import get_cache

    return get_cache().private_folder("tuning")


def _key_parts(shape_key):
    from symgraph.version import __version__
    from symgraph.backends.cpu.compiler import cpu_signature
    from symgraph.backends.cpu.conv.library import blas_threads, sources_digest

    # the algorithms' sources too: a changed algorithm is timed again
    return {"format": TUNING_FORMAT, "shape": shape_key, "cpu": cpu_signature(),
            "blas_threads": blas_threads(), "symgraph": __version__,
            "algorithms": sources_digest()}


def disk_key(shape_key):
    """The tuning cache's file key for a kernel's ``shape_key``: a hash over it,
    the BLAS threads, the CPU, the symgraph version and the algorithms' sources."""
    from symgraph.backends.native.cache_keys import make_key

    return make_key(**_key_parts(shape_key))


def _path(shape_key):
    return tuning_dir() / f"{disk_key(shape_key)}.json"


def load(shape_key):
    """The implementation name the tuning cache holds for ``shape_key``, or None
    (missing, unreadable or corrupt files are misses)."""
    path = _path(shape_key)
    try:
        record = json.loads(path.read_text())
        if record.get("key") != _key_parts(shape_key) or record.get("impl") not in IMPLS:
            raise ValueError("the record does not match its key")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as exc:
        _log.warning("ignoring the corrupt tuning record %s (%s); it will be rewritten",
                     path, exc)
        return None
    return record["impl"], {k: float(v) for k, v in record.get("times", {}).items()}


def store(shape_key, impl, times):
    """Record ``impl`` (and the candidates' ``times``) for ``shape_key``:
    written to a temporary file, then renamed into place."""
    path = _path(shape_key)
    record = {"key": _key_parts(shape_key), "impl": impl, "times": times}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- the C callbacks -----------------------------------------------------------------

_LOOKUP_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
_RECORD_T = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_double)


def _lookup(op, shape):
    # An exception must not cross into C: a failure here is a miss.
    try:
        found = load(shape.decode())
        if found is None:
            return -1
        impl, times = found
        _REGISTRY.add(op.decode(), shape.decode(), Choice(impl, "tuning cache", times))
        return IMPLS.index(impl)
    except Exception as exc:  # noqa: BLE001
        _log.warning("the convolution tuning cache lookup failed: %s", exc)
        return -1


def _record(op, shape, impl, source, times, n, cpu_share):
    try:
        op, shape = op.decode(), shape.decode()
        measured = {IMPLS[i]: times[i] for i in range(min(n, len(IMPLS))) if times[i] >= 0}
        timed = SOURCES[source] == "timing"
        disturbed = timed and 0 <= cpu_share < MIN_CPU_SHARE
        _REGISTRY.add(op, shape, Choice(IMPLS[impl], SOURCES[source], measured, disturbed))
        if timed and not disturbed:
            store(shape, IMPLS[impl], measured)
        elif disturbed:
            _log.info("convolution timing of %s got %.0f%% of a CPU: its choice (%s) is not "
                      "kept in the tuning cache", shape, 100 * cpu_share, IMPLS[impl])
    except Exception as exc:  # noqa: BLE001
        _log.warning("recording a convolution algorithm choice failed: %s", exc)


_CALLBACKS = {"lookup": _LOOKUP_T(_lookup), "record": _RECORD_T(_record)}


def _address(name):
    return ctypes.cast(_CALLBACKS[name], ctypes.c_void_p).value


def _lookup_address():
    return _address("lookup")


def _record_address():
    return _address("record")


def tuning_symbols():
    """CKernel.symbols that connect a convolution kernel to these callbacks."""
    return (("sg_conv_tuning_lookup", _lookup_address),
            ("sg_conv_tuning_record", _record_address))


def _report(op):
    return {choice.impl for choice in choices_for(op).values()}, describe(op)


# the conv ops' profile label and debugprint note show these choices
register_choice_reporter(_report)
