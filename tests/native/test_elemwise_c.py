"""Elemwise C kernels against the Python ``perform``: every scalar op over dtypes,
NaN/Inf/-0.0 inputs, broadcasting, size 0, non-contiguous and negative strides.

All kernels of a test module are compiled together into a few libraries (one
gcc run per chunk, chunks in parallel): hundreds of separate compiles would
take minutes.
"""

import ctypes
import hashlib
import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.backends.native.assemble import C_SRC, assemble
from symgraph.backends.cpu.elemwise.loop import elemwise_kernel
from symgraph.backends.cpu.support_lib import bind_library, generated_dir
from symgraph.ops.composite import Composite
from symgraph.ops.elemwise import Elemwise
from symgraph.ops import scalar_basic as sb, scalar_logic as sl, scalar_math as sm
from tests.native.kernel_harness import (MAXDIMS, KernelError, SgArray, SgError, describe,
                                         run_python)

# float16 results of perform overflow to inf on purpose (the reference)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

FLAGS = ["-O2", "-march=native", "-fPIC", "-shared", "-std=gnu11", "-fno-math-errno",
         "-fno-trapping-math", "-ffp-contract=off", "-Wno-unused-function"]
BUILD = Path(tempfile.gettempdir()) / f"symgraph-elemwise-tests-{os.getuid()}"


class Library:
    """Kernels compiled together; ``run(node, inputs)`` as kernel_harness.run_kernel."""

    def __init__(self, nodes, mvec=False, chunks=4, openmp=False):
        self.prefix = {}
        kernels = []
        for k, node in enumerate(nodes):
            kernel = elemwise_kernel(node)
            assert kernel is not None, f"no C for {node}"
            self.prefix[node] = (len(kernels) % chunks, f"k{k}", kernel)
            kernels.append(kernel)
        groups = [[(p, kern) for (c, p, kern) in self.prefix.values() if c == g]
                  for g in range(chunks)]
        with ThreadPoolExecutor(chunks) as pool:
            self.libs = list(pool.map(lambda g: _compile(g, mvec, openmp), groups))

    def run(self, node, inputs, out=None):
        chunk, prefix, kernel = self.prefix[node]
        lib = self.libs[chunk]
        inputs = [np.asarray(x) for x in inputs]
        in_desc = (SgArray * max(1, len(inputs)))(*[describe(x) for x in inputs])
        n_out = len(node.outputs)
        out_desc = (SgArray * n_out)()
        err = SgError()
        if kernel.kind == "inplace":
            outputs = [inputs[i] for i in kernel.inplace_of]
        else:
            shapes = (ctypes.c_int64 * (MAXDIMS * n_out))()
            if getattr(lib, f"{prefix}_shape")(in_desc, shapes, ctypes.byref(err)):
                raise KernelError(err.kind, err.msg.decode())
            outputs = out or [np.full(tuple(shapes[k * MAXDIMS + d] for d in range(o.ndim)),
                                      1, dtype=o.dtype) for k, o in enumerate(node.outputs)]
        for k, arr in enumerate(outputs):
            out_desc[k] = describe(arr)
        if getattr(lib, f"{prefix}_run")(in_desc, out_desc, ctypes.byref(err)):
            raise KernelError(err.kind, err.msg.decode())
        return outputs


