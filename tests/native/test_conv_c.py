"""The C kernels of DnnConv, DnnConvGradI and DnnConvGradW against their Python ``perform``.

Every kernel of this module is compiled into ONE library (``_library``), with
the test harness's flags; the kernels reach the algorithms through the
algorithm library of ``conv_library.py`` (built once into the compile cache).

Covered: every algorithm of every direction (concrete flags, fallbacks,
guesses, timings), border modes, strides larger than the filter, pads larger
than the filter, dilation, groups, 1x1 and non-square filters, batch 1 and
channel 1, 3D, float16/32/64, the precisions, non-contiguous, Fortran-ordered
and negative-stride inputs, the errors of bad shapes; then the kernels through
``symgraph.function`` (DebugMode, the reported choices).
"""

import ctypes
import functools

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.cpu.conv import tuning as conv_tuning
from symgraph.ops import conv_reference as ref
from symgraph.ops.conv_algorithms import ALGO_IMPLS, DnnConv, DnnConvGradI, DnnConvGradW
from tests.native.kernel_harness import (MAXDIMS, KernelError, SgArray, SgError,
                                        compile_kernels, describe, run_python)
from symgraph.backends.cpu.lowerings import cpu_kernel

# -- the op parameters and shapes under test ------------------------------------------

PROPS = {
    "basic": dict(convdim=2, border_mode="valid"),
    "strided": dict(convdim=2, border_mode=(1, 2), subsample=(2, 3), filter_flip=False),
    "dilated": dict(convdim=2, border_mode="half", filter_dilation=(2, 1), num_groups=2),
    "full": dict(convdim=2, border_mode="full", subsample=(1, 2), num_groups=3),
    "3d": dict(convdim=3, border_mode=(1, 0, 1), subsample=(1, 2, 1),
               filter_dilation=(1, 1, 2), num_groups=2),
}
#: Per parameter set, (image shape, filter shape) pairs.
SHAPES = {
    "basic": [((2, 3, 7, 6), (4, 3, 3, 2)), ((1, 1, 4, 4), (1, 1, 1, 1)),
              ((2, 8, 6, 6), (8, 8, 3, 3))],
    # a stride larger than the 1x1 filter; pads larger than the filter
    "strided": [((2, 2, 6, 9), (3, 2, 2, 3)), ((1, 1, 3, 4), (2, 1, 1, 1))],
    "dilated": [((2, 4, 7, 6), (6, 2, 3, 2)), ((1, 2, 5, 5), (2, 1, 2, 2))],
    "full": [((1, 6, 5, 4), (3, 2, 2, 3))],
    "3d": [((1, 4, 4, 5, 6), (2, 2, 2, 3, 2))],
}
CLASSES = {"fwd": DnnConv, "bwd_data": DnnConvGradI, "bwd_filter": DnnConvGradW}
TOL = {"float16": 2e-2, "float32": 2e-4, "float64": 1e-10}
#: The dnn.conv.workmem_bytes of the workspace-limit variants: less than any
#: algorithm's workspace but direct convolution's (none).
WORKMEM = 1


#: The parameter sets every algorithm runs on (the algorithms' own tests, through
#: conv_harness, cover the other geometries; these check the kernels' plumbing).
ALGO_PROPS = ("strided", "3d")


def _algo_cases():
    """(props, direction, algo) of the every-algorithm test: all algorithms on
    ALGO_PROPS, and the forward ones on 'basic' too (3x3 filters with 8
    channels: where Winograd runs rather than falls back)."""
    cases = [(p, d, a) for p in ALGO_PROPS for d, algos in ALGO_IMPLS.items() for a in algos]
    cases += [("basic", "fwd", a) for a in ALGO_IMPLS["fwd"]]
    cases += [(p, d, "none") for p in ("basic", "dilated", "full") for d in ALGO_IMPLS
              if (p, d, "none") not in cases]
    return cases


ALGO_CASES = _algo_cases()


