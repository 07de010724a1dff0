"""GPU workloads: G1 fused element-wise (1e7 float32) against the device's
copy bandwidth, G2 softmax 4096x1024, G3 the MLP training step (W4's model),
G4 the convnet training step (W5's model), against PyTorch and JAX on the
same GPU.

    python bench/w_gpu.py            # on a GPU: times and ratios
    python bench/w_gpu.py --quick

Data and weights stay on the device for every system (symgraph: device
shared variables and ``givens``; PyTorch: CUDA tensors; JAX: device
arrays), and every timed call ends with the device synchronized, so the
times are the device's work plus each system's launch overhead.

Without a GPU it runs the same graphs at small sizes on the emulated device
and checks them against NumPy: correctness only (the emulator's times say
nothing about a GPU).
"""

import argparse
import sys
import time

import numpy as np

from common import Ctx, Row, import_optional, measure, render
from models import MLP_BATCH, LR, TheanoLike, jax_mlp_step, mlp_batch, mlp_params, \
    torch_mlp_step
from models_conv import SymgraphConv, convnet_batch, convnet_params

COLUMNS = ("symgraph", "PyTorch", "JAX")


def _device_flags(real):
    return {"device": "cuda", "gpu.emulate": not real, "floatX": "float32"}


def device_step(graph, params, batch, real, **flags):
    """A training step compiled on the device (or the emulated one): ``graph``
    (``params -> (inputs, cost, updates)``) with its inputs given by shared
    variables holding ``batch``, so the data stays on the device."""
    import symgraph

    with symgraph.config.change_flags(dict(_device_flags(real), **flags)):
        inputs, cost, updates = graph(params)
        shared = [symgraph.shared(v, name=n) for v, n in zip(batch, ("x", "y"))]
        return symgraph.function([], cost, updates=updates, givens=dict(zip(inputs, shared)))


def _sync_call(f):
    import symgraph.gpu

    def call():
        out = f()
        symgraph.gpu.synchronize()
        return out
    return call


def _torch_cuda():
    torch = import_optional("torch")
    return torch if torch is not None and torch.cuda.is_available() else None


def _jax_gpu():
    jax = import_optional("jax")
    if jax is None:
        return None
    try:
        return jax if jax.devices("gpu") else None
    except RuntimeError:
        return None


def g1(ctx, real, n):
    """exp(-x*x) * y + tanh(z) * 0.5 into a device buffer, against the
    device's copy bandwidth (a device-to-device copy of n floats: PyTorch's
    where it is installed, else symgraph's DeviceArray.copy)."""
    import symgraph
    import symgraph.tensor as T

    rng = np.random.default_rng(0)
    host = [rng.standard_normal(n).astype("f") for _ in range(3)]
    want = np.exp(-host[0] ** 2) * host[1] + np.tanh(host[2]) * np.float32(0.5)
    with symgraph.config.change_flags(_device_flags(real)):
        x, y, z = (symgraph.shared(a, name=name) for a, name in zip(host, "xyz"))
        out = symgraph.shared(np.zeros(n, "f"), name="out")
        fused = symgraph.function([], [], updates=[(out, T.exp(-x * x) * y + T.tanh(z) * 0.5)])
    fused()
    label = "G1 fused element-wise %.0e" % n
    rows = [_row(ctx, label, np.allclose(out.get_value(), want, rtol=1e-5, atol=1e-6))]
    if not real:
        return rows
    fns = {"symgraph": _sync_call(fused)}
    torch, jax = _torch_cuda(), _jax_gpu()
    if torch is not None:
        tx, ty, tz = (torch.from_numpy(a).cuda() for a in host)
        tout, tcopy = torch.empty_like(tx), torch.empty_like(tx)

        def torch_fused():
            torch.mul(torch.exp(-tx * tx), ty, out=tout).add_(torch.tanh(tz), alpha=0.5)
            torch.cuda.synchronize()

        def torch_copy():
            tcopy.copy_(tx)
            torch.cuda.synchronize()
        fns["PyTorch"], fns["copy"] = torch_fused, torch_copy
    else:
        dx = x.get_value(borrow=True, return_internal_type=True)
        fns["copy"] = _sync_call(dx.copy)
    if jax is not None:
        gpu = jax.devices("gpu")[0]
        jx, jy, jz = (jax.device_put(a, gpu) for a in host)
        jf = jax.jit(lambda a, b, c: jax.numpy.exp(-a * a) * b + jax.numpy.tanh(c) * 0.5)
        fns["JAX"] = lambda: jf(jx, jy, jz).block_until_ready()
    times = measure(ctx, fns)
    copy_time = times.pop("copy")
    if copy_time is None or times.get("symgraph") is None:
        rows[0] = Row(label, times)
        return rows
    moved_fused, moved_copy = 4 * n * 4, 2 * n * 4          # bytes read + written
    bandwidth = moved_copy / copy_time
    rows[0] = Row(label, times,
                  note="%.0f GB/s, %.0f%% of the copy's %.0f GB/s"
                  % (moved_fused / times["symgraph"] / 1e9,
                     100 * moved_fused / times["symgraph"] / bandwidth, bandwidth / 1e9))
    return rows


