"""A small LeNet-style convnet trains, with every convolution algorithm.

conv 3x3 -> relu -> max pool 2x2 -> conv 3x3 -> relu -> max pool 2x2 -> dense ->
softmax + categorical cross-entropy with integer labels, plain SGD through
shared variables, on 32 synthetic 1x14x14 images of 4 separable classes (a
bright block in one quadrant per class).  For each value of
``dnn.conv.algo_fwd`` (and of ``dnn.conv.algo_bwd``), the optimized graph must
hold the concrete conv ops carrying that value, the loss must go down, and the
losses of 8 steps must follow those of the Python-only linker (the NumPy
references of every op): the C algorithms compute the same training run.

Shapes are the same in every test, so the kernels that do not depend on the
algorithm (pooling, softmax, element-wise) are compiled once.  Each algorithm
is its own convolution kernel, and each kernel compiles the algorithm library
(``c_src/conv/``): about 5 s per new kernel on an idle machine, 20 s under
load.  So only the default flags run in the quick suite; the sweep over every
flag value is marked slow.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.config import config
from symgraph.tensor import nnet

N, SIZE, CLASSES = 32, 14, 4
STEPS, LR = 8, 0.2
CONCRETE_FWD = ("none", "small", "large", "fft", "fft_tiling", "winograd")
META = ("guess_once", "guess_on_shape_change", "time_once", "time_on_shape_change")
CONCRETE_BWD = ("none", "deterministic", "fft", "small")
CONV_OPS = {"fwd": "DnnConv", "bwd_data": "DnnConvGradI", "bwd_filter": "DnnConvGradW"}


def _data(seed=0):
    """Images (float32, noise plus a bright block in the label's quadrant), labels."""
    rng = np.random.default_rng(seed)
    y = np.arange(N) % CLASSES
    x = rng.standard_normal((N, 1, SIZE, SIZE)).astype(np.float32) * np.float32(0.3)
    half = SIZE // 2
    for i, c in enumerate(y):
        r, col = divmod(c, 2)
        x[i, 0, r * half + 1:(r + 1) * half - 1, col * half + 1:(col + 1) * half - 1] += 1
    return x, y.astype(np.int64)


def _params(seed=1):
    """Initial weights: conv 4x1x3x3, conv 6x4x3x3, dense 24x4, zero biases."""
    rng = np.random.default_rng(seed)

    def normal(shape, fan_in):
        return rng.standard_normal(shape).astype(np.float32) * np.float32(1 / np.sqrt(fan_in))

    return [normal((4, 1, 3, 3), 9), np.zeros(4, np.float32),
            normal((6, 4, 3, 3), 36), np.zeros(6, np.float32),
            normal((24, CLASSES), 24), np.zeros(CLASSES, np.float32)]


def _train_fn():
    """The compiled SGD step ``f(x, y) -> loss`` on fresh shared weights."""
    from symgraph.tensor.signal.pool import pool_2d

    shared = [symgraph.shared(p, name="p%d" % i) for i, p in enumerate(_params())]
    w1, b1, w2, b2, wd, bd = shared
    x, y = T.tensor4("x", dtype="float32"), T.lvector("y")

    def block(h, w, b):
        h = nnet.relu(nnet.conv2d(h, w) + b.dimshuffle("x", 0, "x", "x"))
        return pool_2d(h, ws=(2, 2), ignore_border=True, mode="max")

    h = block(block(x, w1, b1), w2, b2)               # (N, 6, 2, 2)
    probs = nnet.softmax(T.dot(h.flatten(2), wd) + bd)
    loss = T.mean(nnet.categorical_crossentropy(probs, y))
    grads = symgraph.grad(loss, shared)
    updates = [(p, p - np.float32(LR) * g) for p, g in zip(shared, grads)]
    return symgraph.function([x, y], loss, updates=updates)


def _train(f):
    """The losses of ``STEPS`` SGD steps on the synthetic batch."""
    x, y = _data()
    return np.array([float(f(x, y)) for _ in range(STEPS)])


@pytest.fixture(scope="module")
def reference_losses():
    """The training run with every op's Python ``perform`` (no C)."""
    with config.change_flags(linker="py"):
        return _train(_train_fn())


def _conv_nodes(f, direction):
    """The nodes of the concrete conv op of ``direction`` in ``f``'s graph."""
    name = CONV_OPS[direction]
    return [n for n in f.maker.fgraph.toposort() if type(n.op).__name__ == name]


def _check_ops(f, direction, algo, count):
    """``count`` concrete conv nodes of ``direction``, each printing ``algo``."""
    nodes = _conv_nodes(f, direction)
    printed = [str(n.op) for n in nodes]
    assert len(nodes) == count, (direction, printed)
    assert all("'%s'" % algo in text for text in printed), (algo, printed)


def _check_training(losses, reference):
    assert np.all(np.isfinite(losses)), losses
    assert np.all(np.diff(losses) < 0), losses            # every step helps
    assert losses[-1] < 0.75 * losses[0], losses
    np.testing.assert_allclose(losses, reference, rtol=2e-3)


def test_reference_trains(reference_losses):
    """The NumPy references alone train the model (the baseline of the others)."""
    _check_training(reference_losses, reference_losses)


def test_trains_with_default_flags(reference_losses):
    """The default flags (algo_fwd 'small', algo_bwd 'small'): the graph holds
    the concrete ops, and the training run matches the Python one."""
    fwd = config.get("dnn.conv.algo_fwd")
    data, filt = config.get("dnn.conv.algo_bwd_data"), config.get("dnn.conv.algo_bwd_filter")
    f = _train_fn()
    _check_ops(f, "fwd", fwd, 2)
    _check_ops(f, "bwd_data", data, 1)
    _check_ops(f, "bwd_filter", filt, 2)
    _check_training(_train(f), reference_losses)


@pytest.mark.slow
@pytest.mark.parametrize("algo", CONCRETE_FWD + META)
def test_trains_with_algo_fwd(algo, reference_losses):
    """Every ``dnn.conv.algo_fwd`` value: the two forward convs carry it, and
    the training run matches the Python one."""
    with config.change_flags({"dnn.conv.algo_fwd": algo}):
        f = _train_fn()
    _check_ops(f, "fwd", algo, 2)
    _check_training(_train(f), reference_losses)


@pytest.mark.slow
@pytest.mark.parametrize("algo", CONCRETE_BWD + ("time_once",))
def test_trains_with_algo_bwd(algo, reference_losses):
    """Every concrete ``dnn.conv.algo_bwd`` value (and ``time_once``): the
    gradient convs carry it (one gradient of the inputs: the images need none;
    two of the filters), and the training run matches the Python one."""
    with config.change_flags({"dnn.conv.algo_bwd": algo}):
        f = _train_fn()
    _check_ops(f, "bwd_data", algo, 1)
    _check_ops(f, "bwd_filter", algo, 2)
    _check_training(_train(f), reference_losses)
