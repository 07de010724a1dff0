"""L1: the training steps of W4 (MLP) and W5 (convnet) on a quiet machine and
with one core busy (issue 14, "robust under load").

Users run on machines that other programs share.  A thread pool whose
threads spin while they wait, or that cuts work into fixed shares, loses far
more than the busy core when one of its threads is descheduled: every
parallel region waits for the slowest share.  Each system's step is timed
quiet, then with a child process spinning (``while True: pass``) on whatever
core the system gives it, then quiet again (the quiet time is the better of
the two, so that a drift in the machine's load is not taken for the busy
core's cost).  The rows give the busy time (with the usual ratio to each
peer) and the busy / quiet ratio of every system: about 1.5 means the step
lost what one of two cores is worth under fair scheduling (3 threads on 2
cores), 2 that it ran as on one core, and 10 that its threads fought.

Meaningful with ``--threads`` (two or more threads); in the default
one-thread run every system has one core and the busy child is free to take
the other, so the ratios show only the machine's noise.
"""

import os
import subprocess
import sys

from common import Row, measure
from w_conv import w5_callables
from w_runtime import w4_callables

#: The busy child: one Python loop, on any core of the machine (the benchmark
#: process may be pinned to one core in the one-thread run; the child is not).
_BUSY = ("import os\n"
         "try:\n"
         "    os.sched_setaffinity(0, range(os.cpu_count()))\n"
         "except (AttributeError, OSError):\n"
         "    pass\n"
         "while True:\n"
         "    pass\n")


class BusyCore:
    """A context manager: one child process spinning while the block runs."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", _BUSY])
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        return False


def quiet_and_busy(ctx, fns):
    """({column: quiet seconds}, {column: busy seconds}): quiet, busy, quiet."""
    first = measure(ctx, fns)
    with BusyCore():
        busy = measure(ctx, fns)
    again = measure(ctx, fns)
    quiet = {c: (None if first.get(c) is None or again.get(c) is None
                 else min(first[c], again[c])) for c in fns}
    return quiet, busy


def _rows(label, quiet, busy):
    ratios = {c: ("%.2fx" % (busy[c] / quiet[c]) if quiet.get(c) and busy.get(c) else "n/a")
              for c in quiet}
    return [Row("%s, quiet" % label, quiet),
            Row("%s, one core busy" % label, busy),
            Row("%s, busy / quiet" % label, ratios, unit="text")]


def l1(ctx):
    """L1: W4's and W5's steps quiet and with one core busy."""
    if ctx.threads < 2:
        ctx.notes.append("L1: one thread per system (and one core: run_all pins it); "
                         "run with --threads for the case issue 14 targets")
    rows = []
    fns = w4_callables(ctx, "L1 W4")
    rows += _rows("L1 W4 MLP step", *quiet_and_busy(ctx, fns))
    fns, _ = w5_callables(ctx, "L1 W5")
    rows += _rows("L1 W5 convnet step", *quiet_and_busy(ctx, fns))
    ctx.notes.append("L1: %d cores; the busy child is a Python loop on any core"
                     % (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                        else os.cpu_count()))
    return rows
