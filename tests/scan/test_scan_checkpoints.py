"""scan_checkpoints: the values at the end of every chunk, the same gradient as
scan, and a gradient that replays chunks instead of storing every step."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.scan import Scan


def _step(x_t, h, W):
    return T.tanh(T.dot(h, W) + x_t)


@pytest.mark.parametrize("length", [8, 9])
def test_values_at_chunk_ends_and_gradient_match_scan(rng, length):
    x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
    out, _ = symgraph.scan_checkpoints(_step, sequences=[x], outputs_info=[h0],
                                       non_sequences=[W], save_every_N=3)
    ref, _ = symgraph.scan(_step, sequences=[x], outputs_info=[h0], non_sequences=[W])
    grads = symgraph.grad(out[-1].sum(), [W, x, h0])
    ref_grads = symgraph.grad(ref[-1].sum(), [W, x, h0])
    f = symgraph.function([x, h0, W], [out, ref] + grads + ref_grads)
    xv, hv, Wv = rng.normal(size=(length, 2)), rng.normal(size=2), rng.normal(size=(2, 2))
    got, expected, *gs = f(xv, hv, Wv)
    ends = [min(k, length) - 1 for k in range(3, length + 3, 3)]
    np.testing.assert_allclose(got, expected[ends])
    for a, b in zip(gs[:3], gs[3:]):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_gradient_replays_chunks(rng):
    x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
    out, _ = symgraph.scan_checkpoints(_step, sequences=[x], outputs_info=[h0],
                                       non_sequences=[W], save_every_N=4)
    f = symgraph.function([x, h0, W], symgraph.grad(out[-1].sum(), W))
    scans = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan)]
    # The outer loops (forward and backward) run one chunk per step; the
    # backward step contains the chunk's forward replay and its gradient.
    backward = [n for n in scans if n.op.name.startswith("grad_of")]
    assert backward
    inner_scans = [v.owner for v in symgraph.graph.basic.ancestors(backward[0].op.inner_outputs)
                   if v.owner is not None and isinstance(v.owner.op, Scan)]
    assert len(inner_scans) >= 2
    verify_grad(lambda x, h0, W: symgraph.scan_checkpoints(
        _step, sequences=[x], outputs_info=[h0], non_sequences=[W],
        save_every_N=4)[0][-1].sum(),
        [rng.normal(size=(10, 2)), rng.normal(size=2), rng.normal(size=(2, 2))])


def test_mapped_outputs_and_no_padding(rng):
    x = T.vector("x")
    (ends, sums), _ = symgraph.scan_checkpoints(lambda a, s: (a * 2, s + a), sequences=[x],
                                                outputs_info=[None, T.constant(0.0)],
                                                save_every_N=2, padding=False)
    f = symgraph.function([x], [ends, sums])
    xv = rng.normal(size=6)
    got_ends, got_sums = f(xv)
    np.testing.assert_allclose(got_ends, 2 * xv[[1, 3, 5]])
    np.testing.assert_allclose(got_sums, np.cumsum(xv)[[1, 3, 5]])


def test_refuses_taps():
    x = T.vector("x")
    with pytest.raises(ValueError, match="only tap -1"):
        symgraph.scan_checkpoints(lambda a, b, c: a, sequences=[x],
                                  outputs_info=[dict(initial=T.vector("i"), taps=[-2, -1])])
    with pytest.raises(ValueError, match="save_every_N"):
        symgraph.scan_checkpoints(lambda a: a, sequences=[x], save_every_N=0)
