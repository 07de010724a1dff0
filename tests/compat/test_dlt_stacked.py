"""Theano's deep-learning tutorials that stack layers: the stacked denoising
autoencoder (SdA.py), the contractive autoencoder (cA.py) and the deep belief
network (DBN.py), written with their Theano calls and only the imports changed,
on tiny synthetic data shaped like theirs (minibatches of a shared dataset
through givens, layer-wise pretraining functions, then finetuning)."""

import numpy

import symgraph as theano
import symgraph.tensor as T
from symgraph.sandbox.rng_mrg import MRG_RandomStreams
from symgraph.tensor.shared_randomstreams import RandomStreams
from tests.compat.test_dlt_programs import RBM, HiddenLayer, LogisticRegression, blobs, \
    shared_dataset
from tests.compat.test_tutorial_programs import DenoisingAutoencoder


class SdA:
    def __init__(self, numpy_rng, theano_rng=None, n_ins=12, hidden_layers_sizes=(10, 8),
                 n_outs=3):
        self.sigmoid_layers, self.dA_layers, self.params = [], [], []
        self.n_layers = len(hidden_layers_sizes)
        if not theano_rng:
            theano_rng = RandomStreams(numpy_rng.randint(2 ** 30))
        self.x = T.matrix("x")
        self.y = T.ivector("y")
        for i in range(self.n_layers):
            input_size = n_ins if i == 0 else hidden_layers_sizes[i - 1]
            layer_input = self.x if i == 0 else self.sigmoid_layers[-1].output
            sigmoid_layer = HiddenLayer(rng=numpy_rng, input=layer_input, n_in=input_size,
                                        n_out=hidden_layers_sizes[i],
                                        activation=T.nnet.sigmoid)
            self.sigmoid_layers.append(sigmoid_layer)
            self.params.extend(sigmoid_layer.params)
            dA_layer = DenoisingAutoencoder(numpy_rng=numpy_rng, theano_rng=theano_rng,
                                            input=layer_input, n_visible=input_size,
                                            n_hidden=hidden_layers_sizes[i],
                                            W=sigmoid_layer.W, bhid=sigmoid_layer.b)
            self.dA_layers.append(dA_layer)
        self.logLayer = LogisticRegression(input=self.sigmoid_layers[-1].output,
                                           n_in=hidden_layers_sizes[-1], n_out=n_outs)
        self.params.extend(self.logLayer.params)
        self.finetune_cost = self.logLayer.negative_log_likelihood(self.y)
        self.errors = self.logLayer.errors(self.y)

    def pretraining_functions(self, train_set_x, batch_size):
        index = T.lscalar("index")
        corruption_level = T.scalar("corruption")
        learning_rate = T.scalar("lr")
        batch_begin = index * batch_size
        batch_end = batch_begin + batch_size
        pretrain_fns = []
        for dA in self.dA_layers:
            cost, updates = dA.get_cost_updates(corruption_level, learning_rate)
            fn = theano.function(
                inputs=[index, theano.In(corruption_level, value=0.2),
                        theano.In(learning_rate, value=0.1)],
                outputs=cost, updates=updates,
                givens={self.x: train_set_x[batch_begin: batch_end]})
            pretrain_fns.append(fn)
        return pretrain_fns

    def build_finetune_functions(self, train_set_x, train_set_y, batch_size, learning_rate):
        index = T.lscalar("index")
        gparams = T.grad(self.finetune_cost, self.params)
        updates = [(param, param - gparam * learning_rate)
                   for param, gparam in zip(self.params, gparams)]
        train_fn = theano.function(
            inputs=[index], outputs=self.finetune_cost, updates=updates,
            givens={self.x: train_set_x[index * batch_size: (index + 1) * batch_size],
                    self.y: train_set_y[index * batch_size: (index + 1) * batch_size]},
            name="train")
        test_score_i = theano.function(
            [index], self.errors,
            givens={self.x: train_set_x[index * batch_size: (index + 1) * batch_size],
                    self.y: train_set_y[index * batch_size: (index + 1) * batch_size]},
            name="test")
        return train_fn, test_score_i


def _dataset(rng, n=60, n_in=12, n_out=3):
    x, y = blobs(rng, n, n_in, n_out)
    x = 1 / (1 + numpy.exp(-x))     # the tutorials' inputs are in [0, 1] (MNIST pixels)
    return shared_dataset(x, y)


