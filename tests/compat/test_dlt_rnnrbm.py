"""Theano's deep-learning tutorial rnnrbm.py (the RNN-RBM of Boulanger-Lewandowski
et al. for polyphonic music), written with its Theano calls and only the imports
changed: a Gibbs chain through ``scan`` with ``RandomStreams`` draws inside, an
outer ``scan`` over time that builds an RBM per step, ``consider_constant`` on the
chain's sample, and generation by a ``scan`` whose step itself runs the chain's
``scan``. Tiny piano rolls stand in for the MIDI files."""

import numpy

import symgraph as theano
import symgraph.tensor as T
from symgraph.tensor.shared_randomstreams import RandomStreams

numpy.random.seed(0xbeef)
rng = RandomStreams(seed=numpy.random.randint(1 << 30))
theano.config.warn.subtensor_merge_bug = False


def build_rbm(v, W, bv, bh, k):
    """The RBM's sample after k Gibbs steps from v, its contrastive cost and
    the reconstruction cross-entropy it monitors."""

    def gibbs_step(v):
        mean_h = T.nnet.sigmoid(T.dot(v, W) + bh)
        h = rng.binomial(size=mean_h.shape, n=1, p=mean_h, dtype=theano.config.floatX)
        mean_v = T.nnet.sigmoid(T.dot(h, W.T) + bv)
        v = rng.binomial(size=mean_v.shape, n=1, p=mean_v, dtype=theano.config.floatX)
        return mean_v, v

    chain, updates = theano.scan(lambda v: gibbs_step(v)[1], outputs_info=[v], n_steps=k)
    v_sample = chain[-1]

    mean_v = gibbs_step(v_sample)[0]
    monitor = T.xlogx.xlogy0(v, mean_v) + T.xlogx.xlogy0(1 - v, 1 - mean_v)
    monitor = monitor.sum() / v.shape[0]

    def free_energy(v):
        return -(v * bv).sum() - T.log(1 + T.exp(T.dot(v, W) + bh)).sum()

    cost = (free_energy(v) - free_energy(v_sample)) / v.shape[0]
    return v_sample, cost, monitor, updates


def shared_normal(num_rows, num_cols, scale=1):
    return theano.shared(numpy.random.normal(
        scale=scale, size=(num_rows, num_cols)).astype(theano.config.floatX))


def shared_zeros(*shape):
    return theano.shared(numpy.zeros(shape, dtype=theano.config.floatX))


def build_rnnrbm(n_visible, n_hidden, n_hidden_recurrent, k_train, k_generate, n_generate):
    W = shared_normal(n_visible, n_hidden, 0.01)
    bv = shared_zeros(n_visible)
    bh = shared_zeros(n_hidden)
    Wuh = shared_normal(n_hidden_recurrent, n_hidden, 0.0001)
    Wuv = shared_normal(n_hidden_recurrent, n_visible, 0.0001)
    Wvu = shared_normal(n_visible, n_hidden_recurrent, 0.0001)
    Wuu = shared_normal(n_hidden_recurrent, n_hidden_recurrent, 0.0001)
    bu = shared_zeros(n_hidden_recurrent)
    params = W, bv, bh, Wuh, Wuv, Wvu, Wuu, bu

    v = T.matrix()  # a piano roll: one row per time step
    u0 = T.zeros((n_hidden_recurrent,))

    def recurrence(v_t, u_tm1):
        # The RNN's state sets the biases of this step's RBM.
        bv_t = bv + T.dot(u_tm1, Wuv)
        bh_t = bh + T.dot(u_tm1, Wuh)
        generate = v_t is None
        if generate:
            v_t, _, _, updates = build_rbm(T.zeros((n_visible,)), W, bv_t, bh_t,
                                           k=k_generate)
        u_t = T.tanh(bu + T.dot(v_t, Wvu) + T.dot(u_tm1, Wuu))
        return ([v_t, u_t], updates) if generate else [u_t, bv_t, bh_t]

    (u_t, bv_t, bh_t), updates_train = theano.scan(
        lambda v_t, u_tm1, *_: recurrence(v_t, u_tm1),
        sequences=v, outputs_info=[u0, None, None], non_sequences=params)
    v_sample, cost, monitor, updates_rbm = build_rbm(v, W, bv_t[:], bh_t[:], k=k_train)
    updates_train.update(updates_rbm)

    (v_t, u_t), updates_generate = theano.scan(
        lambda u_tm1, *_: recurrence(None, u_tm1),
        outputs_info=[None, u0], non_sequences=params, n_steps=n_generate)

    return (v, v_sample, cost, monitor, params, updates_train, v_t, updates_generate)


class RnnRbm:
    def __init__(self, n_visible, n_hidden, n_hidden_recurrent, lr, k_train=15,
                 k_generate=25, n_generate=200):
        (v, v_sample, cost, monitor, params, updates_train, v_t,
         updates_generate) = build_rnnrbm(n_visible, n_hidden, n_hidden_recurrent, k_train,
                                          k_generate, n_generate)
        gradient = T.grad(cost, params, consider_constant=[v_sample])
        updates_train.update(((p, p - lr * g) for p, g in zip(params, gradient)))
        self.params = params
        self.train_function = theano.function([v], monitor, updates=updates_train)
        self.generate_function = theano.function([], v_t, updates=updates_generate)

    def train(self, dataset, num_epochs):
        costs = []
        for _ in range(num_epochs):
            numpy.random.shuffle(dataset)
            costs.append(numpy.mean([self.train_function(seq) for seq in dataset]))
        return costs


def _piano_rolls(n_visible, n_sequences, length):
    """Chords that climb one key per step, from random starting keys."""
    rolls = []
    for _ in range(n_sequences):
        start = numpy.random.randint(n_visible)
        roll = numpy.zeros((length, n_visible), dtype=theano.config.floatX)
        for t in range(length):
            for offset in (0, 4, 7):
                roll[t, (start + t + offset) % n_visible] = 1
        rolls.append(roll)
    return rolls


def test_rnnrbm_trains_and_generates():
    numpy.random.seed(0xbeef)  # other tests may have drawn from NumPy's global state
    n_visible, n_generate = 16, 12
    model = RnnRbm(n_visible=n_visible, n_hidden=12, n_hidden_recurrent=8, lr=0.05,
                   n_generate=n_generate)
    dataset = _piano_rolls(n_visible, n_sequences=6, length=10)
    before = [p.get_value().copy() for p in model.params]
    costs = model.train(dataset, num_epochs=12)
    # The monitor is a log-likelihood of the reconstruction: finite, negative,
    # and better after training on the chords than at the start.
    assert numpy.all(numpy.isfinite(costs)) and max(costs) < 0
    assert costs[-1] > costs[0]
    assert all(not numpy.array_equal(b, p.get_value()) for b, p in zip(before, model.params))

    first, second = model.generate_function(), model.generate_function()
    assert first.shape == (n_generate, n_visible)
    assert set(numpy.unique(first)) <= {0.0, 1.0}
    # The random states advance between calls through the scan's updates.
    assert not numpy.array_equal(first, second)