def _compile(kernels, mvec, openmp=False):
    if not kernels:
        return None
    source = ("#define SG_USE_MVEC 1\n" if mvec else "") + assemble(kernels)
    flags = FLAGS + (["-fopenmp"] if openmp else [])
    digest = hashlib.sha256((source + " ".join(flags) + str(generated_dir())).encode()
                            ).hexdigest()[:20]
    BUILD.mkdir(exist_ok=True)
    lib_path = BUILD / f"{digest}.so"
    if not lib_path.exists():
        src = BUILD / f"{digest}.c"
        src.write_text(source)
        tmp = BUILD / f"{digest}.{os.getpid()}.tmp"
        libs = ["-lmvec"] if mvec else []
        includes = ["-I", str(C_SRC), "-I", str(generated_dir())]
        proc = subprocess.run(["gcc", *flags, *includes, str(src), "-o", str(tmp),
                               *libs, "-lm"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[:4000]
        tmp.rename(lib_path)
    lib = ctypes.CDLL(str(lib_path))
    bind_library(lib)     # the loop driver is in the shared support library
    return lib


# ---------------------------------------------------------------------------
# Values

def values(dtype, rng, n=64):
    """Special values first (every pair of them in binary ops), then random ones."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        special = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5,
                   -2.5, 3.0, -7.0, 1e-3, 30.0, -30.0, 100.0, -100.0]
        rand = rng.normal(0, 3, n)
    elif dtype.kind == "b":
        return np.array([False, True, True, False], dtype=bool), \
            rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dtype)
        special = [0, 1, 2, 3, 7, info.max, info.max - 1, info.min, info.min + 1]
        if dtype.kind == "i":
            special += [-1, -2, -3, -7]
        rand = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True)
    if dtype.kind in "iu":
        return np.array(special, dtype=dtype), rand.astype(dtype)
    return np.array(special).astype(dtype), rand.astype(dtype)


def make_inputs(node, rng, domain=None):
    """Arrays for node's inputs: all pairs of special values for 2 inputs."""
    nin = len(node.inputs)
    parts = [values(v.dtype, rng) for v in node.inputs]
    if nin == 1:
        cols = [np.concatenate(parts[0])]
    elif nin == 2:
        (s0, r0), (s1, r1) = parts
        cols = [np.concatenate([np.repeat(s0, len(s1)), r0]),
                np.concatenate([np.tile(s1, len(s0)), r1])]
    else:
        size = 200
        cols = [rng.choice(np.concatenate(p), size) for p in parts]
    size = min(len(c) for c in cols)
    cols = [c[:size] for c in cols]
    if domain is not None:
        cols = domain(cols)
    return cols


def check_same(c_outs, py_outs, dtypes):
    for c, p, dtype in zip(c_outs, py_outs, dtypes):
        assert c.dtype == p.dtype and c.shape == p.shape
        dtype = str(dtype)
        if dtype.startswith("float"):
            rtol = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}[dtype]
            tiny = np.finfo(dtype).tiny
            np.testing.assert_allclose(c.astype("float64"), p.astype("float64"), rtol=rtol,
                                       atol=tiny * 64, equal_nan=True)
        else:
            np.testing.assert_array_equal(c, p)


# ---------------------------------------------------------------------------
# Every scalar op over dtypes

ALL = ["float16", "float32", "float64", "int8", "int64", "uint64", "bool"]
NUM = [d for d in ALL if d != "bool"]
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_OUT = FLOATS + ["int8"]   # float results from these (int8 -> float32)
MIXED = [("int32", "float32"), ("int8", "uint8"), ("uint64", "int8")]


def _nonneg_exponent(cols):
    cols[1] = np.where(cols[1] < 0, 0, cols[1] % 7).astype(cols[1].dtype) \
        if cols[1].dtype.kind in "iu" else cols[1]
    return cols


def _finite_moderate(cols):
    # float -> int casts of NaN, Inf or out-of-range values are undefined in C
    return [np.where(np.isfinite(c) & (np.abs(c) < 100), c, 1).astype(c.dtype) for c in cols]


def _finite_positive(cols):
    return [np.abs(c) for c in _finite_moderate(cols)]


UNARY_FLOAT = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "log1mexp", "sigmoid",
               "softplus", "sqrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
               "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "erf",
               "erfc", "gammaln", "floor", "ceil", "trunc", "round_half_to_even",
               "round_half_away_from_zero", "reciprocal", "erfinv", "psi", "tri_gamma"]
BINARY_SAME = ["add", "mul", "maximum", "minimum", "lt", "gt", "le", "ge", "eq", "neq",
               "int_div", "mod"]

CASES = []  # (id, builder returning a node, domain)


def _case(name, dtypes, build, domain=None):
    CASES.append((f"{name}-{'-'.join(dtypes)}", dtypes, build, domain))


def _fn_build(fn_name):
    def build(*xs):
        return getattr(T, fn_name)(*xs)
    return build


for _name in UNARY_FLOAT:
    for _d in FLOAT_OUT:
        _case(_name, (_d,), _fn_build(_name))
for _name in BINARY_SAME:
    for _d in ALL:
        _case(_name, (_d, _d), _fn_build(_name))
    for _pair in MIXED:
        _case(_name, _pair, _fn_build(_name))
