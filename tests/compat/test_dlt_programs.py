"""The key parts of Theano's deep-learning tutorials (logistic regression by
SGD and by conjugate gradients, the MLP, the RBM with persistent contrastive
divergence), written with their Theano calls and only the imports changed,
on tiny synthetic data shaped like theirs."""

import numpy
import pytest
import scipy.optimize

import symgraph as theano
import symgraph.tensor as T
from symgraph.sandbox.rng_mrg import MRG_RandomStreams as RandomStreams


def shared_dataset(x, y, borrow=True):
    shared_x = theano.shared(numpy.asarray(x, dtype=theano.config.floatX), borrow=borrow)
    shared_y = theano.shared(numpy.asarray(y, dtype=theano.config.floatX), borrow=borrow)
    return shared_x, T.cast(shared_y, "int32")


def blobs(rng, n, n_in, n_out):
    centres = rng.randn(n_out, n_in) * 3
    y = rng.randint(0, n_out, size=n)
    return centres[y] + rng.randn(n, n_in), y


class LogisticRegression:
    def __init__(self, input, n_in, n_out):
        self.W = theano.shared(numpy.zeros((n_in, n_out), dtype=theano.config.floatX),
                               name="W", borrow=True)
        self.b = theano.shared(numpy.zeros((n_out,), dtype=theano.config.floatX),
                               name="b", borrow=True)
        self.p_y_given_x = T.nnet.softmax(T.dot(input, self.W) + self.b)
        self.y_pred = T.argmax(self.p_y_given_x, axis=1)
        self.params = [self.W, self.b]
        self.input = input

    def negative_log_likelihood(self, y):
        return -T.mean(T.log(self.p_y_given_x)[T.arange(y.shape[0]), y])

    def errors(self, y):
        if y.ndim != self.y_pred.ndim:
            raise TypeError("y should have the same shape as self.y_pred")
        if y.dtype.startswith("int"):
            return T.mean(T.neq(self.y_pred, y))
        raise NotImplementedError()


class HiddenLayer:
    def __init__(self, rng, input, n_in, n_out, W=None, b=None, activation=T.tanh):
        self.input = input
        if W is None:
            W_values = numpy.asarray(rng.uniform(low=-numpy.sqrt(6.0 / (n_in + n_out)),
                                                 high=numpy.sqrt(6.0 / (n_in + n_out)),
                                                 size=(n_in, n_out)),
                                     dtype=theano.config.floatX)
            if activation == theano.tensor.nnet.sigmoid:
                W_values *= 4
            W = theano.shared(value=W_values, name="W", borrow=True)
        if b is None:
            b = theano.shared(value=numpy.zeros((n_out,), dtype=theano.config.floatX),
                              name="b", borrow=True)
        self.W, self.b = W, b
        lin_output = T.dot(input, self.W) + self.b
        self.output = lin_output if activation is None else activation(lin_output)
        self.params = [self.W, self.b]


class MLP:
    def __init__(self, rng, input, n_in, n_hidden, n_out):
        self.hiddenLayer = HiddenLayer(rng=rng, input=input, n_in=n_in, n_out=n_hidden,
                                       activation=T.tanh)
        self.logRegressionLayer = LogisticRegression(input=self.hiddenLayer.output,
                                                     n_in=n_hidden, n_out=n_out)
        self.L1 = abs(self.hiddenLayer.W).sum() + abs(self.logRegressionLayer.W).sum()
        self.L2_sqr = (self.hiddenLayer.W ** 2).sum() + (self.logRegressionLayer.W ** 2).sum()
        self.negative_log_likelihood = self.logRegressionLayer.negative_log_likelihood
        self.errors = self.logRegressionLayer.errors
        self.params = self.hiddenLayer.params + self.logRegressionLayer.params
        self.input = input


