"""One compile-time measurement, run in a fresh process by ``w_compile.py``.

    python compile_child.py COLUMN WORKLOAD [N] [--jax-cache DIR]

WORKLOAD is ``mlp`` (W4's training step) or ``chain`` (W7, N layers).  The
system is imported first (timed: ``import_s``), then the graph is built (not
timed); ``seconds`` runs from ``function()`` (or ``torch.compile`` /
``jax.jit``) to the first result.  Prints one JSON line ``{"seconds": ...,
"import_s": ..., "phases": {...}}`` (symgraph's compile phases, from
``FunctionMaker.timings``).  The caches the process sees (empty: cold; filled: warm)
are chosen by the parent through the environment.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from models import (TheanoLike, chain_input, chain_params, jax_chain,  # noqa: E402
                    jax_mlp_step, mlp_batch, mlp_params, torch_chain, torch_mlp_step)


_IMPORT = {}   # seconds to import the measured system
_PHASES = {}   # symgraph: seconds per compile phase


def _theano_like(column, workload, n):
    start = time.perf_counter()
    if column == "symgraph":
        lib = TheanoLike("symgraph")
    else:
        from common import pytensor_modes

        lib = TheanoLike("pytensor", pytensor_modes()[column])
    _IMPORT["s"] = time.perf_counter() - start
    if workload == "mlp":
        inputs, cost, updates = lib.mlp_graph(mlp_params())
        x, y = mlp_batch()
        start = time.perf_counter()
        f = lib.function(inputs, cost, updates=updates)
        made = time.perf_counter()
        f(x, y)
    else:
        xv, h = lib.chain_graph(n)      # built outside the timed span, as for the MLP
        x = chain_input()
        start = time.perf_counter()
        f = lib.function([xv], h)
        made = time.perf_counter()
        f(x)
    end = time.perf_counter()
    if column == "symgraph":
        # the compile's phases (FunctionMaker.timings) and the first call
        _PHASES.update(f.maker.timings, first_call=end - made)
    return end - start


def _torch(workload, n):
    start = time.perf_counter()
    import torch

    _IMPORT["s"] = time.perf_counter() - start

    torch.set_num_threads(int(os.environ.get("SG_BENCH_THREADS", "1")))
    if workload == "mlp":
        x, y = mlp_batch()
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        start = time.perf_counter()
        step = torch_mlp_step(torch, mlp_params(), compiled=True)
        step(tx, ty)
        return time.perf_counter() - start
    tx = torch.from_numpy(chain_input())
    start = time.perf_counter()
    with torch.no_grad():
        torch_chain(torch, n)(tx)
    return time.perf_counter() - start


def _jax(workload, n, cache_dir):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    start = time.perf_counter()
    import jax
    import jax.numpy  # noqa: F401  (the step uses it)

    _IMPORT["s"] = time.perf_counter() - start

    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if workload == "mlp":
        ps = [jax.device_put(p) for p in mlp_params()]
        x, y = mlp_batch()
        jx, jy = jax.device_put(x), jax.device_put(y.astype(np.int32))
        start = time.perf_counter()
        step = jax_mlp_step(jax)
        step(ps, jx, jy)[1].block_until_ready()
        return time.perf_counter() - start
    ps = [jax.device_put(p) for p in chain_params(n)]
    jx = jax.device_put(chain_input())
    start = time.perf_counter()
    jax_chain(jax, n)(ps, jx).block_until_ready()
    return time.perf_counter() - start


def main(argv):
    """Measure and print the JSON line."""
    cache_dir = None
    if "--jax-cache" in argv:
        i = argv.index("--jax-cache")
        cache_dir = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    column, workload = argv[0], argv[1]
    n = int(argv[2]) if len(argv) > 2 else 0
    if column in ("symgraph", "PyTensor C", "PyTensor Numba"):
        seconds = _theano_like(column, workload, n)
    elif column == "torch.compile":
        seconds = _torch(workload, n)
    elif column == "JAX":
        seconds = _jax(workload, n, cache_dir)
    else:
        raise SystemExit("no compile step for %r" % column)
    print(json.dumps({"seconds": seconds, "import_s": _IMPORT.get("s"), "phases": _PHASES}))


if __name__ == "__main__":
    main(sys.argv[1:])
