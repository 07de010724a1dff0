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


def test_numpy_generator_draws_stay_on_the_host_with_their_reason():
    """RandomStreams draw NumPy's numbers on the host (as Theano's did): the
    same numbers as a CPU function's; their values reach the device through a
    transfer, and the placement report says why they stay."""
    from symgraph.gpu.placement import placement_report
    from symgraph.tensor.random import RandomStreams

    def build():
        x = T.fmatrix("x")
        return symgraph.function([x], x * RandomStreams(seed=3).uniform(size=x.shape))

    value = np.full((2, 3), 2, "float32")
    cpu = build()
    with symgraph.config.change_flags(**DEVICE):
        dev = build()
        reasons = [reason for _, reason in placement_report(dev).cpu_nodes]
        assert reasons and all("NumPy generator" in r and "MRG_RandomStreams" in r
                               for r in reasons), reasons
        assert any(isinstance(n.op, OnDevice) for n in dev.maker.fgraph.toposort())
        for _ in range(2):
            np.testing.assert_array_equal(dev(value), cpu(value))
