"""Run symgraph's benchmarks against its peers and print one table.

    python bench/run_all.py [--quick] [--threads [N]] [--only W1,W2,...]
                            [--peers NumPy,JAX,...] [--profile] [--retune]

The process re-executes itself once with a controlled environment:
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` removed (they pin OpenBLAS to a
kernel that is not this CPU's; removed only for the benchmark, never globally)
and the thread count of every runtime set (one thread by default; ``--threads``
uses all cores, or N, and turns on symgraph's ``openmp`` flag).
"""

import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

_REEXEC_MARK = "SG_BENCH_REEXEC"
_REMOVED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS", "SG_BENCH_THREADS")
WORKLOADS = ("W1", "W2", "W3", "W4", "C1", "C2", "W5", "L1", "W6", "W7", "S1", "S2", "S3")


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions, float32 only, W7 up to N=50 (a few minutes)")
    p.add_argument("--threads", nargs="?", type=int, const=0, default=1,
                   help="threads for every system; bare --threads means all cores")
    p.add_argument("--only", default=",".join(WORKLOADS), help="workloads, comma separated")
    p.add_argument("--peers", default="", help="columns to run (default: all installed)")
    p.add_argument("--profile", action="store_true",
                   help="after the table, cProfile symgraph's W1 and W4 calls")
    p.add_argument("--retune", action="store_true",
                   help="empty symgraph's convolution tuning cache first, so that C1, C2 "
                        "and W5's time_once choices are timed in this run")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per compile subprocess (default 180 quick, 900 full)")
    return p.parse_args(argv)


def reexec_env(threads):
    """The benchmark's environment: OpenBLAS overrides removed, threads pinned."""
    env = {k: v for k, v in os.environ.items() if k not in _REMOVED}
    for var in _THREAD_VARS:
        env[var] = str(threads)
    if threads == 1:
        env["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                            "intra_op_parallelism_threads=1")
    else:
        env.pop("XLA_FLAGS", None)
        flags = env.get("SYMGRAPH_FLAGS", "")
        env["SYMGRAPH_FLAGS"] = ",".join(f for f in (flags, "openmp=True") if f)
    # glibc returns freed blocks over 128 KiB to the system and page-faults them
    # in again on the next call: PyTorch's conv2d (a fresh 7 MB output per call)
    # takes 6 ms that way and 1.5 ms with the blocks kept.  Every system gets
    # the kept blocks, as in a long-running process.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(64 << 20))
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(256 << 20))
    env[_REEXEC_MARK] = "1"
    return env


def _load():
    try:
        return "%.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        return "unknown"


