"""MRG_RandomStreams on the emulated device: the CPU's numbers exactly, and the
stream state advancing as on the CPU."""

import numpy as np

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from symgraph.sandbox.rng_mrg import MRG_RandomStreams
from tests.gpu.device_flags import DEVICE



def _draws(flags, n_calls=3):
    with symgraph.config.change_flags(**flags):
        srng = MRG_RandomStreams(seed=1234)
        x = T.fmatrix("x")
        u = srng.uniform(size=(5, 7), dtype="float32")
        n = srng.normal(size=(11,), dtype="float32")
        f = symgraph.function([x], [x * u, n])
        ones = np.ones((5, 7), "f")
        return [f(ones) for _ in range(n_calls)], f


def test_uniform_and_normal_draws_match_the_cpu_call_after_call():
    cpu, _ = _draws({"device": "cpu"})
    dev, f = _draws(DEVICE)
    assert any(isinstance(n.op, OnDevice) and type(n.op.op).__name__ == "MRGUniform"
               for n in f.maker.fgraph.toposort())
    for (cu, cn), (du, dn) in zip(cpu, dev):
        np.testing.assert_array_equal(du, cu)
        np.testing.assert_allclose(dn, cn, rtol=1e-6)
        assert ((du > 0) & (du < 1)).all()
    assert not np.array_equal(dev[0][0], dev[1][0])       # the state advanced