for _d in NUM:
    _case("sub", (_d, _d), _fn_build("sub"))
    _case("neg", (_d,), _fn_build("neg"))
    _case("sign", (_d,), _fn_build("sign"))
for _d in ALL:
    _case("abs", (_d,), _fn_build("abs_"))
    _case("sqr", (_d,), _fn_build("sqr"))
    _case("isnan", (_d,), _fn_build("isnan"))
    _case("isinf", (_d,), _fn_build("isinf"))
    _case("isfinite", (_d,), _fn_build("isfinite"))
    _case("real", (_d,), _fn_build("real"))
    _case("imag", (_d,), _fn_build("imag"))
    _case("angle", (_d,), _fn_build("angle"))
    _case("switch", ("bool", _d, _d), _fn_build("switch"))
    _case("clip", (_d, _d, _d), _fn_build("clip"))
    _case("pow", (_d, _d), _fn_build("pow"), _nonneg_exponent)
    _case("identity", (_d,), lambda x: Elemwise(sb.Identity())(x))
    _case("second", ("float32", _d), _fn_build("second"))
for _d in FLOATS + ["int32"]:
    _case("true_div", (_d, _d), _fn_build("true_div"))
    _case("arctan2", (_d, _d), _fn_build("arctan2"))
    _case("switch", (_d, "float32", "int8"), _fn_build("switch"))
for _d in ["float32", "float64", "int32"]:
    _case("isclose", (_d, _d), lambda x, y: T.isclose(x, y, rtol=1e-3, atol=1e-4))
    _case("isclose_nan", (_d, "float64"),
          lambda x, y: T.isclose(x, y, rtol=1e-3, atol=1e-4, equal_nan=True))
for _d in ["int8", "int64", "uint8", "uint32", "bool"]:
    for _name in ("and_", "or_", "xor"):
        _case(_name, (_d, _d), _fn_build(_name))
    _case("invert", (_d,), _fn_build("invert"))
for _src in ALL:
    for _dst in ALL:
        _domain = None
        if _src.startswith("float") and not _dst.startswith("float"):
            _domain = _finite_positive if _dst.startswith("uint") else _finite_moderate
        _case(f"cast_to_{_dst}", (_src,), lambda x, _dst=_dst: T.cast(x, _dst)
              if x.dtype != _dst else Elemwise(sb.Cast(_dst))(x), _domain)


def _node(dtypes, build):
    xs = [T.tensor(d, (False,)) for d in dtypes]
    node = build(*xs).owner
    assert isinstance(node.op, Elemwise), node
    return node


_NODES = {case[0]: _node(case[1], case[2]) for case in CASES}


@pytest.fixture(scope="module")
def library():
    return Library(list(_NODES.values()))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_python(library, case, rng):
    case_id, _, _, domain = case
    node = _NODES[case_id]
    inputs = make_inputs(node, rng, domain)
    expected = run_python(node, inputs)
    got = library.run(node, inputs)
    check_same(got, expected, [o.dtype for o in node.outputs])
    # the strided path: every other element, read backwards
    strided = [np.repeat(x, 2)[::-2] for x in inputs]
    check_same(library.run(node, strided), run_python(node, strided),
               [o.dtype for o in node.outputs])


def test_every_scalar_op_has_c_or_is_known_without():
    """Each scalar op class of scalar_basic/scalar_logic/scalar_math is covered by CASES, or has
    no C on purpose."""
    without = {"Conj"}  # Conj: only real inputs, as Real
    covered = {type(n.op.scalar_op).__name__ for n in _NODES.values()}
    for module in (sb, sl, sm):
        for name, cls in vars(module).items():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and \
                    not name.startswith("_") and hasattr(cls, "impl"):
                assert name in covered or name in without, name


def test_float32_is_computed_in_float():
    node = _NODES["exp-float32"]
    source = elemwise_kernel(node).source
    assert "expf(" in source and "double" not in source
    node = (T.fvector() * 0.5).owner
    assert "0.5f" in elemwise_kernel(node).source or "0.5" not in elemwise_kernel(node).source