def describe(ctx):
    """Header lines: machine, versions, BLAS kernels, thread settings."""
    import numpy as np

    from common import COLUMNS, have, import_optional

    lines = ["# symgraph benchmarks (%s, %d thread%s)" % (
        "quick" if ctx.quick else "full", ctx.threads, "" if ctx.threads == 1 else "s")]
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(l.split(":", 1)[1].strip() for l in fh if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines.append("machine: %s, %d cores; Python %s; load average %s (other work on "
                 "the machine skews every column alike)" % (
                     cpu, os.cpu_count(), platform.python_version(), _load()))
    versions = []
    for mod in ("symgraph", "numpy", "pytensor", "numba", "torch", "jax"):
        m = import_optional(mod) if mod in ("symgraph", "numpy") else None
        if m is None:
            from importlib import metadata

            try:
                versions.append("%s %s" % (mod, metadata.version(mod)))
            except metadata.PackageNotFoundError:
                versions.append("%s n/a" % mod)
        else:
            versions.append("%s %s" % (mod, getattr(m, "__version__", "?")))
    lines.append("versions: " + ", ".join(versions))
    missing = [c for c in COLUMNS if not have(c)]
    if missing:
        lines.append("not installed (n/a): " + ", ".join(missing))
    np.dot(np.ones((64, 64)), np.ones((64, 64)))     # load BLAS so threadpoolctl sees it
    tpc = import_optional("threadpoolctl")
    if tpc is not None:
        for info in tpc.threadpool_info():
            lines.append("threadpool: %s %s %s (%s), %s threads, %s" % (
                info.get("internal_api"), info.get("version"), info.get("architecture", ""),
                info.get("threading_layer", ""), info.get("num_threads"),
                os.path.basename(info.get("filepath", ""))))
    else:
        lines.append("threadpool: threadpoolctl not installed (NumPy's BLAS kernel unknown)")
    removed = [v for v in _REMOVED if v in os.environ]
    lines.append("environment: %s removed; OMP/OPENBLAS/MKL/NUMBA threads=%d; XLA_FLAGS=%r; "
                 "SYMGRAPH_FLAGS=%r; MALLOC_MMAP_THRESHOLD_=%s" % (
                     "/".join(_REMOVED) + (" (were set)" if removed else ""), ctx.threads,
                     os.environ.get("XLA_FLAGS", ""), os.environ.get("SYMGRAPH_FLAGS", ""),
                     os.environ.get("MALLOC_MMAP_THRESHOLD_", "")))
    import symgraph

    lines.append("symgraph linker=%s, openmp=%s" % (symgraph.config.linker,
                                                     symgraph.config.openmp))
    return lines


def main(argv=None):
    """Entry point: re-exec with the benchmark environment, run, print the table."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    threads = args.threads or os.cpu_count() or 1
    if os.environ.get(_REEXEC_MARK) != "1":
        if threads == 1 and hasattr(os, "sched_setaffinity"):
            # Some runtimes (XLA) start worker threads whatever their flags say:
            # one core for every system makes "one thread" mean the same for all.
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + argv,
                  reexec_env(threads))
    from common import COLUMNS, Ctx, render

    columns = tuple(c.strip() for c in args.peers.split(",") if c.strip()) or COLUMNS
    if "symgraph" not in columns:
        columns = ("symgraph",) + columns
    ctx = Ctx(quick=args.quick, threads=threads,
              dtypes=("float32",) if args.quick else ("float32", "float64"),
              only_columns=columns,
              timeout=args.timeout or (180.0 if args.quick else 900.0))
    for line in describe(ctx):
        print(line)
    sys.stdout.flush()

    import w_compile
    import w_conv
    import w_load
    import w_runtime
    import w_scan

    runners = {"W1": w_runtime.w1, "W2": w_runtime.w2, "W3": w_runtime.w3,
               "W4": w_runtime.w4, "C1": w_conv.c1, "C2": w_conv.c2, "W5": w_conv.w5,
               "L1": w_load.l1,
               "W6": w_compile.w6, "W7": w_compile.w7,
               "S1": w_scan.s1, "S2": w_scan.s2, "S3": w_scan.s3}
    if args.retune:
        w_conv.clear_tuning_cache(ctx)
    rows = []
    start = time.perf_counter()
    for name in [w.strip().upper() for w in args.only.split(",") if w.strip()]:
        t0 = time.perf_counter()
        try:
            rows.extend(runners[name](ctx))
        except Exception as exc:  # one broken workload must not lose the others
            ctx.notes.append("%s aborted: %s: %s" % (name, type(exc).__name__, exc))
        print("... %s done in %.1f s" % (name, time.perf_counter() - t0), file=sys.stderr)
    print()
    print("Times are the best of %d interleaved rounds (median of %d batches each); "
          "(Nx) after a peer time = symgraph time / peer time: below 1 symgraph is faster; "
          "'-' not measured in this run, 'n/a' not installed."
          % (ctx.rounds, ctx.repeat))
    print()
    print(render(rows, tuple(c for c in COLUMNS if c in columns)))
    if ctx.notes:
        print()
        print("Notes:")
        for note in ctx.notes:
            print("- " + note)
    print()
    print("total %.0f s; load average at the end %s" % (time.perf_counter() - start, _load()))
    if args.profile:
        import profile_symgraph

        print()
        profile_symgraph.main(top=15)


if __name__ == "__main__":
    main()
