"""Compile-time workloads: W6 (W4's training function, cold and warm) and W7
(a chain of N distinct dense + element-wise layers, cold).

Every measurement is a fresh subprocess (``compile_child.py``).  Cold: every
cache the system keeps on disk points into a new empty folder.  Warm: a second
process over the folder the cold one filled.  The time runs from ``function()``
(``torch.compile``, ``jax.jit``) to the first result; W6 is also reported with
the time to import the system added (what a new process pays before its first
result).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from common import Row

HERE = os.path.dirname(os.path.abspath(__file__))
COMPILED = ("symgraph", "PyTensor C", "PyTensor Numba", "torch.compile", "JAX")
CHAIN_COLUMNS = ("symgraph", "PyTensor C", "PyTensor Numba", "JAX")
# --quick measures only the fast compilers (the W6 targets are against JAX):
# PyTensor's and torch.compile's cold compiles take 20 s to minutes each.
QUICK_COLUMNS = ("symgraph", "JAX")


def _cache_env(root):
    """Environment pointing every system's on-disk cache into ``root``."""
    env = dict(os.environ)
    flags = env.get("SYMGRAPH_FLAGS", "")
    env["SYMGRAPH_FLAGS"] = ",".join(
        f for f in (flags, "compiledir=%s" % os.path.join(root, "symgraph")) if f)
    pflags = env.get("PYTENSOR_FLAGS", "")
    env["PYTENSOR_FLAGS"] = ",".join(
        f for f in (pflags, "base_compiledir=%s" % os.path.join(root, "pytensor")) if f)
    env["NUMBA_CACHE_DIR"] = os.path.join(root, "numba")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    env["XDG_CACHE_HOME"] = os.path.join(root, "xdg")
    return env


def _child(ctx, column, workload, n, root):
    """Run one measurement: (seconds, import seconds, {phase: seconds}), or None
    (the failure goes to notes)."""
    cmd = [sys.executable, os.path.join(HERE, "compile_child.py"), column, workload, str(n),
           "--jax-cache", os.path.join(root, "jax")]
    try:
        proc = subprocess.run(cmd, env=_cache_env(root), capture_output=True, text=True,
                              timeout=ctx.timeout)
    except subprocess.TimeoutExpired:
        ctx.notes.append("%s %s N=%s: over the %.0f s limit" % (column, workload, n, ctx.timeout))
        return None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            return result["seconds"], result.get("import_s"), result.get("phases") or {}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    ctx.notes.append("%s %s N=%s failed: %s" % (column, workload, n, " / ".join(tail)[:300]))
    return None


def _best(values, with_import=False):
    """The smallest time of ``values`` (``_child``'s results or None), the
    import added with ``with_import``."""
    times = [v[0] + ((v[1] or 0.0) if with_import else 0.0) for v in values if v is not None]
    return min(times) if times else None


def _phase_text(result):
    """``import 412, rewriting 63, ...``: a run's phases in milliseconds."""
    seconds, import_s, phases = result
    parts = [("import", import_s)] + sorted(phases.items(), key=lambda kv: -kv[1])
    return ", ".join("%s %.0f" % (name, 1e3 * value) for name, value in parts
                     if value is not None)


def _byte_compile_symgraph():
    """Write the bytecode of symgraph's modules, as ``pip install`` does for every
    installed package.  A source checkout run with PYTHONDONTWRITEBYTECODE (or
    just edited) otherwise compiles each changed module again in every child,
    a cost (about 40 ms for W6) that an installed symgraph never pays and
    that the peers, installed by pip, do not pay either."""
    import compileall

    import symgraph

    compileall.compile_dir(os.path.dirname(symgraph.__file__), quiet=1)


def w6(ctx):
    """W6: cold and warm compile of the MLP training step, every compiling system."""
    columns = [c for c in COMPILED if ctx.wants(c) and (not ctx.quick or c in QUICK_COLUMNS)]
    _byte_compile_symgraph()
    tries = 1 if ctx.quick else 2
    cold = {c: [] for c in columns}
    warm = {c: [] for c in columns}
    for _ in range(tries):
        for column in columns:           # interleaved: one system after the other
            root = tempfile.mkdtemp(prefix="sgbench-w6-")
            try:
                cold[column].append(_child(ctx, column, "mlp", 0, root))
                if cold[column][-1] is not None:
                    warm[column].append(_child(ctx, column, "mlp", 0, root))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    for kind, results in (("cold", cold), ("warm", warm)):
        runs = [r for r in results.get("symgraph", ()) if r is not None]
        if runs:
            best = min(runs, key=lambda r: r[0])
            ctx.notes.append("W6 symgraph %s phases (ms): %s" % (kind, _phase_text(best)))
    return [Row("W6 cold, function() to 1st result", {c: _best(cold[c]) for c in columns}),
            Row("W6 warm, new process", {c: _best(warm[c]) for c in columns}),
            Row("W6 cold, import + function() to 1st result",
                {c: _best(cold[c], True) for c in columns}),
            Row("W6 warm, import + function() to 1st result",
                {c: _best(warm[c], True) for c in columns})]


def w7(ctx):
    """W7: cold compile of a chain of N distinct layers, N = 10, 50 (, 200)."""
    sizes = (10, 50) if ctx.quick else (10, 50, 200)
    _byte_compile_symgraph()
    columns = [c for c in CHAIN_COLUMNS
               if ctx.wants(c) and (not ctx.quick or c in QUICK_COLUMNS)]
    rows = []
    for n in sizes:
        times = {}
        for column in columns:
            root = tempfile.mkdtemp(prefix="sgbench-w7-")
            try:
                times[column] = _child(ctx, column, "chain", n, root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
        rows.append(Row("W7 N=%d distinct layers, cold" % n,
                        {c: (t[0] if t else None) for c, t in times.items()}))
    first, last = rows[0].times.get("symgraph"), rows[-1].times.get("symgraph")
    if first and last:
        rows[-1].note = "symgraph N=%d / N=%d: %.1fx" % (sizes[-1], sizes[0], last / first)
    return rows
