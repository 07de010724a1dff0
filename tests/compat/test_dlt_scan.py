"""Theano's deep-learning tutorials that loop with ``scan``: Hybrid Monte-Carlo
sampling (hmc/hmc.py), the LSTM sentiment classifier (lstm.py, with adadelta)
and the Elman RNN for slot filling (rnnslu.py), written with their Theano
calls and only the imports changed, on tiny data shaped like theirs."""

from collections import OrderedDict

import numpy

import symgraph as theano
import symgraph.tensor as TT
import symgraph.tensor as tensor
from symgraph import config
from symgraph.sandbox.rng_mrg import MRG_RandomStreams as RandomStreams
from symgraph.scalar import upcast  # Theano: theano.scalar.upcast

T = TT


# -- hmc/hmc.py --------------------------------------------------------------------------

def sharedX(value, name=None):
    return theano.shared(numpy.asarray(value, dtype=theano.config.floatX), name=name)


def kinetic_energy(vel):
    return 0.5 * (vel ** 2).sum(axis=1)


def hamiltonian(pos, vel, energy_fn):
    return energy_fn(pos) + kinetic_energy(vel)


def metropolis_hastings_accept(energy_prev, energy_next, s_rng):
    ediff = energy_prev - energy_next
    return (TT.exp(ediff) - s_rng.uniform(size=energy_prev.shape)) >= 0


def simulate_dynamics(initial_pos, initial_vel, stepsize, n_steps, energy_fn):
    def leapfrog(pos, vel, step):
        dE_dpos = TT.grad(energy_fn(pos).sum(), pos)
        new_vel = vel - step * dE_dpos
        new_pos = pos + step * new_vel
        return [new_pos, new_vel], {}

    initial_energy = energy_fn(initial_pos)
    dE_dpos = TT.grad(initial_energy.sum(), initial_pos)
    vel_half_step = initial_vel - 0.5 * stepsize * dE_dpos
    pos_full_step = initial_pos + stepsize * vel_half_step
    (all_pos, all_vel), scan_updates = theano.scan(
        leapfrog, outputs_info=[dict(initial=pos_full_step), dict(initial=vel_half_step)],
        non_sequences=[stepsize], n_steps=n_steps - 1)
    final_pos = all_pos[-1]
    final_vel = all_vel[-1]
    assert not scan_updates
    energy = energy_fn(final_pos)
    final_vel = final_vel - 0.5 * stepsize * TT.grad(energy.sum(), final_pos)
    return final_pos, final_vel


def hmc_move(s_rng, positions, energy_fn, stepsize, n_steps):
    initial_vel = s_rng.normal(size=positions.shape)
    final_pos, final_vel = simulate_dynamics(initial_pos=positions, initial_vel=initial_vel,
                                             stepsize=stepsize, n_steps=n_steps,
                                             energy_fn=energy_fn)
    accept = metropolis_hastings_accept(
        energy_prev=hamiltonian(positions, initial_vel, energy_fn),
        energy_next=hamiltonian(final_pos, final_vel, energy_fn), s_rng=s_rng)
    return accept, final_pos


def hmc_updates(positions, stepsize, avg_acceptance_rate, final_pos, accept,
                target_acceptance_rate, stepsize_inc, stepsize_dec, stepsize_min,
                stepsize_max, avg_acceptance_slowness):
    accept_matrix = accept.dimshuffle(0, *(("x",) * (final_pos.ndim - 1)))
    new_positions = TT.switch(accept_matrix, final_pos, positions)
    _new_stepsize = TT.switch(avg_acceptance_rate > target_acceptance_rate,
                              stepsize * stepsize_inc, stepsize * stepsize_dec)
    new_stepsize = TT.clip(_new_stepsize, stepsize_min, stepsize_max)
    mean_dtype = upcast(accept.dtype, avg_acceptance_rate.dtype)
    new_acceptance_rate = TT.add(
        avg_acceptance_slowness * avg_acceptance_rate,
        (1.0 - avg_acceptance_slowness) * accept.mean(dtype=mean_dtype))
    return [(positions, new_positions), (stepsize, new_stepsize),
            (avg_acceptance_rate, new_acceptance_rate)]


