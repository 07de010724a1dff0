"""The vectorized float32 softmax rows (AVX-512: the maximum, an in-line exp and
the sum in registers) at the lengths and values where vector code goes wrong:
row lengths around the vector width, the unrolled step and the summing block,
long rows; -inf, +inf and NaN in the vector body and in the masked tail; huge
logits and spreads (exp underflowing to subnormals and zero); float16 and
float64 beside them (float16 is computed in float32; float64 keeps the
generic code).  Each against the Python ``perform``, and float32 against a
float64 softmax of the same inputs to a few ulp (the in-line exp is within
one ulp).  On a machine without AVX-512 the same tests check the generic code.
"""

import numpy as np
import pytest

from symgraph.backends.cpu.nnet.softmax import BLOCK, STREAM_BYTES
from tests.native.kernel_harness import run_kernel
from tests.native.test_nnet_c import OPS, _check, _inputs, _node

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# 16 lanes, 64 per unrolled step, BLOCK per double-summed block
LENGTHS = (1, 2, 7, 15, 16, 17, 31, 63, 64, 65, 100, BLOCK - 1, BLOCK, BLOCK + 1,
           BLOCK + 64 + 7, 1000, 1024, 4099, 10 ** 5)


def _softmax64(x):
    """exp and sum in float64 of ``x - max`` rounded in x's type, as the
    kernel (and perform) round it."""
    e = np.exp((x - x.max(axis=-1, keepdims=True)).astype("float64"))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", OPS)
def test_row_lengths(op, n, rng):
    rows = 3 if n < 10 ** 5 else 1
    x = (rng.standard_normal((rows, n)) * 5).astype("float32")
    _check(_node(op, "float32", 2, -1), _inputs(op, x, rng))


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


CPU_FLAGS = _cpu_flags()
#: The vectorized rows are compiled here (-march=native).
FAST_ROWS = "avx512f" in CPU_FLAGS or {"avx2", "fma"} <= CPU_FLAGS


@pytest.mark.parametrize("n", LENGTHS)
def test_float32_softmax_within_a_few_ulp_of_float64(n, rng):
    """exp(x - m) within one ulp, the sum and the division rounding once each
    (libmvec's exp, in the generic code, is within 4 ulp: the usual tolerance)."""
    rows = 4 if n < 10 ** 5 else 1
    x = (rng.standard_normal((rows, n)) * 8).astype("float32")
    (got,) = run_kernel(_node("softmax", "float32", 2, -1), [x])
    want = _softmax64(x)
    tiny = np.finfo(np.float32).tiny
    np.testing.assert_allclose(got, want, rtol=4e-7 if FAST_ROWS else 1e-6, atol=tiny)


def _special_rows(rng, n):
    """Rows of ``n`` with a -inf, +inf or NaN at the first element, inside an
    unrolled step and in the tail (positions 0, 37, 81)."""
    rows = []
    for pos in (0, 37, 81):
        for value in (-np.inf, np.inf, np.nan):
            row = rng.standard_normal(n) * 3
            row[pos] = value
            rows.append(row)
    return rows


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_inf_and_nan_in_body_and_tail(op, dtype, rng):
    """A -inf, +inf or NaN at the first element, inside an unrolled step, or in
    the masked tail of a row of 83 (64 + 16 + 3) elements."""
    n = 83
    rows = _special_rows(rng, n)
    rows += [np.full(n, -np.inf), np.full(n, np.inf), np.full(n, np.nan)]
    x = np.array(rows, dtype=dtype)
    node = _node(op, dtype, 2, -1)
    _check(node, _inputs(op, x, rng))
    if op == "softmax":
        (got,) = run_kernel(node, [x])
        for r, row in enumerate(x):
            # a NaN, a +inf (inf - inf) or only -inf (-inf - -inf): all NaN
            bad = np.isnan(row).any() or np.isposinf(row).any() or np.isneginf(row).all()
            assert np.isnan(got[r]).all() if bad else not np.isnan(got[r]).any(), r


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_large_logits_and_spreads(op, dtype, rng):
    """Logits of 1e4 (huge in float16: +inf there), spreads that underflow
    exp to subnormals and to zero, and rows stepping through exp's range."""
    n = 203
    big = 60000.0 if dtype == "float16" else 1e4
    rows = [np.full(n, big), np.full(n, -big), rng.standard_normal(n) * big,
            np.linspace(-120, 0, n), np.linspace(-104, -86, n), np.r_[0.0, np.full(n - 1, -87.5)]]
    x = np.array(rows, dtype=dtype)
    _check(_node(op, dtype, 2, -1), _inputs(op, x, rng))


