"""Reductions on OpenMP threads (``reduce_codegen`` with the ``openmp`` flag).

The OpenMP kernel of a node is run with 1, 2 and 3 threads (set in this
process through libgomp, as the convolution tests do) and compared with the
serial kernel of the same node: bit for bit, since path A folds the blocks'
results in the serial order and outputs (or runs of columns) shared out are
computed as serially.  The one exception is path B with few columns, whose
rows are cut into a fixed number of parts (a function of the row count, not
of the thread count): float sums and products then agree with the serial
kernel to rounding, and have the same bits on 1, 2 and 3 threads.  Values are
checked against the Python ``perform`` and NumPy too.
"""

import contextlib
import ctypes
import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.compile.function import function
from symgraph.backends.cpu.reduce.codegen import COL_UNIT, PAIR_BLOCK, PLAIN_BLOCK
from symgraph.backends.cpu.reduce.lowering import accumulator_dtype
from symgraph.config import config
from symgraph.opt.fuse_reduce import ReduceOfElemwise
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from symgraph.backends.cpu.lowerings import cpu_kernel
from symgraph.backends.cpu.backend import CPU

RNG = np.random.default_rng(7)
THREADS = (1, 2, 3)
FNS = {"sum": T.sum, "prod": T.prod, "max": T.max, "min": T.min, "all": T.all,
       "any": T.any, "argmax": T.argmax, "argmin": T.argmin}
_GOMP = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")


@contextlib.contextmanager
def threads(count):
    """OpenMP kernels called inside the block use ``count`` threads."""
    before = _GOMP.omp_get_max_threads()
    _GOMP.omp_set_num_threads(count)
    try:
        yield
    finally:
        _GOMP.omp_set_num_threads(before)


def kernels(node):
    """(serial kernel, OpenMP kernel with no size threshold) of ``node``."""
    with config.change_flags(openmp=False):
        serial = cpu_kernel(node)
    with config.change_flags(openmp=True, openmp_reduce_minsize=0):
        parallel = cpu_kernel(node)
    assert not serial.openmp and "#pragma omp" not in serial.source
    # the drivers, and their OpenMP regions, are in the support library
    # (reduce/drivers.py): the kernels differ only in the size threshold
    for kernel in (serial, parallel):
        assert not kernel.openmp and "#pragma omp" not in kernel.source
        assert "sg_red_run_" in kernel.source
    assert "SG_RED_SERIAL" in serial.source and "SG_RED_SERIAL" not in parallel.source
    return serial, parallel


def bits(value):
    value = np.asarray(value)
    return value.dtype, value.shape, value.tobytes()


def data(shape, dtype):
    if dtype == "bool":
        return RNG.random(shape) < 0.97
    if dtype.startswith(("int", "uint")):
        return RNG.integers(0 if dtype.startswith("u") else -3, 4, size=shape).astype(dtype)
    # near 1, so that products of thousands of elements stay finite
    value = 1 + (RNG.random(shape) - 0.5) * 2e-3
    return (value * RNG.choice([-1, 1], size=shape)).astype(dtype)


def layouts(value):
    """The same values contiguous, reversed, strided and transposed."""
    out = [value, value[::-1]]
    big = np.repeat(value, 2, axis=-1)
    out.append(big[..., ::2])
    if value.ndim >= 2:
        out.append(np.asfortranarray(value))
    return out


def check_threads(node, inputs, exact=True):
    """The OpenMP kernel with 1, 2 and 3 threads against the serial kernel
    (same bits when ``exact``, else to rounding) and against itself on
    another thread count (same bits always), and the serial kernel against
    the Python ``perform``."""
    serial, parallel = kernels(node)
    (want,) = run_kernel(node, inputs, serial)
    (ref,) = run_python(node, inputs)
    ref = np.asarray(ref)
    assert want.dtype == ref.dtype and want.shape == ref.shape
    np.testing.assert_allclose(want.astype("float64"), ref.astype("float64"),
                               rtol=1e-3, atol=1e-3)
    first = None
    for count in THREADS:
        with threads(count):
            (got,) = run_kernel(node, inputs, parallel)
            (again,) = run_kernel(node, inputs, parallel)
        assert bits(got) == bits(again), count
        first = bits(got) if first is None else first
        assert bits(got) == first, (count, got)
        if exact:
            assert bits(got) == bits(want), (count, got, want)
        else:
            # to the rounding of a sum of that many elements (and of float16)
            rtol = 2e-3 if want.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6 * inputs[0].size)