def test_logistic_sgd():
    rng = numpy.random.RandomState(1234)
    train_set_x, train_set_y = shared_dataset(*blobs(rng, 200, 20, 4))
    batch_size = 20
    index = T.lscalar()
    x = T.matrix("x")
    y = T.ivector("y")
    classifier = LogisticRegression(input=x, n_in=20, n_out=4)
    cost = classifier.negative_log_likelihood(y)
    test_model = theano.function(
        inputs=[index], outputs=classifier.errors(y),
        givens={x: train_set_x[index * batch_size: (index + 1) * batch_size],
                y: train_set_y[index * batch_size: (index + 1) * batch_size]})
    g_W = T.grad(cost=cost, wrt=classifier.W)
    g_b = T.grad(cost=cost, wrt=classifier.b)
    updates = [(classifier.W, classifier.W - 0.13 * g_W), (classifier.b, classifier.b - 0.13 * g_b)]
    train_model = theano.function(
        inputs=[index], outputs=cost, updates=updates,
        givens={x: train_set_x[index * batch_size: (index + 1) * batch_size],
                y: train_set_y[index * batch_size: (index + 1) * batch_size]})
    before = numpy.mean([test_model(i) for i in range(10)])
    for _ in range(5):
        costs = [train_model(i) for i in range(10)]
    after = numpy.mean([test_model(i) for i in range(10)])
    assert numpy.isfinite(costs).all()
    assert after < 0.1 < before
    predict_model = theano.function(inputs=[classifier.input], outputs=classifier.y_pred)
    assert predict_model(train_set_x.get_value()[:5]).shape == (5,)
    with pytest.raises(TypeError):
        classifier.errors(T.imatrix())


def test_logistic_cg():
    rng = numpy.random.RandomState(0)
    n_in, n_out = 10, 3
    data_x, data_y = blobs(rng, 60, n_in, n_out)
    train_set_x, train_set_y = shared_dataset(data_x, data_y)
    minibatch_offset = T.lscalar()
    x = T.matrix()
    y = T.ivector()
    theta = theano.shared(value=numpy.zeros(n_in * n_out + n_out, dtype=x.dtype),
                          name="theta", borrow=True)
    W = theta[0:n_in * n_out].reshape((n_in, n_out))
    b = theta[n_in * n_out:n_in * n_out + n_out]
    p_y_given_x = T.nnet.softmax(T.dot(x, W) + b)
    cost = -T.mean(T.log(p_y_given_x)[T.arange(y.shape[0]), y])
    batch_size = 20
    givens = {x: train_set_x[minibatch_offset:minibatch_offset + batch_size],
              y: train_set_y[minibatch_offset:minibatch_offset + batch_size]}
    batch_cost = theano.function([minibatch_offset], cost, givens=givens, name="batch_cost")
    batch_grad = theano.function([minibatch_offset], T.grad(cost, theta), givens=givens,
                                 name="batch_grad")

    def train_fn(theta_value):
        theta.set_value(theta_value, borrow=True)
        return numpy.mean([batch_cost(i * batch_size) for i in range(3)])

    def train_fn_grad(theta_value):
        theta.set_value(theta_value, borrow=True)
        grad = batch_grad(0)
        for i in range(1, 3):
            grad += batch_grad(i * batch_size)
        return grad / 3

    start = train_fn(numpy.zeros_like(theta.get_value()))
    best = scipy.optimize.fmin_cg(f=train_fn, x0=numpy.zeros_like(theta.get_value()),
                                  fprime=train_fn_grad, disp=0, maxiter=20)
    assert train_fn(best) < 0.2 * start


