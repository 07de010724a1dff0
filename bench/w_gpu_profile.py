"""Where the time of a GPU training step goes, node by node (host side).

    python bench/w_gpu_profile.py [--calls N]

Compiles G3's MLP step and G4's convnet step (bench/w_gpu.py) with
``profile=True`` and prints each step's profile after N calls.  Kernels run
asynchronously, so a node's time is what it costs the host: its launch,
plus any wait for the device (a copy to the host, a synchronizing call).
A node that takes far more than a launch is where the step stalls.
Without a GPU it runs on the emulated device, where the times say nothing.
"""

import argparse
import sys

import numpy as np

from models import TheanoLike, mlp_batch, mlp_params
from models_conv import SymgraphConv, convnet_batch, convnet_params
from w_gpu import device_step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    import symgraph.gpu

    real = symgraph.gpu.is_available()
    mlp_x, mlp_y = mlp_batch()
    steps = {"MLP step": (TheanoLike("symgraph").mlp_graph, mlp_params(), (mlp_x, mlp_y)),
             "convnet step": (SymgraphConv().convnet_graph, convnet_params(),
                              convnet_batch())}
    for label, (graph, params, batch) in steps.items():
        if not real:
            batch = tuple(np.asarray(b)[:16] for b in batch) if label == "MLP step" else batch
        step = device_step(graph, params, batch, real, **{
            "profile": True, "profiling.ignore_first_call": True})
        for _ in range(args.calls if real else 3):
            step()
        print(f"== {label} ({'GPU' if real else 'emulated device: times meaningless'})")
        step.profile.summary(file=sys.stdout, n_ops_to_print=12, n_apply_to_print=15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