# -- every kind and dtype, on each way of sharing the work ------------------------------

# (shape, axis, what it exercises)
SHAPES = [
    ((3 * PAIR_BLOCK + 77,), None, "one group split into blocks"),
    ((2, 3, 2 * PAIR_BLOCK + 5), (0, 2), "few outputs, each group split"),
    ((97, 300), 1, "many outputs shared out"),
    ((40, 5 * COL_UNIT + 9), 0, "path B: runs of columns shared out"),
    ((3000, 5), 0, "path B: few columns, rows split"),
    ((6, 50, 40), (0, 2), "a group over two dimensions"),
    ((2001, 3), 1, "groups shorter than the lanes: runs of outputs"),
    ((9, 70, 37), 2, "one-block groups: runs of outputs along each row"),
]
DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint16", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", list(FNS))
def test_every_kind_and_dtype_matches_serial(kind, dtype):
    for shape, axis, _ in SHAPES:
        x = T.tensor(dtype, shape=(None,) * len(shape))
        node = FNS[kind](x, axis=axis).owner
        rows_split = len(shape) == 2 and shape[1] < COL_UNIT and axis == 0
        acc = accumulator_dtype(node.op, kind, dtype, node.outputs[0].dtype)
        # split rows reassociate float sums and products only
        exact = not (rows_split and kind in ("sum", "prod") and acc.startswith("float"))
        check_threads(node, [data(shape, dtype)], exact)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 1), (1, 2), (0, 2), ()])