def _variants():
    """Every (props, direction, algo, dtype, precision) this module runs: one
    kernel each, all compiled together."""
    out = [(p, d, a, "float32", "float32") for p, d, a in ALGO_CASES]
    for direction in ALGO_IMPLS:
        for props in ("basic", "strided"):
            out.append((props, direction, "none", "float64", "float64"))
        for algo in ("guess_once", "time_on_shape_change"):
            out.append(("basic", direction, algo, "float32", "float32"))
        out.append(("basic", direction, "none", "float16", "float32"))
        out.append(("basic", direction, "none", "float32", "float16"))
        out.append(("strided", direction, "none", "float32", "float64"))
    out.append(("strided", "fwd", "winograd", "float64", "float64"))
    out.append(("basic", "fwd", "guess_on_shape_change", "float32", "float32"))
    # a workspace limit of WORKMEM bytes
    out += [("basic", d, "time_on_shape_change", "float32", "float32", WORKMEM)
            for d in ALGO_IMPLS]
    return out


VARIANTS = _variants()


@functools.lru_cache(maxsize=None)
def _node(props, direction, algo, dtype, precision, workmem=0):
    spec = PROPS[props]
    nd = spec["convdim"] + 2
    op = CLASSES[direction](**spec, algo=algo, precision=precision)
    a = T.tensor(dtype, shape=(None,) * nd)
    b = T.tensor(dtype, shape=(None,) * nd)
    if direction == "fwd":
        return op(a, b).owner
    shape = T.tensor("int64", shape=(spec["convdim"],))
    return op(a, b, shape).owner


# -- one library for every kernel ----------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _library():
    """(CDLL, {variant: prefix}) with the kernels of every variant."""
    kernels, prefixes = [], {}
    for index, variant in enumerate(VARIANTS):
        node = _node(*variant)
        workmem = variant[5] if len(variant) > 5 else 0
        with symgraph.config.change_flags({"dnn.conv.workmem_bytes": workmem}):
            kernels.append((f"cv{index}", cpu_kernel(node)))
        prefixes[variant] = f"cv{index}"
    return compile_kernels(kernels), prefixes


def run_c(variant, arrays):
    """The kernel of ``variant`` on ``arrays``; the output is filled with
    garbage first (a kernel must write every element)."""
    lib, prefixes = _library()
    node = _node(*variant)
    prefix = prefixes[variant]
    in_desc = (SgArray * len(arrays))(*[describe(a) for a in arrays])
    err = SgError()
    shapes = (ctypes.c_int64 * MAXDIMS)()
    if getattr(lib, f"{prefix}_shape")(in_desc, shapes, ctypes.byref(err)):
        raise KernelError(err.kind, err.msg.decode())
    out_var = node.outputs[0]
    out = np.full(tuple(shapes[d] for d in range(out_var.ndim)), 7, dtype=out_var.dtype)
    out_desc = (SgArray * 1)(describe(out))
    if getattr(lib, f"{prefix}_run")(in_desc, out_desc, ctypes.byref(err)):
        raise KernelError(err.kind, err.msg.decode())
    return out


def _arrays(props, direction, x_shape, w_shape, dtype, rng):
    """The node's inputs for an image of ``x_shape`` and filters of ``w_shape``."""
    spec = PROPS[props]
    nd = spec["convdim"]
    dil = spec.get("filter_dilation", (1,) * nd)
    pads = ref.resolve_pads(spec["border_mode"], w_shape[2:], dil)
    y_shape = ref.conv_output_shape(x_shape, w_shape, pads, spec.get("subsample", (1,) * nd),
                                    dil)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    dy = rng.standard_normal(y_shape).astype(dtype)
    if direction == "fwd":
        return [x, w]
    if direction == "bwd_data":
        return [w, dy, np.array(x_shape[2:], dtype="int64")]
    return [x, dy, np.array(w_shape[2:], dtype="int64")]


