"""Shared pieces of the benchmarks: peers, timing, the result table.

Benchmarks are not tests: nothing here asserts a time.  Every workload module
exposes ``run(ctx) -> list[Row]``; ``run_all.py`` prints the rows as one table.
"""

import dataclasses
import gc
import importlib
import importlib.util
import os
import statistics
import time

# Column order of the table; "symgraph" is the subject, the others are peers.
SUBJECT = "symgraph"
PEERS = ("NumPy", "PyTensor C", "PyTensor Numba", "PyTorch", "torch.compile", "JAX")
COLUMNS = (SUBJECT,) + PEERS

# Which Python package each column needs; a missing one prints 'n/a'.
_NEEDS = {
    "symgraph": "symgraph",
    "NumPy": "numpy",
    "PyTensor C": "pytensor",
    "PyTensor Numba": "numba",       # and pytensor
    "PyTorch": "torch",
    "torch.compile": "torch",
    "JAX": "jax",
}


def have(column):
    """True when the packages behind ``column`` are importable."""
    needed = [_NEEDS[column]] + (["pytensor"] if column == "PyTensor Numba" else [])
    return all(importlib.util.find_spec(name) is not None for name in needed)


@dataclasses.dataclass
class Ctx:
    """What a workload needs to know about this run."""

    quick: bool
    threads: int                     # 1, or the number of threads used by every system
    dtypes: tuple = ("float32",)     # float64 rows are added where cheap (full run)
    only_columns: tuple = COLUMNS    # columns to run (``--peers``)
    timeout: float = 600.0           # per compile subprocess (W6, W7)
    notes: list = dataclasses.field(default_factory=list)

    def wants(self, column):
        """True when ``column`` is selected and installed."""
        return column in self.only_columns and have(column)

    @property
    def budget(self):
        """Seconds one timed batch should last (longer batches smooth the noise)."""
        return 0.05 if self.quick else 0.2

    @property
    def rounds(self):
        """Interleaved rounds over all peers; the best round's median is kept."""
        return 3 if self.quick else 5

    @property
    def repeat(self):
        """Batches per round; the median batch is the round's value."""
        return 3 if self.quick else 5


@dataclasses.dataclass
class Row:
    """One line of the table: seconds per column (None: not run / n/a)."""

    label: str
    times: dict
    note: str = ""          # short text shown after the row
    unit: str = "time"      # "time" (seconds; ratios shown) or "text" (cells shown as is)


def _calibrate(fn, budget):
    """Calls per batch so that one batch lasts about ``budget`` seconds."""
    fn()                                   # warm-up (first calls compile, allocate)
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= budget / 4 or number >= 1 << 24:
            break
        number *= 4
    per_call = max(elapsed / number, 1e-9)
    return max(1, int(budget / per_call))


def _batch(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def measure(ctx, callables):
    """Time each callable of ``{name: fn}``; returns ``{name: seconds per call}``.

    Peers are interleaved: every round runs each callable's ``repeat`` batches in
    turn (the order rotates between rounds), and a callable's time is the best
    (smallest) over rounds of the median batch.  A callable that raises gets None
    and its error is recorded in ``ctx.notes``.
    """
    names = list(callables)
    numbers, best = {}, {}
    for name in list(names):
        try:
            numbers[name] = _calibrate(callables[name], ctx.budget)
        except Exception as exc:  # a peer failing must not stop the table
            ctx.notes.append("%s failed: %s: %s" % (name, type(exc).__name__, str(exc)[:200]))
            names.remove(name)
            best[name] = None
    gc_was = gc.isenabled()
    gc.disable()                       # a collection inside one batch is noise
    try:
        for r in range(ctx.rounds):
            order = names[r % len(names):] + names[:r % len(names)] if names else []
            for name in order:
                meds = [_batch(callables[name], numbers[name]) for _ in range(ctx.repeat)]
                med = statistics.median(meds)
                if best.get(name) is None or med < best[name]:
                    best[name] = med
            gc.collect()
    finally:
        if gc_was:
            gc.enable()
    return best


def fmt_time(seconds):
    """Human time: ns, µs, ms or s with three significant digits."""
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            return ("%.3g %s" % (value, unit)) if value < 1000 else ("%.0f %s" % (value, unit))
    return "n/a"


def fmt_cell(row, column):
    """A cell: the time, and for a peer the ratio symgraph / peer."""
    if column not in row.times:
        return "-" if have(column) else "n/a"    # not measured here / not installed
    value = row.times[column]
    if row.unit == "text":
        return "" if value is None else str(value)
    if value is None:
        return "failed"                          # the reason is in the notes
    text = fmt_time(value)
    mine = row.times.get(SUBJECT)
    if column != SUBJECT and mine is not None and value > 0:
        text += " (%.2fx)" % (mine / value)
    return text


def render(rows, columns=COLUMNS):
    """The table as Markdown: one line per row, ratio = symgraph time / peer time.

    A cell reads "n/a" when the peer is not installed, "-" when this run does
    not measure it (``--quick``, a workload without that peer) and "failed"
    when it raised (the notes say why).
    """
    header = ["workload"] + list(columns)
    lines = [[row.label] + [fmt_cell(row, c) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header))]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
           "| " + " | ".join("-" * w for w in widths) + " |"]
    for row, cells in zip(rows, lines):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |")
    notes = ["- %s: %s" % (row.label, row.note) for row in rows if row.note]
    return "\n".join(out + ([""] + notes if notes else []))


def import_optional(name):
    """Import a module, or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def torch_setup(ctx):
    """Import torch with the run's thread count; None when missing."""
    torch = import_optional("torch")
    if torch is not None:
        torch.set_num_threads(ctx.threads)
    return torch


def jax_setup():
    """Import jax for the CPU; None when missing (threads come from XLA_FLAGS)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = import_optional("jax")
    if jax is not None:
        jax.config.update("jax_platforms", "cpu")
        # without x64 JAX silently computes float64 rows in float32; float32 code
        # is unchanged by it (Python scalars are weakly typed)
        jax.config.update("jax_enable_x64", True)
    return jax


def pytensor_modes():
    """``{column: mode}`` for PyTensor's C backend and its Numba backend."""
    pytensor = import_optional("pytensor")
    if pytensor is None:
        return {}
    from pytensor.compile.mode import Mode

    modes = {"PyTensor C": Mode(linker="cvm", optimizer="fast_run")}
    if import_optional("numba") is not None:
        modes["PyTensor Numba"] = "NUMBA"
    return modes
