"""Smoke test of an installed symgraph (CI runs it from a folder outside the
checkout, in a fresh venv holding the wheel): a fused element-wise function
runs natively, a conv2d function matches a direct loop, and the same conv2d on
the emulated GPU (its CUDA and device memory library built from the installed
sources) matches it too."""

import numpy as np, symgraph, symgraph.tensor as T
import symgraph.gpu
from symgraph.tensor import nnet
import os
import sys

here = os.path.realpath(os.getcwd())
assert not os.path.realpath(symgraph.__file__).startswith(here), symgraph.__file__
print("symgraph from", os.path.dirname(symgraph.__file__), file=sys.stderr)
x = T.matrix("x")
f = symgraph.function([x], T.exp(x) * 2 + 1)
v = np.ones((2, 3), dtype=symgraph.config.floatX)
assert np.allclose(f(v), np.exp(v) * 2 + 1) and f.native is not None and not f.native.python_nodes
img, w = T.tensor4("img"), T.tensor4("w")
g = symgraph.function([img, w], nnet.conv2d(img, w))
rng = np.random.default_rng(0)
iv = rng.standard_normal((2, 3, 7, 6)).astype(symgraph.config.floatX)
wv = rng.standard_normal((4, 3, 3, 2)).astype(symgraph.config.floatX)
out = g(iv, wv)
ref = np.zeros((2, 4, 5, 5))
for n in range(2):
    for k in range(4):
        for i in range(5):
            for j in range(5):
                ref[n, k, i, j] = (iv[n, :, i:i+3, j:j+2] * wv[k, :, ::-1, ::-1]).sum()
assert np.allclose(out, ref, rtol=1e-4, atol=1e-4), abs(out - ref).max()
with symgraph.config.change_flags(device="cuda", **{"gpu.emulate": True}):
    gd = symgraph.function([img, w], nnet.relu(nnet.conv2d(img, w)) * 2)
assert not symgraph.gpu.placement_report(gd).cpu_nodes
assert np.allclose(gd(iv, wv), np.maximum(ref, 0) * 2, rtol=1e-4, atol=1e-4)
print("smoke ok")