def _check(variant, arrays):
    got = run_c(variant, arrays)
    (want,) = run_python(_node(*variant), arrays)
    assert got.dtype == want.dtype and got.shape == want.shape
    dtype = variant[3]
    tol = max(TOL[dtype], TOL[variant[4]])
    scale = max(1.0, float(np.abs(want.astype("float64")).max()) if want.size else 1.0)
    np.testing.assert_allclose(got.astype("float64"), want.astype("float64"), rtol=tol,
                               atol=tol * scale, err_msg=str(variant))


# -- values ------------------------------------------------------------------------------

@pytest.mark.parametrize("props,direction,algo", ALGO_CASES)
def test_every_algorithm_against_perform(props, direction, algo, rng):
    """Each concrete algorithm (or its fallback) equals the reference, float32."""
    for x_shape, w_shape in SHAPES[props]:
        variant = (props, direction, algo, "float32", "float32")
        _check(variant, _arrays(props, direction, x_shape, w_shape, "float32", rng))


@pytest.mark.parametrize("props", ["basic", "strided"])
@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
def test_float64(props, direction, rng):
    for x_shape, w_shape in SHAPES[props]:
        variant = (props, direction, "none", "float64", "float64")
        _check(variant, _arrays(props, direction, x_shape, w_shape, "float64", rng))


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
@pytest.mark.parametrize("algo", ["guess_once", "time_on_shape_change"])
def test_meta_algorithms(direction, algo, rng):
    """A guess and a timing choose a working algorithm for each new shape."""
    for x_shape, w_shape in SHAPES["basic"]:
        variant = ("basic", direction, algo, "float32", "float32")
        _check(variant, _arrays("basic", direction, x_shape, w_shape, "float32", rng))


def _layouts(arr):
    """The values of ``arr`` as C-contiguous, Fortran, negative-stride and
    every-other-element views."""
    yield arr
    yield np.asfortranarray(arr)
    yield arr[::-1].copy()[::-1]
    wide = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), dtype=arr.dtype)
    wide[..., ::2] = arr
    yield wide[..., ::2]


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
@pytest.mark.parametrize("dtype,precision", [("float32", "float32"), ("float64", "float64"),
                                             ("float16", "float32")])
def test_layouts(direction, dtype, precision, rng):
    """Strided, reversed and Fortran inputs give the contiguous result."""
    props = "basic" if dtype != "float64" else "strided"
    variant = (props, direction, "none", dtype, precision)
    x_shape, w_shape = SHAPES[props][0]
    arrays = _arrays(props, direction, x_shape, w_shape, dtype, rng)
    want = run_c(variant, arrays)
    for k in range(2):
        for layout in _layouts(arrays[k]):
            changed = list(arrays)
            changed[k] = layout
            np.testing.assert_array_equal(run_c(variant, changed), want)
    shape_vec = arrays[-1]
    if direction != "fwd":  # the shape input strided too
        spread = np.zeros(2 * len(shape_vec), dtype="int64")
        spread[::2] = shape_vec
        np.testing.assert_array_equal(run_c(variant, arrays[:2] + [spread[::2]]), want)


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
def test_float16_data(direction, rng):
    """float16 data computed in float32 (as_input_f32), against the reference."""
    for x_shape, w_shape in SHAPES["basic"]:
        variant = ("basic", direction, "none", "float16", "float32")
        _check(variant, _arrays("basic", direction, x_shape, w_shape, "float16", rng))


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
def test_float16_precision_rounds(direction, rng):
    """precision='float16' on float32 data: inputs and result rounded to
    float16 (the result holds only float16 values)."""
    x_shape, w_shape = SHAPES["basic"][0]
    variant = ("basic", direction, "none", "float32", "float16")
    arrays = _arrays("basic", direction, x_shape, w_shape, "float32", rng)
    got = run_c(variant, arrays)
    np.testing.assert_array_equal(got.astype("float16").astype("float32"), got)
    _check(variant, arrays)


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
def test_float64_precision_on_float32(direction, rng):
    """precision='float64' on float32 data computes in double: the result is
    the exact one rounded once."""
    x_shape, w_shape = SHAPES["strided"][0]
    variant = ("strided", direction, "none", "float32", "float64")
    arrays = _arrays("strided", direction, x_shape, w_shape, "float32", rng)
    got = run_c(variant, arrays)
    (want,) = run_python(_node(*variant), arrays)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    single = run_c(("strided", direction, "none", "float32", "float32"), arrays)
    exact = run_python(_node("strided", direction, "none", "float64", "float64"),
                       [a.astype("float64") if a.dtype.kind == "f" else a
                        for a in arrays])[0]
    # double accumulation is at least as close to the exact result
    assert np.abs(got - exact).max() <= np.abs(single - exact).max() + 1e-7


