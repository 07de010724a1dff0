"""Plain reductions whose element loops live in the support library
(``reduce/prebuilt.py``): the kernel holds no loops of its own, and its
results have the bits of a kernel that generates the same loops itself."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.backends.cpu.lowerings import cpu_kernel
from symgraph.backends.cpu.reduce import prebuilt
from symgraph.config import config
from tests.native.kernel_harness import run_kernel, run_python

RNG = np.random.default_rng(3)
FNS = {"sum": T.sum, "max": T.max, "min": T.min}


def _values(dtype):
    """Contiguous, transposed and strided operands, with NaN, inf and -0.0."""
    base = (RNG.standard_normal((37, 70)) * 5).astype(dtype)
    base[3, 5], base[9, 1], base[20, 66] = np.nan, np.inf, -0.0
    return [base, base.T, base[:, ::3], (RNG.standard_normal((300, 3)) * 2).astype(dtype)]


@pytest.mark.parametrize("openmp", [False, True])
@pytest.mark.parametrize("kind,dtype", prebuilt.PREBUILT)
def test_library_loops_give_the_kernels_own_bits(kind, dtype, openmp, monkeypatch):
    x = T.matrix(dtype=dtype)
    for axis in (None, 0, 1):
        node = FNS[kind](x, axis=axis).owner
        with config.change_flags(openmp=openmp, openmp_reduce_minsize=0):
            library = cpu_kernel(node)
            monkeypatch.setattr(prebuilt, "prefix_of", lambda spec: None)
            own = cpu_kernel(node)
            monkeypatch.undo()
        assert "sg_redp_" in library.source and "SG_FN(block)(" not in library.source
        assert "sg_redp_" not in own.source and "SG_FN(block)(" in own.source
        for value in _values(dtype):
            (got,) = run_kernel(node, [value], library)
            (want,) = run_kernel(node, [value], own)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (axis, value.shape)
            (ref,) = run_python(node, [value])
            # float32 sums of 70 values near 5 may cancel: an absolute bound too
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def test_only_plain_reductions_of_the_listed_kinds_and_dtypes_use_them():
    x = T.matrix(dtype="float32")
    for expr, uses in [(T.sum(x, axis=0), True), (T.max(x), True),
                       (T.prod(x, axis=0), False), (T.sum(T.matrix(dtype="int32")), False),
                       (T.sum(x, axis=0, dtype="float64"), False)]:
        assert ("sg_redp_" in cpu_kernel(expr.owner).source) == uses, expr