@pytest.mark.parametrize("dtype", ["float16", "float64"])
@pytest.mark.parametrize("n", (1, 7, 17, BLOCK + 65))
@pytest.mark.parametrize("op", OPS)
def test_other_dtypes_row_lengths(op, n, dtype, rng):
    x = (rng.standard_normal((3, n)) * 3).astype(dtype)
    _check(_node(op, dtype, 2, -1), _inputs(op, x, rng))


def test_rows_keep_their_bits_wherever_they_are(rng):
    """A row's result depends on the row only: the same in a one-row call, in a
    large (streamed) output, reversed (gathered through the workspace), and at
    an odd offset (unaligned loads)."""
    n = 1031
    x = (rng.standard_normal((1100, n)) * 4).astype("float32")
    node = _node("softmax", "float32", 2, -1)
    (big,) = run_kernel(node, [x])
    (one,) = run_kernel(node, [x[7:8]])
    np.testing.assert_array_equal(one[0], big[7])
    (rev,) = run_kernel(node, [x[::-1][:5]])
    np.testing.assert_array_equal(rev, big[::-1][:5])
    buf = np.empty(3 * n + 1, dtype="float32")
    buf[1:] = x[:3].ravel()
    (odd,) = run_kernel(node, [buf[1:].reshape(3, n)])
    np.testing.assert_array_equal(odd, big[:3])


@pytest.mark.parametrize("op", ["logsoftmax", "grad"])
def test_large_outputs_keep_their_bits(op, rng):
    """Outputs of STREAM_BYTES or more (the gradient's stored past the cache;
    rows of 1031 start off 64-byte boundaries): each row has the bits it has
    in a small output, and the values match perform."""
    shape = (1100, 1031)
    assert np.prod(shape) * 4 >= STREAM_BYTES
    node = _node(op, "float32", 2, -1)
    inputs = _inputs(op, (rng.standard_normal(shape) * 4).astype("float32"), rng)
    (big,) = run_kernel(node, inputs)
    for rows in (slice(0, 3), slice(shape[0] - 5, shape[0])):
        (small,) = run_kernel(node, [a[rows] for a in inputs])
        np.testing.assert_array_equal(big[rows], small)
    _check(node, inputs)


@pytest.mark.parametrize("op", OPS)
def test_threads_parts_of_a_large_output_keep_the_serial_bits(op, rng):
    """With threads, each thread's rows of a large output are stored past the
    cache as the whole output would be (SG_NN_LARGE): the bits of the serial
    call."""
    import symgraph
    from symgraph.backends.native.linker import node_kernel

    shape = (1100, 1031)
    with symgraph.config.change_flags(openmp=True, openmp_softmax_minsize=0):
        node = _node.__wrapped__(op, "float32", 2, -1)
        kernel = node_kernel(node)
    assert kernel.openmp and "SG_NN_LARGE" in kernel.source
    inputs = _inputs(op, (rng.standard_normal(shape) * 4).astype("float32"), rng)
    serial = run_kernel(_node(op, "float32", 2, -1), inputs)
    with symgraph.config.change_flags(openmp=True, openmp_softmax_minsize=0):
        parallel = run_kernel(node, inputs, kernel=kernel)
    np.testing.assert_array_equal(parallel[0], serial[0])


# -- the AVX2 rows, on a machine that has AVX-512 too -------------------------

_WRAPPER = r"""
void sg_test_rows(int op, const float *a, const float *b, float *y, int64_t rows, int64_t n,
                  int stream) {
    float *t = aligned_alloc(64, ((size_t)n * 4 + 63) & ~(size_t)63);
    for (int64_t r = 0; r < rows; r++) {
        if (op == 0 && stream) sg_nn_softmax_stream_f32(a + r * n, y + r * n, n, t);
        else if (op == 0) sg_nn_softmax_f32(a + r * n, y + r * n, n);
        else if (op == 1) sg_nn_logsoftmax_f32(a + r * n, y + r * n, n);
        else sg_nn_grad_f32(a + r * n, b + r * n, y + r * n, n, stream);
    }
    _mm_sfence();
    free(t);
}
"""


