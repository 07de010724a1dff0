"""Theano's ``tensor.nnet.ctc``: the CTC loss against a brute-force sum over
every alignment, and its gradient by finite differences."""

import itertools

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor.nnet.ctc import ConnectionistTemporalClassification, ctc


def _collapse(path):
    out, prev = [], None
    for s in path:
        if s != prev and s != 0:
            out.append(s)
        prev = s
    return out


def _brute_cost(acts, label):
    """-log of the summed probability of every path that collapses to label."""
    y = np.exp(acts - acts.max(axis=1, keepdims=True))
    y /= y.sum(axis=1, keepdims=True)
    steps, alphabet = acts.shape
    total = 0.0
    for path in itertools.product(range(alphabet), repeat=steps):
        if _collapse(path) == list(label):
            total += np.prod([y[t, k] for t, k in enumerate(path)])
    return -np.log(total) if total > 0 else np.inf


def _compiled():
    acts = T.tensor3("acts", dtype="float64")
    labels = T.imatrix("labels")
    lengths = T.ivector("lengths")
    return symgraph.function([acts, labels, lengths], ctc(acts, labels, lengths))


def test_costs_match_brute_force_enumeration():
    rng = np.random.default_rng(0)
    steps, batch, alphabet = 4, 5, 3
    acts = rng.normal(size=(steps, batch, alphabet)) * 2
    # Repeated symbols (need a blank between), padding, empty labels and a
    # shorter input.
    labels = np.array([[1, 2, -1], [1, 1, -1], [2, -1, -1], [-1, -1, -1], [2, 1, 2]],
                      dtype=np.int32)
    lengths = np.array([4, 4, 3, 4, 4], dtype=np.int32)
    costs = _compiled()(acts, labels, lengths)
    for b in range(batch):
        label = labels[b][labels[b] >= 0]
        expected = _brute_cost(acts[:lengths[b], b], label)
        np.testing.assert_allclose(costs[b], expected, rtol=1e-10)


def test_impossible_alignment_costs_inf_with_zero_gradient():
    acts = np.zeros((2, 1, 3))
    labels = np.array([[1, 1]], dtype=np.int32)  # needs 3 steps
    x = T.tensor3(dtype="float64")
    op = ConnectionistTemporalClassification()
    costs, grads = op.make_node(x, labels, np.array([2], dtype=np.int32)).outputs
    c, g = symgraph.function([x], [costs, grads])(acts)
    assert np.isinf(c[0]) and not np.any(g)


def test_long_sequences_do_not_underflow():
    rng = np.random.default_rng(1)
    acts = rng.normal(size=(400, 1, 5)) * 5
    labels = rng.integers(1, 5, size=(1, 50)).astype(np.int32)
    cost = _compiled()(acts, labels, np.array([400], dtype=np.int32))
    assert np.isfinite(cost[0]) and cost[0] > 0


def test_gradient_by_finite_differences():
    rng = np.random.default_rng(2)
    acts = rng.normal(size=(5, 3, 4))
    labels = np.array([[1, 2], [3, 3], [2, -1]], dtype=np.int32)
    lengths = np.array([5, 5, 3], dtype=np.int32)
    weights = np.array([1.0, 0.5, 2.0])

    verify_grad(lambda a: (ctc(a, labels, lengths) * weights).sum(), [acts], rng=3)


def test_gradient_is_zero_past_the_input_length():
    acts = T.tensor3(dtype="float64")
    cost = ctc(acts, np.array([[1]], dtype=np.int32), np.array([2], dtype=np.int32))
    g = symgraph.function([acts], symgraph.grad(cost.sum(), acts))(np.ones((4, 1, 3)))
    assert not np.any(g[2:]) and np.any(g[:2])


def test_float32_activations_give_float32_costs():
    acts = T.tensor3(dtype="float32")
    cost = ctc(acts, np.array([[1]], dtype=np.int32), np.array([2], dtype=np.int32))
    assert cost.dtype == "float32"
    out = symgraph.function([acts], cost)(np.zeros((2, 1, 2), dtype=np.float32))
    np.testing.assert_allclose(out, [-np.log(0.75)], rtol=1e-6)


def test_errors_name_the_input():
    acts = T.tensor3(dtype="float64")
    with pytest.raises(TypeError, match="labels must be an integer matrix"):
        ctc(acts, T.dmatrix(), T.ivector())
    with pytest.raises(TypeError, match="activations must be a 3-d float"):
        ctc(T.dmatrix(), T.imatrix(), T.ivector())
    f = _compiled()
    with pytest.raises(ValueError, match=r"labels\[0\].*outside \[1, 3\)"):
        f(np.zeros((2, 1, 3)), np.array([[3]], dtype=np.int32), np.array([2], dtype=np.int32))
    with pytest.raises(ValueError, match=r"input_lengths\[0\] = 5"):
        f(np.zeros((2, 1, 3)), np.array([[1]], dtype=np.int32), np.array([5], dtype=np.int32))