class HMC_sampler:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    @classmethod
    def new_from_shared_positions(cls, shared_positions, energy_fn, initial_stepsize=0.01,
                                  target_acceptance_rate=.9, n_steps=20, stepsize_dec=0.98,
                                  stepsize_min=0.001, stepsize_max=0.25, stepsize_inc=1.02,
                                  avg_acceptance_slowness=0.9, seed=12345):
        stepsize = sharedX(initial_stepsize, "hmc_stepsize")
        avg_acceptance_rate = sharedX(target_acceptance_rate, "avg_acceptance_rate")
        s_rng = TT.shared_randomstreams.RandomStreams(seed)
        accept, final_pos = hmc_move(s_rng, shared_positions, energy_fn, stepsize, n_steps)
        simulate_updates = hmc_updates(
            shared_positions, stepsize, avg_acceptance_rate, final_pos=final_pos,
            accept=accept, stepsize_min=stepsize_min, stepsize_max=stepsize_max,
            stepsize_inc=stepsize_inc, stepsize_dec=stepsize_dec,
            target_acceptance_rate=target_acceptance_rate,
            avg_acceptance_slowness=avg_acceptance_slowness)
        simulate = theano.function([], [], updates=simulate_updates)
        return cls(positions=shared_positions, stepsize=stepsize,
                   stepsize_min=stepsize_min, stepsize_max=stepsize_max,
                   avg_acceptance_rate=avg_acceptance_rate,
                   target_acceptance_rate=target_acceptance_rate, s_rng=s_rng,
                   _updates=simulate_updates, simulate=simulate)

    def draw(self, **kwargs):
        self.simulate()
        return self.positions.get_value(borrow=False)


def test_hmc_samples_a_gaussian():
    batchsize, dim = 4, 2
    rng = numpy.random.RandomState(123)
    mu = numpy.array([1.0, -2.0])
    cov = numpy.array([[1.0, 0.6], [0.6, 2.0]])
    cov_inv = numpy.linalg.inv(cov)

    def gaussian_energy(x):
        return 0.5 * (TT.dot((x - mu), cov_inv) * (x - mu)).sum(axis=1)

    position = rng.randn(batchsize, dim).astype(theano.config.floatX)
    position = theano.shared(position)
    sampler = HMC_sampler.new_from_shared_positions(position, gaussian_energy,
                                                    initial_stepsize=0.1, stepsize_max=0.25,
                                                    n_steps=10)
    for _ in range(200):    # burn-in, while the step size adapts
        sampler.draw()
    samples = numpy.asarray([sampler.draw() for _ in range(400)]).reshape(-1, dim)
    assert numpy.isfinite(samples).all()
    # Correlated draws of 4 chains: loose statistics (a NumPy copy of the same
    # algorithm is as far off); the dynamics are checked exactly below.
    numpy.testing.assert_allclose(samples.mean(axis=0), mu, atol=0.3)
    variances = numpy.diag(numpy.cov(samples.T))
    assert (variances > 0.5 * numpy.diag(cov)).all() and (variances < 1.5 * numpy.diag(cov)).all()
    assert 0.3 < sampler.avg_acceptance_rate.get_value() <= 1.0
    assert 0.001 <= sampler.stepsize.get_value() <= 0.25


def test_hmc_leapfrog_matches_numpy():
    mu = numpy.array([1.0, -2.0])
    A = numpy.linalg.inv(numpy.array([[1.0, 0.6], [0.6, 2.0]]))

    def energy(x):
        return 0.5 * (TT.dot((x - mu), A) * (x - mu)).sum(axis=1)

    p, v = TT.dmatrices("p", "v")
    eps = TT.dscalar("eps")
    f = theano.function([p, v, eps], simulate_dynamics(p, v, eps, 10, energy))
    rng = numpy.random.RandomState(0)
    P, V = rng.randn(3, 2), rng.randn(3, 2)
    got_pos, got_vel = f(P, V, 0.3)

    def grad(x):
        return (x - mu) @ A

    vel = V - 0.5 * 0.3 * grad(P)
    pos = P + 0.3 * vel
    for _ in range(9):
        vel = vel - 0.3 * grad(pos)
        pos = pos + 0.3 * vel
    vel = vel - 0.5 * 0.3 * grad(pos)
    numpy.testing.assert_allclose(got_pos, pos, rtol=1e-12)
    numpy.testing.assert_allclose(got_vel, vel, rtol=1e-12)


# -- lstm.py ----------------------------------------------------------------------------------

SEED = 123


def numpy_floatX(data):
    return numpy.asarray(data, dtype=config.floatX)