def test_int_pow_negative_exponent_is_an_error(library):
    node = _NODES["pow-int64-int64"]
    with pytest.raises(ValueError, match="negative integer powers"):
        run_python(node, [np.array([2, 3]), np.array([1, -1])])
    with pytest.raises(KernelError, match="negative integer powers"):
        library.run(node, [np.array([2, 3]), np.array([1, -1])])


def test_signed_zero_results(library):
    x = np.array([-0.0, 0.0, -1e-300], "float64")
    for name in ("sin-float64", "tanh-float64", "expm1-float64", "trunc-float64",
                 "neg-float64", "round_half_away_from_zero-float64", "ceil-float64"):
        node = _NODES[name]
        (got,) = library.run(node, [x])
        (want,) = run_python(node, [x])
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


# ---------------------------------------------------------------------------
# Shapes and strides

def _bnode():
    row = T.tensor("float64", (True, False))
    col = T.tensor("float64", (False, True))
    mat = T.dmatrix()
    return {
        "row_col": (row + col).owner,
        "mat_row": (mat * row).owner,
        "mat_mat": (mat - T.dmatrix()).owner,
        "scalar": (T.tensor("float64", (True, True)) + mat).owner,
        "tensor3": (T.dtensor3() * T.dtensor3()).owner,
        "zero_d": (T.dscalar() * T.dscalar()).owner,
        "multi": Elemwise(Composite(2, [(sb.Add(), (("i", 0), ("i", 1))),
                                        (sm.Exp(), (("n", 0, 0),)),
                                        (sb.Mul(), (("n", 1, 0), ("c", "float64", "0.5")))],
                                    [("n", 0, 0), ("n", 2, 0)]))(mat, row)[0].owner,
        "inplace": Elemwise(sm.Exp(), {0: 0})(mat).owner,
    }


SHAPE_NODES = _bnode()


@pytest.fixture(scope="module")
def shape_library():
    return Library(list(SHAPE_NODES.values()), chunks=1)


def _check(lib, node, inputs):
    got = lib.run(node, [x.copy() if node.op.inplace_pattern else x for x in inputs])
    check_same(got, run_python(node, inputs), [o.dtype for o in node.outputs])


def test_broadcast_row_col(shape_library, rng):
    node = SHAPE_NODES["row_col"]
    _check(shape_library, node, [rng.normal(size=(1, 5)), rng.normal(size=(4, 1))])
    (out,) = shape_library.run(node, [np.ones((1, 5)), np.arange(4.0)[:, None]])
    assert out.shape == (4, 5)


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (1, 1), (1, 7), (3, 1), (3, 7)])
def test_sizes(shape_library, rng, shape):
    a, b = rng.normal(size=shape), rng.normal(size=shape)
    _check(shape_library, SHAPE_NODES["mat_mat"], [a, b])
    _check(shape_library, SHAPE_NODES["mat_row"], [a, rng.normal(size=(1, shape[1]))])
    _check(shape_library, SHAPE_NODES["scalar"], [np.array([[2.5]]), a])
    _check(shape_library, SHAPE_NODES["multi"], [a, rng.normal(size=(1, shape[1]))])


def test_non_contiguous_and_negative_strides(shape_library, rng):
    base = rng.normal(size=(8, 10))
    views = [base[::2, 1::3], base[::-1, ::-2][:4, :4], base.T[:4, :4], base[2:6, 3:7]]
    for a in views:
        for b in views:
            if a.shape == b.shape:
                _check(shape_library, SHAPE_NODES["mat_mat"], [a, b])
    cube = rng.normal(size=(4, 5, 6))
    other = rng.normal(size=(5, 8, 6))[::-1, ::2].transpose(2, 1, 0)
    _check(shape_library, SHAPE_NODES["tensor3"], [cube.transpose(2, 0, 1), other])
    _check(shape_library, SHAPE_NODES["tensor3"], [cube, cube[::-1, :, ::-1]])
    _check(shape_library, SHAPE_NODES["mat_row"], [base[::-1], base[:1, ::-1]])


def test_zero_d(shape_library):
    _check(shape_library, SHAPE_NODES["zero_d"], [np.array(3.0), np.array(-2.0)])