@pytest.fixture(scope="module")
def row_libraries(tmp_path_factory):
    """The float32 rows compiled as the support library compiles them, and
    again without AVX-512 (the AVX2 code): {name: ctypes library}."""
    import ctypes
    import subprocess

    from symgraph.backends.cpu import compiler
    from symgraph.backends.cpu.elemwise.loop import _mvec_code
    from symgraph.backends.cpu.nnet.softmax import core_text

    if not {"avx512f", "avx2", "fma"} <= CPU_FLAGS:
        pytest.skip("needs a CPU with AVX-512, AVX2 and FMA")
    source = "\n".join([_mvec_code(("exp", "log")), "#include <math.h>", "#include <stdint.h>",
                        "#include <stdlib.h>", core_text("f32")[1], _WRAPPER])
    folder = tmp_path_factory.mktemp("rows")
    (folder / "rows.c").write_text(source)
    libs = {}
    for name, extra in (("avx512", []), ("avx2", ["-mno-avx512f"])):
        out = folder / f"{name}.so"
        command = compiler.compiler_command() + list(compiler.base_flags(False)) + extra + [
            "-o", str(out), str(folder / "rows.c")] + (
            ["-lmvec"] if compiler.mvec_available() else []) + ["-lm"]
        subprocess.run(command, check=True, capture_output=True)
        libs[name] = ctypes.CDLL(str(out))
    return libs


def _rows(lib, op, a, b=None, stream=0):
    import ctypes

    a = np.ascontiguousarray(a, dtype="float32")
    b = a if b is None else np.ascontiguousarray(b, dtype="float32")
    y = np.empty_like(a)
    lib.sg_test_rows(ctypes.c_int(op), ctypes.c_void_p(a.ctypes.data),
                     ctypes.c_void_p(b.ctypes.data), ctypes.c_void_p(y.ctypes.data),
                     ctypes.c_int64(a.shape[0]), ctypes.c_int64(a.shape[1]), ctypes.c_int(stream))
    return y


def _logsoftmax64(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted.astype("float64")).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("stream", [0, 1])
@pytest.mark.parametrize("n", (1, 7, 8, 9, 31, 32, 33, BLOCK - 1, BLOCK + 7, 1031, 10 ** 5))
def test_avx2_rows(row_libraries, n, stream, rng):
    """The 8-lane code against float64 references, as the 16-lane code."""
    x = (rng.standard_normal((3, n)) * 8).astype("float32")
    for name, lib in row_libraries.items():
        np.testing.assert_allclose(_rows(lib, 0, x, stream=stream), _softmax64(x), rtol=4e-7,
                                   atol=np.finfo(np.float32).tiny, err_msg=name)
        np.testing.assert_allclose(_rows(lib, 1, x), _logsoftmax64(x), rtol=1e-6, atol=4e-6,
                                   err_msg=name)
        sm = _softmax64(x).astype("float32")
        dy = rng.standard_normal(x.shape).astype("float32")
        total = (dy * sm).astype("float64").sum(axis=-1, keepdims=True).astype("float32")
        np.testing.assert_allclose(_rows(lib, 2, dy, sm, stream=stream), dy * sm - sm * total,
                                   rtol=1e-6, atol=4e-6 * float(np.abs(dy).max()), err_msg=name)


def test_avx2_rows_special_values_match_the_avx512_bits(row_libraries, rng):
    """-inf, +inf, NaN in the body and the tail, huge logits, exp down to
    subnormals and zero: the same NaN positions as the references, and (rows
    shorter than a block: the same sums) the bits of the 16-lane code, whose
    exp the 8-lane code reproduces."""
    n = 83
    rows = _special_rows(rng, n)
    rows += [np.full(n, -np.inf), np.full(n, np.inf), np.full(n, np.nan), np.full(n, 1e4),
             np.full(n, -1e4), np.linspace(-120, 0, n), np.linspace(-104, -86, n),
             np.r_[0.0, np.full(n - 1, -87.5)], np.r_[0.0, np.full(n - 1, -103.5)]]
    x = np.array(rows, dtype="float32")
    with np.errstate(all="ignore"):
        wants = (_softmax64(x), _logsoftmax64(x))
    for op, want in enumerate(wants):
        got = {name: _rows(lib, op, x) for name, lib in row_libraries.items()}
        np.testing.assert_array_equal(got["avx2"], got["avx512"])
        np.testing.assert_array_equal(np.isnan(got["avx2"]), np.isnan(want))
        np.testing.assert_allclose(got["avx2"], want, rtol=1e-6, atol=1e-35 if op == 0 else 4e-6)
    v = np.linspace(-110, 0, 20001, dtype="float32")
    pairs = np.stack([np.zeros_like(v), v], axis=1)
    np.testing.assert_array_equal(_rows(row_libraries["avx2"], 0, pairs),
                                  _rows(row_libraries["avx512"], 0, pairs))