def _p(pp, name):
    return "%s_%s" % (pp, name)


def ortho_weight(ndim):
    W = numpy.random.randn(ndim, ndim)
    u, s, v = numpy.linalg.svd(W)
    return u.astype(config.floatX)


def init_params(options):
    params = OrderedDict()
    randn = numpy.random.rand(options["n_words"], options["dim_proj"])
    params["Wemb"] = (0.01 * randn).astype(config.floatX)
    W = numpy.concatenate([ortho_weight(options["dim_proj"]) for _ in range(4)], axis=1)
    params[_p("lstm", "W")] = W
    U = numpy.concatenate([ortho_weight(options["dim_proj"]) for _ in range(4)], axis=1)
    params[_p("lstm", "U")] = U
    params[_p("lstm", "b")] = numpy.zeros((4 * options["dim_proj"],)).astype(config.floatX)
    params["U"] = 0.01 * numpy.random.randn(options["dim_proj"],
                                            options["ydim"]).astype(config.floatX)
    params["b"] = numpy.zeros((options["ydim"],)).astype(config.floatX)
    return params


def init_tparams(params):
    tparams = OrderedDict()
    for kk, pp in params.items():
        tparams[kk] = theano.shared(params[kk], name=kk)
    return tparams


def dropout_layer(state_before, use_noise, trng):
    return tensor.switch(use_noise,
                         (state_before * trng.binomial(state_before.shape, p=0.5, n=1,
                                                       dtype=state_before.dtype)),
                         state_before * 0.5)


def lstm_layer(tparams, state_below, options, prefix="lstm", mask=None):
    nsteps = state_below.shape[0]
    n_samples = state_below.shape[1] if state_below.ndim == 3 else 1
    assert mask is not None

    def _slice(_x, n, dim):
        if _x.ndim == 3:
            return _x[:, :, n * dim:(n + 1) * dim]
        return _x[:, n * dim:(n + 1) * dim]

    def _step(m_, x_, h_, c_):
        preact = tensor.dot(h_, tparams[_p(prefix, "U")])
        preact += x_
        i = tensor.nnet.sigmoid(_slice(preact, 0, options["dim_proj"]))
        f = tensor.nnet.sigmoid(_slice(preact, 1, options["dim_proj"]))
        o = tensor.nnet.sigmoid(_slice(preact, 2, options["dim_proj"]))
        c = tensor.tanh(_slice(preact, 3, options["dim_proj"]))
        c = f * c_ + i * c
        c = m_[:, None] * c + (1. - m_)[:, None] * c_
        h = o * tensor.tanh(c)
        h = m_[:, None] * h + (1. - m_)[:, None] * h_
        return h, c

    state_below = (tensor.dot(state_below, tparams[_p(prefix, "W")]) +
                   tparams[_p(prefix, "b")])
    dim_proj = options["dim_proj"]
    rval, updates = theano.scan(_step, sequences=[mask, state_below],
                                outputs_info=[tensor.alloc(numpy_floatX(0.), n_samples, dim_proj),
                                              tensor.alloc(numpy_floatX(0.), n_samples, dim_proj)],
                                name=_p(prefix, "_layers"), n_steps=nsteps)
    return rval[0]


def build_model(tparams, options):
    trng = RandomStreams(SEED)
    use_noise = theano.shared(numpy_floatX(0.))
    x = tensor.matrix("x", dtype="int64")
    mask = tensor.matrix("mask", dtype=config.floatX)
    y = tensor.vector("y", dtype="int64")
    n_timesteps = x.shape[0]
    n_samples = x.shape[1]
    emb = tparams["Wemb"][x.flatten()].reshape([n_timesteps, n_samples, options["dim_proj"]])
    proj = lstm_layer(tparams, emb, options, prefix="lstm", mask=mask)
    proj = (proj * mask[:, :, None]).sum(axis=0)
    proj = proj / mask.sum(axis=0)[:, None]
    if options["use_dropout"]:
        proj = dropout_layer(proj, use_noise, trng)
    pred = tensor.nnet.softmax(tensor.dot(proj, tparams["U"]) + tparams["b"])
    f_pred_prob = theano.function([x, mask], pred, name="f_pred_prob")
    f_pred = theano.function([x, mask], pred.argmax(axis=1), name="f_pred")
    off = 1e-8
    cost = -tensor.log(pred[tensor.arange(n_samples), y] + off).mean()
    return use_noise, x, mask, y, f_pred_prob, f_pred, cost