def test_mlp_with_l1_l2():
    rng = numpy.random.RandomState(1234)
    train_set_x, train_set_y = shared_dataset(*blobs(rng, 100, 12, 3))
    batch_size = 20
    index = T.lscalar()
    x = T.matrix("x")
    y = T.ivector("y")
    classifier = MLP(rng=rng, input=x, n_in=12, n_hidden=16, n_out=3)
    cost = classifier.negative_log_likelihood(y) + 0.0001 * classifier.L1 + \
        0.0001 * classifier.L2_sqr
    gparams = [T.grad(cost, param) for param in classifier.params]
    updates = [(param, param - 0.05 * gparam)
               for param, gparam in zip(classifier.params, gparams)]
    train_model = theano.function(
        inputs=[index], outputs=cost, updates=updates,
        givens={x: train_set_x[index * batch_size: (index + 1) * batch_size],
                y: train_set_y[index * batch_size: (index + 1) * batch_size]})
    first = numpy.mean([train_model(i) for i in range(5)])
    for _ in range(10):
        last = numpy.mean([train_model(i) for i in range(5)])
    assert numpy.isfinite(last) and last < 0.5 * first


class RBM:
    def __init__(self, input=None, n_visible=16, n_hidden=8, W=None, hbias=None, vbias=None,
                 numpy_rng=None, theano_rng=None):
        self.n_visible, self.n_hidden = n_visible, n_hidden
        if numpy_rng is None:
            numpy_rng = numpy.random.RandomState(1234)
        if theano_rng is None:
            theano_rng = RandomStreams(numpy_rng.randint(2 ** 30))
        if W is None:
            bound = 4 * numpy.sqrt(6.0 / (n_hidden + n_visible))
            W = theano.shared(value=numpy.asarray(
                numpy_rng.uniform(low=-bound, high=bound, size=(n_visible, n_hidden)),
                dtype=theano.config.floatX), name="W", borrow=True)
        if hbias is None:
            hbias = theano.shared(value=numpy.zeros(n_hidden, dtype=theano.config.floatX),
                                  name="hbias", borrow=True)
        if vbias is None:
            vbias = theano.shared(value=numpy.zeros(n_visible, dtype=theano.config.floatX),
                                  name="vbias", borrow=True)
        self.input = input if input is not None else T.matrix("input")
        self.W, self.hbias, self.vbias = W, hbias, vbias
        self.theano_rng = theano_rng
        self.params = [self.W, self.hbias, self.vbias]

    def free_energy(self, v_sample):
        wx_b = T.dot(v_sample, self.W) + self.hbias
        vbias_term = T.dot(v_sample, self.vbias)
        hidden_term = T.sum(T.log(1 + T.exp(wx_b)), axis=1)
        return -hidden_term - vbias_term

    def propup(self, vis):
        pre_sigmoid_activation = T.dot(vis, self.W) + self.hbias
        return [pre_sigmoid_activation, T.nnet.sigmoid(pre_sigmoid_activation)]

    def sample_h_given_v(self, v0_sample):
        pre_sigmoid_h1, h1_mean = self.propup(v0_sample)
        h1_sample = self.theano_rng.binomial(size=h1_mean.shape, n=1, p=h1_mean,
                                             dtype=theano.config.floatX)
        return [pre_sigmoid_h1, h1_mean, h1_sample]

    def propdown(self, hid):
        pre_sigmoid_activation = T.dot(hid, self.W.T) + self.vbias
        return [pre_sigmoid_activation, T.nnet.sigmoid(pre_sigmoid_activation)]

    def sample_v_given_h(self, h0_sample):
        pre_sigmoid_v1, v1_mean = self.propdown(h0_sample)
        v1_sample = self.theano_rng.binomial(size=v1_mean.shape, n=1, p=v1_mean,
                                             dtype=theano.config.floatX)
        return [pre_sigmoid_v1, v1_mean, v1_sample]

    def gibbs_hvh(self, h0_sample):
        pre_sigmoid_v1, v1_mean, v1_sample = self.sample_v_given_h(h0_sample)
        pre_sigmoid_h1, h1_mean, h1_sample = self.sample_h_given_v(v1_sample)
        return [pre_sigmoid_v1, v1_mean, v1_sample, pre_sigmoid_h1, h1_mean, h1_sample]

    def gibbs_vhv(self, v0_sample):
        pre_sigmoid_h1, h1_mean, h1_sample = self.sample_h_given_v(v0_sample)
        pre_sigmoid_v1, v1_mean, v1_sample = self.sample_v_given_h(h1_sample)
        return [pre_sigmoid_h1, h1_mean, h1_sample, pre_sigmoid_v1, v1_mean, v1_sample]

    def get_cost_updates(self, lr=0.1, persistent=None, k=1):
        pre_sigmoid_ph, ph_mean, ph_sample = self.sample_h_given_v(self.input)
        chain_start = ph_sample if persistent is None else persistent
        ([pre_sigmoid_nvs, nv_means, nv_samples, pre_sigmoid_nhs, nh_means, nh_samples],
         updates) = theano.scan(self.gibbs_hvh,
                                outputs_info=[None, None, None, None, None, chain_start],
                                n_steps=k, name="gibbs_hvh")
        chain_end = nv_samples[-1]
        cost = T.mean(self.free_energy(self.input)) - T.mean(self.free_energy(chain_end))
        gparams = T.grad(cost, self.params, consider_constant=[chain_end])
        for gparam, param in zip(gparams, self.params):
            updates[param] = param - gparam * T.cast(lr, dtype=theano.config.floatX)
        if persistent:
            updates[persistent] = nh_samples[-1]
            monitoring_cost = self.get_pseudo_likelihood_cost(updates)
        else:
            monitoring_cost = None
        return monitoring_cost, updates

    def get_pseudo_likelihood_cost(self, updates):
        bit_i_idx = theano.shared(value=0, name="bit_i_idx")
        xi = T.round(self.input)
        fe_xi = self.free_energy(xi)
        xi_flip = T.set_subtensor(xi[:, bit_i_idx], 1 - xi[:, bit_i_idx])
        fe_xi_flip = self.free_energy(xi_flip)
        cost = T.mean(self.n_visible * T.log(T.nnet.sigmoid(fe_xi_flip - fe_xi)))
        updates[bit_i_idx] = (bit_i_idx + 1) % self.n_visible
        return cost