def test_empty_operands_give_zeros():
    """Zero channels: an empty sum, every output element 0."""
    variant = ("basic", "fwd", "large", "float32", "float32")
    out = run_c(variant, [np.ones((2, 0, 5, 5), "float32"), np.ones((3, 0, 2, 2), "float32")])
    np.testing.assert_array_equal(out, np.zeros((2, 3, 4, 4), "float32"))
    variant = ("basic", "bwd_filter", "none", "float32", "float32")
    out = run_c(variant, [np.ones((0, 2, 5, 5), "float32"), np.ones((0, 3, 4, 4), "float32"),
                          np.array([2, 2])])
    np.testing.assert_array_equal(out, np.zeros((3, 2, 2, 2), "float32"))


# -- errors ----------------------------------------------------------------------------------

def test_errors_name_the_op():
    fwd = ("dilated", "fwd", "none", "float32", "float32")
    with pytest.raises(KernelError, match=r"DnnConv\{.*5 channels.*num_groups=2"):
        run_c(fwd, [np.ones((1, 5, 5, 5), "float32"), np.ones((2, 2, 2, 2), "float32")])
    with pytest.raises(KernelError, match=r"expect 3 per group x 2 groups = 6"):
        run_c(fwd, [np.ones((1, 4, 5, 5), "float32"), np.ones((2, 3, 2, 2), "float32")])
    basic = ("basic", "fwd", "none", "float32", "float32")
    with pytest.raises(KernelError, match=r"larger than the padded image"):
        run_c(basic, [np.ones((1, 1, 2, 5), "float32"), np.ones((1, 1, 3, 3), "float32")])
    grad_i = ("basic", "bwd_data", "none", "float32", "float32")
    with pytest.raises(KernelError, match=r"DnnConvGradI.*output gradient has spatial shape "
                                          r"\(3, 3\)"):
        run_c(grad_i, [np.ones((1, 1, 2, 2), "float32"), np.ones((1, 1, 3, 3), "float32"),
                       np.array([5, 5])])
    grad_w = ("basic", "bwd_filter", "none", "float32", "float32")
    with pytest.raises(KernelError, match=r"DnnConvGradW.*negative"):
        run_c(grad_w, [np.ones((1, 1, 4, 4), "float32"), np.ones((1, 1, 3, 3), "float32"),
                       np.array([-2, 2])])
    with pytest.raises(KernelError, match=r"DnnConvGradW.*2 entries, not|has 3 entries"):
        run_c(grad_w, [np.ones((1, 1, 4, 4), "float32"), np.ones((1, 1, 3, 3), "float32"),
                       np.array([2, 2, 2])])


# -- the choice -------------------------------------------------------------------------------

def _choices(variant):
    return conv_tuning.choices_for(_node(*variant).op)


# The kernels remember their choices per shape for the process: each test of
# the choice uses shapes that no other test runs.
_FALLBACK_SHAPE = ((1, 2, 6, 5), (3, 2, 3, 2))
_WORKMEM_SHAPE = ((1, 3, 6, 6), (2, 3, 2, 2))
_TIMING_SHAPES = [((1, 2, 5, 7), (2, 2, 3, 3)), ((2, 1, 4, 4), (3, 1, 2, 1))]