@pytest.mark.parametrize("kind", ["sum", "max", "argmin"])
def test_axis_sets_and_layouts(kind, axis):
    x = T.tensor("float32", shape=(None, None, None))
    node = FNS[kind](x, axis=axis).owner
    for i, value in enumerate(layouts(data((5, 8, 700), "float32"))):
        # The Fortran-ordered copy (the last) keeps few columns innermost in
        # memory for some axis sets: path B with split rows.
        check_threads(node, [value], exact=kind != "sum" or i < 3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_short_groups_sum_in_order_from_zero(dtype):
    """A contiguous group shorter than the lanes is added in order from +0
    (what the lanes and their tree gave before short groups were summed in
    one go): the same bits on every thread count, and as NumPy adds them."""
    x = T.matrix(dtype=dtype)
    node = T.sum(x, axis=1).owner
    value = data((4001, 5), dtype) * 1e3
    value[7] = -0.0
    value[9, 2] = np.nan
    want = np.zeros(4001, dtype)
    for j in range(5):
        want = want + value[:, j]
    check_threads(node, [value])
    _, parallel = kernels(node)
    (got,) = run_kernel(node, [value], parallel)
    assert bits(got) == bits(want)
    assert np.signbit(got[7]) == np.False_


def test_long_int_groups_cross_plain_blocks():
    x = T.vector("x", dtype="int64")
    value = data((3 * PLAIN_BLOCK + 11,), "int64")
    for kind in ("sum", "prod", "max", "argmax"):
        check_threads(FNS[kind](x).owner, [value])


# -- NaN, ties, empty groups -----------------------------------------------------------

@pytest.mark.parametrize("kind", ["max", "min", "argmax", "argmin", "sum"])
def test_nan_in_any_threads_range(kind):
    x = T.vector("x", dtype="float32")
    node = FNS[kind](x).owner
    n = 6 * PLAIN_BLOCK
    for where in ([0], [n - 1], [n // 2 + 3], [n // 3, n - 2], [5 * PLAIN_BLOCK + 1]):
        value = data((n,), "float32")
        value[where] = np.nan
        check_threads(node, [value])
        assert np.isnan(run_kernel(node, [value])[0]) or kind.startswith("arg")


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_ties_across_threads_keep_the_first_index(kind):
    x = T.vector("x", dtype="int32")
    node = FNS[kind](x).owner
    n = 4 * PLAIN_BLOCK
    for places in ([n - 1, n // 2], [3, n - 3], [n // 3 + 1, 2 * n // 3 + 1], [0, n - 1]):
        value = np.zeros(n, dtype="int32")
        value[places] = 9 if kind == "argmax" else -9
        check_threads(node, [value])
        (got,) = run_kernel(node, [value], kernels(node)[1])
        assert int(got) == min(places)


def test_signed_zeros_keep_the_serial_choice():
    x = T.vector("x", dtype="float64")
    value = np.zeros(5 * PLAIN_BLOCK)
    value[::3] = -0.0
    for kind in ("max", "min"):
        check_threads(FNS[kind](x).owner, [value])


@pytest.mark.parametrize("kind", ["max", "argmin"])
def test_empty_groups_raise_the_python_message(kind):
    x = T.matrix("x", dtype="float32")
    node = FNS[kind](x, axis=1).owner
    value = np.zeros((4, 0), dtype="float32")
    with pytest.raises(ValueError) as py_err:
        run_python(node, [value])
    for count in THREADS:
        with threads(count), pytest.raises(KernelError) as c_err:
            run_kernel(node, [value], kernels(node)[1])
        assert str(c_err.value) == str(py_err.value)


@pytest.mark.parametrize("kind", ["sum", "prod", "all", "any"])
def test_empty_groups_give_the_identity(kind):
    x = T.matrix("x", dtype="float64")
    for axis in (0, 1, None):
        node = FNS[kind](x, axis=axis).owner
        check_threads(node, [np.zeros((0, 3))])
        check_threads(node, [np.zeros((3, 0))])


# -- the float sum's error bound ----------------------------------------------------------

def test_float32_sum_of_a_million_stays_pairwise():
    x = T.vector("x", dtype="float32")
    node = T.sum(x).owner
    value = RNG.random(10 ** 6).astype("float32")
    exact = float(value.astype("float64").sum())
    _, parallel = kernels(node)
    for count in THREADS:
        with threads(count):
            (got,) = run_kernel(node, [value], parallel)
        assert abs(float(got) - exact) <= 1e-6 * exact


def test_split_rows_stay_within_the_serial_bound():
    x = T.matrix("x", dtype="float32")
    node = T.sum(x, axis=0).owner
    value = RNG.random((200000, 3)).astype("float32")
    exact = value.astype("float64").sum(axis=0)
    _, parallel = kernels(node)
    for count in THREADS:
        with threads(count):
            (got,) = run_kernel(node, [value], parallel)
        # rows are summed one after the other, as NumPy does for axis 0
        np.testing.assert_allclose(got, exact, rtol=200000 * 6e-8)


# -- the fused reduction and compiled functions -----------------------------------------------

def _fused_node(build, *types):
    """The ReduceOfElemwise node of ``build(*inputs)`` in a compiled graph."""
    inputs = [T.tensor(dtype, shape=shape) for dtype, shape in types]
    fgraph = function(inputs, build(*inputs)).maker.fgraph
    (node,) = [n for n in fgraph.toposort() if isinstance(n.op, ReduceOfElemwise)]
    assert len(node.inputs) == len(inputs)
    return node


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_fused_sum_of_exp(axis):
    matrix = ("float32", (None, None))
    node = _fused_node(lambda x, y: T.sum(T.exp(x * y), axis=axis), matrix, matrix)
    for shape in [(3, 5 * PAIR_BLOCK + 3), (5 * COL_UNIT + 3, 7), (2000, 3)]:
        a, b = data(shape, "float32"), data(shape, "float32")
        rows_split = axis == 0 and shape[1] < COL_UNIT
        check_threads(node, [a, b], exact=not rows_split)
        np.testing.assert_allclose(run_kernel(node, [a, b])[0],
                                   np.sum(np.exp(a * b), axis=axis), rtol=1e-5)


def test_fused_max_with_a_broadcast_input():
    node = _fused_node(lambda x, y: T.max(T.exp(x - y), axis=1),
                       ("float32", (None, None)), ("float32", (None, 1)))
    a = data((5, 3 * PLAIN_BLOCK), "float32")
    b = data((5, 1), "float32")
    a[2, 40000] = np.nan
    check_threads(node, [a, b])
    assert np.isnan(run_kernel(node, [a, b])[0][2])


@pytest.mark.parametrize("kind", ["sum", "prod", "min"])
def test_fused_short_groups_with_an_input_constant_over_them(kind):
    """Runs of short groups reload the group-constant input for each output."""
    node = _fused_node(lambda x, y: FNS[kind](T.exp(x) * y, axis=1),
                       ("float32", (None, None)), ("float32", (None, 1)))
    a = data((3001, 5), "float32")
    b = (RNG.standard_normal((3001, 1)) + 2).astype("float32")
    check_threads(node, [a, b])
    want = {"sum": np.sum, "prod": np.prod, "min": np.min}[kind](np.exp(a) * b, axis=1)
    np.testing.assert_allclose(run_kernel(node, [a, b])[0], want, rtol=1e-5)


def test_compiled_function_with_openmp():
    x = T.vector("x", dtype="float32")
    value = (RNG.standard_normal(300000) * 0.1).astype("float32")
    serial = function([x], T.sum(T.exp(x)))
    with config.change_flags(openmp=True, openmp_reduce_minsize=1000):
        parallel = function([x], T.sum(T.exp(x)))
    nodes = parallel.maker.fgraph.toposort()
    assert any(isinstance(n.op, ReduceOfElemwise) for n in nodes)
    for count in THREADS:
        with threads(count):
            assert bits(parallel(value)) == bits(serial(value))
    np.testing.assert_allclose(parallel(value), np.sum(np.exp(value)), rtol=1e-5)


def test_openmp_and_its_threshold_reach_the_cache_key():
    from symgraph.backends.native.linker import _kernel_key

    x = T.matrix("x", dtype="float32")
    node = T.sum(x, axis=1).owner
    keys = set()
    for flags in ({"openmp": False}, {"openmp": True, "openmp_reduce_minsize": 10},
                  {"openmp": True, "openmp_reduce_minsize": 20}):
        with config.change_flags(**flags):
            keys.add(_kernel_key(cpu_kernel(node), CPU))
    assert len(keys) == 3


def test_thread_count_from_the_environment(tmp_path):
    """A fresh process with OMP_NUM_THREADS=3 and the flag from SYMGRAPH_FLAGS
    gives the serial bits."""
    script = (
        "import sys, numpy as np, symgraph.tensor as T\n"
        "from symgraph.compile.function import function\n"
        "from symgraph.backends.cpu.lowerings import cpu_kernel\n"
        "x = T.matrix('x', dtype='float32')\n"
        "v = np.random.default_rng(1).random((300, 4000)).astype('float32')\n"
        "f = function([x], [T.sum(T.exp(x)), T.max(x, axis=0), T.argmax(x)])\n"
        "kernels = [cpu_kernel(n) for n in f.maker.fgraph.toposort()]\n"
        # a reduction kernel built with the flag has a threshold it can reach
        "print(any(k is not None and 'sg_red_run_' in k.source and 'SG_RED_SERIAL' not in k.source"
        " for k in kernels))\n"
        "np.save(sys.argv[1], np.concatenate("
        "[np.atleast_1d(np.asarray(o, dtype='float64')) for o in f(v)]))\n")
    root = Path(__file__).resolve().parents[2]
    results = []
    for count, flags in ((3, "openmp=True,openmp_reduce_minsize=0"), (1, "openmp=False")):
        out = tmp_path / f"{count}.npy"
        env = dict(os.environ, OMP_NUM_THREADS=str(count), PYTHONPATH=str(root))
        env["SYMGRAPH_FLAGS"] = ",".join(
            f for f in [os.environ.get("SYMGRAPH_FLAGS", ""), flags] if f)
        proc = subprocess.run([sys.executable, "-c", script, str(out)], env=env,
                              capture_output=True, text=True, cwd=str(root))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.split()[-1] == str(count == 3)
        results.append(np.load(out))
    assert bits(results[0]) == bits(results[1])