def test_rbm_persistent_cd():
    rng = numpy.random.RandomState(123)
    patterns = rng.binomial(1, 0.5, size=(3, 16))
    data = patterns[rng.randint(0, 3, size=60)].astype(theano.config.floatX)
    train_set_x = theano.shared(data, borrow=True)
    batch_size = 10
    index = T.lscalar()
    x = T.matrix("x")
    theano_rng = RandomStreams(rng.randint(2 ** 30))
    persistent_chain = theano.shared(numpy.zeros((batch_size, 8), dtype=theano.config.floatX),
                                     borrow=True)
    rbm = RBM(input=x, n_visible=16, n_hidden=8, numpy_rng=rng, theano_rng=theano_rng)
    cost, updates = rbm.get_cost_updates(lr=0.1, persistent=persistent_chain, k=2)
    train_rbm = theano.function([index], cost, updates=updates,
                                givens={x: train_set_x[index * batch_size:
                                                       (index + 1) * batch_size]},
                                name="train_rbm")
    costs = [numpy.mean([train_rbm(i) for i in range(6)]) for _ in range(8)]
    assert numpy.isfinite(costs).all()
    assert costs[-1] > costs[0]       # the pseudo-likelihood rises
    assert persistent_chain.get_value().any()
    # sampling from the model, as the tutorial's plot does
    number_of_test_samples = 4
    persistent_vis_chain = theano.shared(numpy.asarray(data[:number_of_test_samples]))
    ([presig_hids, hid_mfs, hid_samples, presig_vis, vis_mfs, vis_samples], updates) = \
        theano.scan(rbm.gibbs_vhv,
                    outputs_info=[None, None, None, None, None, persistent_vis_chain],
                    n_steps=3, name="gibbs_vhv")
    updates.update({persistent_vis_chain: vis_samples[-1]})
    sample_fn = theano.function([], [vis_mfs[-1], vis_samples[-1]], updates=updates,
                                name="sample_fn")
    means, samples = sample_fn()
    assert means.shape == (4, 16) and set(numpy.unique(samples)) <= {0.0, 1.0}