@pytest.fixture
def fresh_tuning(tmp_path, monkeypatch):
    """An empty tuning cache (under a compiledir of its own) and registry, which
    keeps every timing (even one a loaded machine disturbed)."""
    monkeypatch.setattr(conv_tuning, "MIN_CPU_SHARE", 0)
    with symgraph.config.change_flags(compiledir=str(tmp_path)):
        conv_tuning.reset()
        yield tmp_path / "tuning"
    conv_tuning.reset()


def test_run_time_fallback_is_reported(fresh_tuning, rng):
    """Winograd asked for 3x2 filters (unknown until run time): the kernel falls
    back and reports it, with the flag's choice for a 3x3 shape."""
    variant = ("basic", "fwd", "winograd", "float32", "float32")
    x_shape, w_shape = _FALLBACK_SHAPE
    _check(variant, _arrays("basic", "fwd", x_shape, w_shape, "float32", rng))
    (choice,) = _choices(variant).values()
    assert choice.source == "fallback" and choice.impl == "gemm"
    assert "gemm (fallback)" in conv_tuning.describe(_node(*variant).op)
    assert conv_tuning.timings_run() == 0


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
def test_workspace_limit_respected(direction, fresh_tuning, rng):
    """time_* with dnn.conv.workmem_bytes: only algorithms within the limit are timed."""
    variant = ("basic", direction, "time_on_shape_change", "float32", "float32", WORKMEM)
    x_shape, w_shape = _WORKMEM_SHAPE
    _check(variant, _arrays("basic", direction, x_shape, w_shape, "float32", rng))
    (choice,) = [c for key, c in _choices(variant).items() if f" ws={WORKMEM} " in key]
    assert choice.source == "timing" and set(choice.times) == {"direct"}
    assert choice.impl == "direct"


@pytest.mark.parametrize("direction", sorted(ALGO_IMPLS))
def test_timing_times_every_algorithm_once_per_shape(direction, fresh_tuning, rng):
    """time_on_shape_change: one timing per new shape (of every applicable
    algorithm), none for a shape seen before; the tuning cache holds them."""
    variant = ("basic", direction, "time_on_shape_change", "float32", "float32")
    for x_shape, w_shape in _TIMING_SHAPES * 2:
        run_c(variant, _arrays("basic", direction, x_shape, w_shape, "float32", rng))
    assert conv_tuning.timings_run() == 2
    timed = [c for c in _choices(variant).values() if c.source == "timing"]
    assert len(timed) == 2
    assert set(timed[0].times) >= {"direct", "tiled", "gemm"}
    assert timed[0].impl == min(timed[0].times, key=timed[0].times.get)
    assert len(list(fresh_tuning.glob("*.json"))) == 2


@pytest.mark.parametrize("x_shape,w_shape,expected", [
    ((1, 2, 5, 5), (2, 2, 3, 3), "direct"),                  # tiny
    ((2, 16, 10, 10), (16, 16, 3, 3), "winograd"),           # 3x3, many channels
    ((2, 16, 12, 12), (16, 16, 5, 5), "fft"),                # large filters
    ((2, 4, 12, 12), (8, 4, 5, 5), "gemm"),                  # few channels
])
def test_guess(x_shape, w_shape, expected, fresh_tuning, rng):
    """guess_on_shape_change: the heuristic's choice per shape (GEMM where the
    preferred algorithm refuses the shape), reported as a guess."""
    from tests.native import conv_harness

    if not conv_harness.supports("fwd", expected, conv_harness.geometry(x_shape, w_shape)):
        expected = "gemm"
    variant = ("basic", "fwd", "guess_on_shape_change", "float32", "float32")
    _check(variant, _arrays("basic", "fwd", x_shape, w_shape, "float32", rng))
    (choice,) = _choices(variant).values()
    assert (choice.impl, choice.source) == (expected, "guess")