def adadelta(lr, tparams, grads, x, mask, y, cost):
    zipped_grads = [theano.shared(p.get_value() * numpy_floatX(0.), name="%s_grad" % k)
                    for k, p in tparams.items()]
    running_up2 = [theano.shared(p.get_value() * numpy_floatX(0.), name="%s_rup2" % k)
                   for k, p in tparams.items()]
    running_grads2 = [theano.shared(p.get_value() * numpy_floatX(0.), name="%s_rgrad2" % k)
                      for k, p in tparams.items()]
    zgup = [(zg, g) for zg, g in zip(zipped_grads, grads)]
    rg2up = [(rg2, 0.95 * rg2 + 0.05 * (g ** 2)) for rg2, g in zip(running_grads2, grads)]
    f_grad_shared = theano.function([x, mask, y], cost, updates=zgup + rg2up,
                                    name="adadelta_f_grad_shared")
    updir = [-tensor.sqrt(ru2 + 1e-6) / tensor.sqrt(rg2 + 1e-6) * zg
             for zg, ru2, rg2 in zip(zipped_grads, running_up2, running_grads2)]
    ru2up = [(ru2, 0.95 * ru2 + 0.05 * (ud ** 2)) for ru2, ud in zip(running_up2, updir)]
    param_up = [(p, p + ud) for p, ud in zip(tparams.values(), updir)]
    f_update = theano.function([lr], [], updates=ru2up + param_up, on_unused_input="ignore",
                               name="adadelta_f_update")
    return f_grad_shared, f_update


def prepare_data(seqs, labels, maxlen=None):
    lengths = [len(s) for s in seqs]
    n_samples = len(seqs)
    maxlen = numpy.max(lengths)
    x = numpy.zeros((maxlen, n_samples)).astype("int64")
    x_mask = numpy.zeros((maxlen, n_samples)).astype(theano.config.floatX)
    for idx, s in enumerate(seqs):
        x[:lengths[idx], idx] = s
        x_mask[:lengths[idx], idx] = 1.
    return x, x_mask, labels


def test_lstm_sentiment_with_adadelta():
    numpy.random.seed(SEED)
    rng = numpy.random.RandomState(0)
    options = dict(n_words=20, dim_proj=6, ydim=2, use_dropout=True, decay_c=1e-4)
    # Sentences of word ids; the label says whether word 1 occurs (a tiny task).
    seqs = [list(rng.randint(2, 20, size=rng.randint(2, 7))) for _ in range(16)]
    labels = [i % 2 for i in range(16)]
    for s, lab in zip(seqs, labels):
        if lab:
            s[rng.randint(len(s))] = 1
    params = init_params(options)
    tparams = init_tparams(params)
    (use_noise, x, mask, y, f_pred_prob, f_pred, cost) = build_model(tparams, options)
    weight_decay = theano.shared(numpy_floatX(options["decay_c"]), name="decay_c")
    cost += weight_decay * (tparams["U"] ** 2).sum()
    f_cost = theano.function([x, mask, y], cost, name="f_cost")
    grads = tensor.grad(cost, wrt=list(tparams.values()))
    lr = tensor.scalar(name="lr")
    f_grad_shared, f_update = adadelta(lr, tparams, grads, x, mask, y, cost)
    bx, bmask, by = prepare_data(seqs, numpy.asarray(labels, dtype="int64"))
    use_noise.set_value(0.)
    before = f_cost(bx, bmask, by)
    use_noise.set_value(1.)
    for _ in range(60):
        for start in range(0, 16, 4):
            xb, mb, yb = prepare_data(seqs[start:start + 4],
                                      numpy.asarray(labels[start:start + 4], dtype="int64"))
            c = f_grad_shared(xb, mb, yb)
            f_update(0.0001)
            assert numpy.isfinite(c)
    use_noise.set_value(0.)
    after = f_cost(bx, bmask, by)
    assert after < before
    probs = f_pred_prob(bx, bmask)
    assert probs.shape == (16, 2)
    numpy.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert f_pred(bx, bmask).shape == (16,)


# -- rnnslu.py ----------------------------------------------------------------------------------

def contextwin(l, win):
    assert (win % 2) == 1 and win >= 1
    lpadded = win // 2 * [-1] + list(l) + win // 2 * [-1]
    out = [lpadded[i:(i + win)] for i in range(len(l))]
    assert len(out) == len(l)
    return out