def test_stacked_denoising_autoencoder():
    numpy_rng = numpy.random.RandomState(89677)
    train_set_x, train_set_y = _dataset(numpy_rng)
    sda = SdA(numpy_rng=numpy_rng)
    pretraining_fns = sda.pretraining_functions(train_set_x=train_set_x, batch_size=10)
    corruption_levels = [0.1, 0.2]
    for i in range(sda.n_layers):
        costs = [numpy.mean([pretraining_fns[i](index=b, corruption=corruption_levels[i],
                                                lr=0.1) for b in range(6)])
                 for _ in range(6)]
        assert numpy.isfinite(costs).all() and costs[-1] < costs[0]
    train_fn, test_model = sda.build_finetune_functions(train_set_x, train_set_y, 10, 0.1)
    before = numpy.mean([test_model(i) for i in range(6)])
    for _ in range(40):
        for b in range(6):
            train_fn(b)
    after = numpy.mean([test_model(i) for i in range(6)])
    assert after < before and after < 0.2


class cA:
    def __init__(self, numpy_rng, input=None, n_visible=12, n_hidden=6, n_batchsize=10,
                 W=None, bhid=None, bvis=None):
        self.n_visible, self.n_hidden, self.n_batchsize = n_visible, n_hidden, n_batchsize
        if not W:
            initial_W = numpy.asarray(numpy_rng.uniform(
                low=-4 * numpy.sqrt(6.0 / (n_hidden + n_visible)),
                high=4 * numpy.sqrt(6.0 / (n_hidden + n_visible)),
                size=(n_visible, n_hidden)), dtype=theano.config.floatX)
            W = theano.shared(value=initial_W, name="W", borrow=True)
        if not bvis:
            bvis = theano.shared(value=numpy.zeros(n_visible, dtype=theano.config.floatX),
                                 borrow=True)
        if not bhid:
            bhid = theano.shared(value=numpy.zeros(n_hidden, dtype=theano.config.floatX),
                                 name="b", borrow=True)
        self.W, self.b, self.b_prime = W, bhid, bvis
        self.W_prime = self.W.T
        self.x = T.dmatrix(name="input") if input is None else input
        self.params = [self.W, self.b, self.b_prime]

    def get_hidden_values(self, input):
        return T.nnet.sigmoid(T.dot(input, self.W) + self.b)

    def get_jacobian(self, hidden, W):
        return T.reshape(hidden * (1 - hidden), (self.n_batchsize, 1, self.n_hidden)) * \
            T.reshape(W, (1, self.n_visible, self.n_hidden))

    def get_reconstructed_input(self, hidden):
        return T.nnet.sigmoid(T.dot(hidden, self.W_prime) + self.b_prime)

    def get_cost_updates(self, contraction_level, learning_rate):
        y = self.get_hidden_values(self.x)
        z = self.get_reconstructed_input(y)
        J = self.get_jacobian(y, self.W)
        self.L_rec = - T.sum(self.x * T.log(z) + (1 - self.x) * T.log(1 - z), axis=1)
        self.L_jacob = T.sum(J ** 2) // self.n_batchsize
        cost = T.mean(self.L_rec) + contraction_level * T.mean(self.L_jacob)
        gparams = T.grad(cost, self.params)
        updates = [(param, param - learning_rate * gparam)
                   for param, gparam in zip(self.params, gparams)]
        return cost, updates


def test_contractive_autoencoder():
    rng = numpy.random.RandomState(123)
    train_set_x, _ = _dataset(rng)
    index = T.lscalar()
    x = T.matrix("x")
    ca = cA(numpy_rng=rng, input=x, n_visible=12, n_hidden=6, n_batchsize=10)
    cost, updates = ca.get_cost_updates(contraction_level=0.1, learning_rate=0.05)
    train_ca = theano.function([index], [T.mean(ca.L_rec), ca.L_jacob], updates=updates,
                               givens={x: train_set_x[index * 10: (index + 1) * 10]})
    epochs = []
    for _ in range(8):
        c = numpy.array([train_ca(b) for b in range(6)])
        epochs.append(c.mean(axis=0))
    epochs = numpy.array(epochs)
    assert numpy.isfinite(epochs).all()
    assert epochs[-1, 0] < epochs[0, 0]      # the reconstruction improves
    # The Jacobian penalty is the tutorial's: sum over the batch of ||J||^2,
    # floor-divided by the batch size (its `//`).
    W = ca.W.get_value()
    h = 1 / (1 + numpy.exp(-(train_set_x.get_value()[:10] @ W + ca.b.get_value())))
    jac = ((h * (1 - h))[:, None, :] * W[None]) ** 2
    f = theano.function([x], ca.L_jacob)
    assert f(train_set_x.get_value()[:10]) == numpy.floor(jac.sum() / 10)


