"""Where symgraph's call time goes: cProfile of W1 and W4 calls.

    python bench/profile_symgraph.py [TOP]

Prints the top functions by internal time (tottime) for many calls of the W1
function (``x + 1`` on 10 elements, default and ``trust_input``) and of the W4
training step, plus symgraph's own ``profile=True`` summary when it has one.
"""

import cProfile
import io
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from models import TheanoLike, mlp_batch, mlp_params  # noqa: E402


def _profile(label, fn, calls, top):
    fn()                                      # warm-up outside the profile
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    # drop pstats' preamble lines up to the column header
    body = text[text.index("   ncalls"):] if "   ncalls" in text else text
    print("## %s (%d calls; per-call times under the profiler are inflated)" % (label, calls))
    print(body.rstrip())
    print()


def main(top=15):
    """Profile W1 (default, trust_input) and W4 and print the tables."""
    lib = TheanoLike("symgraph")
    x = np.arange(10, dtype="float32")
    f = lib.w1("float32")
    g = lib.w1("float32", trust_input=True)
    _profile("W1 x+1, default call", lambda: f(x), 20000, top)
    _profile("W1 x+1, trust_input", lambda: g(x), 20000, top)
    xb, yb = mlp_batch()
    step = lib.w4(mlp_params())
    _profile("W4 MLP step", lambda: step(xb, yb), 200, top)
    # symgraph's own per-node profile, when the current backend offers one
    try:
        inputs, cost, updates = lib.mlp_graph(mlp_params())
        prof_step = lib.lib.function(inputs, cost, updates=updates, profile=True)
        for _ in range(50):
            prof_step(xb, yb)
        summary = getattr(prof_step.profile, "summary", None)
        if callable(summary):
            print("## W4 MLP step, symgraph profile=True")
            summary()
    except Exception as exc:  # the profile is a bonus; never fail the run on it
        print("(symgraph profile=True unavailable: %s)" % exc)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