class RNNSLU:
    def __init__(self, nh, nc, ne, de, cs):
        self.emb = theano.shared(name="embeddings", value=0.2 * numpy.random.uniform(
            -1.0, 1.0, (ne + 1, de)).astype(theano.config.floatX))
        self.wx = theano.shared(name="wx", value=0.2 * numpy.random.uniform(
            -1.0, 1.0, (de * cs, nh)).astype(theano.config.floatX))
        self.wh = theano.shared(name="wh", value=0.2 * numpy.random.uniform(
            -1.0, 1.0, (nh, nh)).astype(theano.config.floatX))
        self.w = theano.shared(name="w", value=0.2 * numpy.random.uniform(
            -1.0, 1.0, (nh, nc)).astype(theano.config.floatX))
        self.bh = theano.shared(name="bh", value=numpy.zeros(nh, dtype=theano.config.floatX))
        self.b = theano.shared(name="b", value=numpy.zeros(nc, dtype=theano.config.floatX))
        self.h0 = theano.shared(name="h0", value=numpy.zeros(nh, dtype=theano.config.floatX))
        self.params = [self.emb, self.wx, self.wh, self.w, self.bh, self.b, self.h0]
        idxs = T.imatrix()
        x = self.emb[idxs].reshape((idxs.shape[0], de * cs))
        y_sentence = T.ivector("y_sentence")

        def recurrence(x_t, h_tm1):
            h_t = T.nnet.sigmoid(T.dot(x_t, self.wx) + T.dot(h_tm1, self.wh) + self.bh)
            s_t = T.nnet.softmax(T.dot(h_t, self.w) + self.b)
            return [h_t, s_t]

        [h, s], _ = theano.scan(fn=recurrence, sequences=x, outputs_info=[self.h0, None],
                                n_steps=x.shape[0])
        p_y_given_x_sentence = s[:, 0, :]
        y_pred = T.argmax(p_y_given_x_sentence, axis=1)
        lr = T.scalar("lr")
        sentence_nll = -T.mean(T.log(p_y_given_x_sentence)[T.arange(x.shape[0]), y_sentence])
        sentence_gradients = T.grad(sentence_nll, self.params)
        sentence_updates = OrderedDict((p, p - lr * g)
                                       for p, g in zip(self.params, sentence_gradients))
        self.classify = theano.function(inputs=[idxs], outputs=y_pred)
        self.sentence_train = theano.function(inputs=[idxs, y_sentence, lr],
                                              outputs=sentence_nll, updates=sentence_updates)
        self.normalize = theano.function(inputs=[], updates={
            self.emb: self.emb / T.sqrt((self.emb ** 2).sum(axis=1)).dimshuffle(0, "x")})

    def train(self, x, y, window_size, learning_rate):
        cwords = contextwin(x, window_size)
        words = list(map(lambda x: numpy.asarray(x).astype("int32"), cwords))
        labels = y
        nll = self.sentence_train(words, labels, learning_rate)
        self.normalize()
        return nll


def test_elman_rnn_slot_filling():
    numpy.random.seed(345)
    rng = numpy.random.RandomState(1)
    ne, nc, win = 12, 3, 3
    rnn = RNNSLU(nh=8, nc=nc, ne=ne, de=5, cs=win)
    # Words 0-3 are labelled 0, 4-7 label 1, 8-11 label 2 (a lookup the RNN learns).
    sentences = [rng.randint(0, ne, size=rng.randint(3, 7)) for _ in range(10)]
    labels = [numpy.asarray(s // 4, dtype="int32") for s in sentences]
    first = [rnn.train(s, lab, win, 0.5) for s, lab in zip(sentences, labels)]
    for _ in range(25):
        last = [rnn.train(s, lab, win, 0.5) for s, lab in zip(sentences, labels)]
    assert numpy.isfinite(last).all() and numpy.mean(last) < numpy.mean(first)
    norms = numpy.sqrt((rnn.emb.get_value() ** 2).sum(axis=1))
    numpy.testing.assert_allclose(norms, 1.0)
    predictions = [rnn.classify(numpy.asarray(contextwin(s, win)).astype("int32"))
                   for s in sentences]
    accuracy = numpy.mean(numpy.concatenate([p == lab for p, lab in zip(predictions, labels)]))
    assert accuracy > 0.8