class DBN:
    def __init__(self, numpy_rng, theano_rng=None, n_ins=12, hidden_layers_sizes=(10, 8),
                 n_outs=3):
        self.sigmoid_layers, self.rbm_layers, self.params = [], [], []
        self.n_layers = len(hidden_layers_sizes)
        if not theano_rng:
            theano_rng = MRG_RandomStreams(numpy_rng.randint(2 ** 30))
        self.x = T.matrix("x")
        self.y = T.ivector("y")
        for i in range(self.n_layers):
            input_size = n_ins if i == 0 else hidden_layers_sizes[i - 1]
            layer_input = self.x if i == 0 else self.sigmoid_layers[-1].output
            sigmoid_layer = HiddenLayer(rng=numpy_rng, input=layer_input, n_in=input_size,
                                        n_out=hidden_layers_sizes[i],
                                        activation=T.nnet.sigmoid)
            self.sigmoid_layers.append(sigmoid_layer)
            self.params.extend(sigmoid_layer.params)
            self.rbm_layers.append(RBM(numpy_rng=numpy_rng, theano_rng=theano_rng,
                                       input=layer_input, n_visible=input_size,
                                       n_hidden=hidden_layers_sizes[i], W=sigmoid_layer.W,
                                       hbias=sigmoid_layer.b))
        self.logLayer = LogisticRegression(input=self.sigmoid_layers[-1].output,
                                           n_in=hidden_layers_sizes[-1], n_out=n_outs)
        self.params.extend(self.logLayer.params)
        self.finetune_cost = self.logLayer.negative_log_likelihood(self.y)
        self.errors = self.logLayer.errors(self.y)

    def pretraining_functions(self, train_set_x, batch_size, k):
        index = T.lscalar("index")
        learning_rate = T.scalar("lr")
        batch_begin = index * batch_size
        batch_end = batch_begin + batch_size
        pretrain_fns = []
        for rbm in self.rbm_layers:
            cost, updates = rbm.get_cost_updates(learning_rate, persistent=None, k=k)
            fn = theano.function(inputs=[index, theano.In(learning_rate, value=0.1)],
                                 outputs=cost, updates=updates,
                                 givens={self.x: train_set_x[batch_begin:batch_end]})
            pretrain_fns.append(fn)
        return pretrain_fns


def test_deep_belief_network():
    numpy_rng = numpy.random.RandomState(123)
    train_set_x, train_set_y = _dataset(numpy_rng)
    dbn = DBN(numpy_rng=numpy_rng)
    pretraining_fns = dbn.pretraining_functions(train_set_x=train_set_x, batch_size=10, k=1)
    w0 = [layer.W.get_value().copy() for layer in dbn.rbm_layers]
    for i in range(dbn.n_layers):
        for _ in range(3):
            for b in range(6):
                pretraining_fns[i](index=b, lr=0.1)
    for layer, before in zip(dbn.rbm_layers, w0):
        after = layer.W.get_value()
        assert numpy.isfinite(after).all() and not numpy.allclose(after, before)
    # Finetuning: the layers share their weights with the RBMs (the DBN's point).
    assert dbn.sigmoid_layers[0].W is dbn.rbm_layers[0].W
    index = T.lscalar("index")
    gparams = T.grad(dbn.finetune_cost, dbn.params)
    train_fn = theano.function(
        [index], dbn.finetune_cost,
        updates=[(p, p - 0.1 * g) for p, g in zip(dbn.params, gparams)],
        givens={dbn.x: train_set_x[index * 10:(index + 1) * 10],
                dbn.y: train_set_y[index * 10:(index + 1) * 10]})
    costs = [numpy.mean([train_fn(b) for b in range(6)]) for _ in range(30)]
    assert numpy.isfinite(costs).all() and costs[-1] < costs[0] / 2