def test_inplace_kernel(shape_library, rng):
    node = SHAPE_NODES["inplace"]
    kernel = elemwise_kernel(node)
    assert kernel.kind == "inplace" and kernel.inplace_of == (0,)
    for a in (rng.normal(size=(3, 4)), rng.normal(size=(6, 8))[::2, ::-2]):
        want = np.exp(a)
        (out,) = shape_library.run(node, [a])
        assert out is a
        np.testing.assert_allclose(a, want, rtol=1e-12)


def test_multi_output_composite(shape_library, rng):
    a, r = rng.normal(size=(3, 4)), rng.normal(size=(1, 4))
    s, e = shape_library.run(SHAPE_NODES["multi"], [a, r])
    np.testing.assert_allclose(s, a + r, rtol=1e-12)
    np.testing.assert_allclose(e, np.exp(a + r) * 0.5, rtol=1e-12)


def test_shape_mismatch_message(shape_library):
    node = SHAPE_NODES["mat_mat"]
    with pytest.raises(KernelError, match=r"input 1 has size 4 in dimension 0, but input 0 "
                                          r"has size 3 \(shapes \(3, 2\), \(4, 2\)\)"):
        shape_library.run(node, [np.ones((3, 2)), np.ones((4, 2))])
    from symgraph.ops.elemwise import ShapeMismatchError

    with pytest.raises(ShapeMismatchError, match="input 1 has size 4 in dimension 0"):
        run_python(node, [np.ones((3, 2)), np.ones((4, 2))])
    node = SHAPE_NODES["mat_row"]
    with pytest.raises(KernelError, match="input 1 is declared broadcastable in dimension 0 "
                                          "but has size 3"):
        shape_library.run(node, [np.ones((3, 2)), np.ones((3, 2))])


# ---------------------------------------------------------------------------
# libmvec: the vectorized transcendental functions keep NaN, Inf and -0.0

MVEC_FUNCS = ["exp", "log", "tanh", "sin", "cos", "expm1", "log1p", "sigmoid", "softplus",
              "erf", "arctan", "sinh"]


@pytest.mark.skipif(not elemwise_kernel(_NODES["exp-float32"]).extra.get("libraries"),
                    reason="no libmvec on this machine")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_libmvec_path(rng, dtype):
    nodes = [_NODES[f"{name}-{dtype}"] for name in MVEC_FUNCS]
    lib = Library(nodes, mvec=True, chunks=2)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, -1e-30, 88.0, -88.0, 710.0,
                        -745.0, 0.5], dtype)
    x = np.concatenate([special, rng.normal(0, 5, 1000).astype(dtype)])
    for node in nodes:
        (got,) = lib.run(node, [x])
        (want,) = run_python(node, [x])
        rtol = 1e-6 if dtype == "float32" else 1e-13
        np.testing.assert_allclose(got, want, rtol=rtol, atol=np.finfo(dtype).tiny * 64,
                                   equal_nan=True, err_msg=str(node))
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


# ---------------------------------------------------------------------------
# OpenMP

def test_openmp_kernels(rng):
    import symgraph

    with symgraph.config.change_flags(openmp=True, openmp_elemwise_minsize=1000):
        x, y = T.dmatrix("x"), T.drow("y")
        nodes = [Elemwise(sb.Add())(T.exp(x), x).owner, (x * y).owner,
                 Elemwise(sb.Pow())(T.lvector(), T.lvector()).owner]
        kernels = [elemwise_kernel(n) for n in nodes]
    # the driver in the support library shares the loop out: the kernels carry
    # no OpenMP of their own
    assert not any(k.openmp for k in kernels)
    assert "sg_ew_loop(in, out, 2, 1, scalar, size, SG_FN(block), 1000)" in kernels[1].source
    lib = Library(nodes, chunks=1, openmp=True)
    big = rng.normal(size=(300, 200))
    for arr in (big, big[::-1, ::2], big.T):
        _check(lib, nodes[0], [arr, arr])
        _check(lib, nodes[1], [arr, rng.normal(size=(1, arr.shape[1]))])
    base = np.arange(100000) % 5
    exps = np.arange(100000) % 4
    _check(lib, nodes[2], [base, exps])
    with symgraph.config.change_flags(openmp=False):
        assert "SG_FN(block), -1)" in elemwise_kernel(nodes[1]).source
    exps[77777] = -1  # flagged by one thread, reported once
    with pytest.raises(KernelError, match="negative integer powers"):
        lib.run(nodes[2], [base, exps])