def g2(ctx, real, rows_, cols):
    """Softmax over the rows, into a device buffer."""
    import symgraph
    import symgraph.tensor as T

    a = np.random.default_rng(1).standard_normal((rows_, cols)).astype("f")
    e = np.exp(a - a.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    with symgraph.config.change_flags(_device_flags(real)):
        x = symgraph.shared(a, name="x")
        out = symgraph.shared(np.zeros_like(a), name="out")
        f = symgraph.function([], [], updates=[(out, T.nnet.softmax(x))])
    f()
    label = "G2 softmax %dx%d" % (rows_, cols)
    row = _row(ctx, label, np.allclose(out.get_value(), want, rtol=1e-5, atol=1e-7))
    if not real:
        return [row]
    fns = {"symgraph": _sync_call(f)}
    torch, jax = _torch_cuda(), _jax_gpu()
    if torch is not None:
        t = torch.from_numpy(a).cuda()

        def torch_softmax():
            r = torch.softmax(t, dim=1)
            torch.cuda.synchronize()
            return r
        fns["PyTorch"] = torch_softmax
    if jax is not None:
        ja = jax.device_put(a, jax.devices("gpu")[0])
        jf = jax.jit(lambda v: jax.nn.softmax(v, axis=1))
        fns["JAX"] = lambda: jf(ja).block_until_ready()
    return [Row(label, measure(ctx, fns))]


def g3(ctx, real):
    """The MLP training step, data on the device."""
    params, (x, y) = mlp_params(), mlp_batch()
    if not real:
        x, y = x[:16], y[:16]
    ref = TheanoLike("symgraph")
    cpu_cost = float(ref.w4(params)(x, y))
    step = device_step(TheanoLike("symgraph").mlp_graph, params, (x, y), real)
    label = "G3 MLP step (batch %d)" % (MLP_BATCH if real else 16)
    row = _row(ctx, label, np.isclose(float(step()), cpu_cost, rtol=1e-4))
    if not real:
        return [row]
    fns = {"symgraph": step}
    torch, jax = _torch_cuda(), _jax_gpu()
    if torch is not None:
        tstep = torch_mlp_step(torch, params, device="cuda")
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        fns["PyTorch"] = lambda: float(tstep(tx, ty))
    if jax is not None:
        jstep = jax_mlp_step(jax)
        gpu = jax.devices("gpu")[0]
        state = {"ps": [jax.device_put(p, gpu) for p in params]}
        jx, jy = jax.device_put(x, gpu), jax.device_put(y, gpu)

        def jax_step():
            state["ps"], c = jstep(state["ps"], jx, jy)
            return float(c)
        fns["JAX"] = jax_step
    return [Row(label, measure(ctx, fns), note="lr %g" % LR)]


def g4(ctx, real):
    """The convnet training step (W5's model), data on the device."""
    params, (x, y) = convnet_params(), convnet_batch()     # the batch size is in the graph
    conv = SymgraphConv()
    cpu_cost = float(conv.convnet_step(params, {})(x, y))
    step = device_step(conv.convnet_graph, params, (x, y), real)
    label = "G4 convnet step (batch %d)" % len(x)
    row = _row(ctx, label, np.isclose(float(step()), cpu_cost, rtol=1e-4))
    if not real:
        return [row]
    fns = {"symgraph": lambda: float(step())}
    torch = _torch_cuda()
    if torch is not None:
        fns["PyTorch"] = _torch_convnet(torch, params, x, y)
    return [Row(label, measure(ctx, fns))]


def _torch_convnet(torch, params, x, y):
    """W5's step in PyTorch on the GPU (cross-correlation: the filters flipped)."""
    from models_conv import flipped

    F = torch.nn.functional
    dev = torch.device("cuda")
    ps = [torch.tensor(p, device=dev, requires_grad=True)
          for p in [flipped(params[0])] + params[1:]]
    tx, ty = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)

    def step():
        h = F.max_pool2d(F.relu(F.conv2d(tx, ps[0], ps[1])), 2)
        loss = F.cross_entropy(h.flatten(1) @ ps[2] + ps[3], ty)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            torch._foreach_add_(ps, grads, alpha=-LR)
        return float(loss)
    return step


def _row(ctx, label, correct):
    if not correct:
        ctx.notes.append("%s: symgraph on the device does not match the CPU/NumPy" % label)
    return Row(label, {"symgraph": "correct" if correct else "WRONG"}, unit="text")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing runs")
    args = parser.parse_args(argv)
    import symgraph.gpu

    real = symgraph.gpu.is_available()
    ctx = Ctx(quick=args.quick, threads=1)
    start = time.perf_counter()
    if real:
        rows = g1(ctx, True, 10 ** 7) + g2(ctx, True, 4096, 1024) + g3(ctx, True) + \
            g4(ctx, True)
    else:
        print("No GPU here: the workloads run small on the emulated device, checked "
              "against NumPy and the CPU (no times).\n")
        rows = g1(ctx, False, 10_001) + g2(ctx, False, 33, 257) + g3(ctx, False) + \
            g4(ctx, False)
    print(render(rows, COLUMNS if real else ("symgraph",)))
    for note in ctx.notes:
        print("- " + note)
    print("\n(%.0f s)" % (time.perf_counter() - start))
    return 1 if any("does not match" in n for n in ctx.notes) else 0


if __name__ == "__main__":
    sys.exit(main())
