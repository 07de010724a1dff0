"""A denoising autoencoder written as Theano's deep-learning tutorial writes
one (`if not W:` on shared variables, RandomStreams or MRG_RandomStreams
seeded from a NumPy RandomState, `binomial(size=input.shape, ...)`, givens
over minibatches of a shared dataset), with only the imports changed."""

import numpy
import pytest

import symgraph as theano
import symgraph.tensor as T
from symgraph.sandbox.rng_mrg import MRG_RandomStreams
from symgraph.tensor.shared_randomstreams import RandomStreams


class DenoisingAutoencoder:
    def __init__(self, numpy_rng, theano_rng=None, input=None, n_visible=36, n_hidden=12,
                 W=None, bhid=None, bvis=None):
        self.n_visible, self.n_hidden = n_visible, n_hidden
        if not theano_rng:
            theano_rng = RandomStreams(numpy_rng.randint(2 ** 30))
        if not W:
            bound = 4 * numpy.sqrt(6.0 / (n_hidden + n_visible))
            initial_W = numpy.asarray(numpy_rng.uniform(low=-bound, high=bound,
                                                        size=(n_visible, n_hidden)),
                                      dtype=theano.config.floatX)
            W = theano.shared(value=initial_W, name="W", borrow=True)
        if not bvis:
            bvis = theano.shared(numpy.zeros(n_visible, dtype=theano.config.floatX),
                                 borrow=True)
        if not bhid:
            bhid = theano.shared(numpy.zeros(n_hidden, dtype=theano.config.floatX),
                                 name="b", borrow=True)
        self.W, self.b, self.b_prime = W, bhid, bvis
        self.W_prime = self.W.T
        self.theano_rng = theano_rng
        self.x = T.dmatrix(name="input") if input is None else input
        self.params = [self.W, self.b, self.b_prime]

    def get_corrupted_input(self, input, corruption_level):
        return self.theano_rng.binomial(size=input.shape, n=1, p=1 - corruption_level,
                                        dtype=theano.config.floatX) * input

    def get_hidden_values(self, input):
        return T.nnet.sigmoid(T.dot(input, self.W) + self.b)

    def get_reconstructed_input(self, hidden):
        return T.nnet.sigmoid(T.dot(hidden, self.W_prime) + self.b_prime)

    def get_cost_updates(self, corruption_level, learning_rate):
        tilde_x = self.get_corrupted_input(self.x, corruption_level)
        y = self.get_hidden_values(tilde_x)
        z = self.get_reconstructed_input(y)
        L = - T.sum(self.x * T.log(z) + (1 - self.x) * T.log(1 - z), axis=1)
        cost = T.mean(L)
        gparams = T.grad(cost, self.params)
        updates = [(param, param - learning_rate * gparam)
                   for param, gparam in zip(self.params, gparams)]
        return cost, updates


@pytest.mark.parametrize("streams", ["RandomStreams", "MRG_RandomStreams"])
def test_denoising_autoencoder_trains(streams):
    rng = numpy.random.RandomState(123)
    patterns = rng.binomial(1, 0.5, size=(4, 36))
    data = patterns[rng.randint(0, 4, size=200)].astype(theano.config.floatX)
    train_set_x = theano.shared(data, borrow=True)
    batch_size = 20
    index = T.lscalar()
    x = T.matrix("x")
    theano_rng = RandomStreams(rng.randint(2 ** 30)) if streams == "RandomStreams" \
        else MRG_RandomStreams(rng.randint(2 ** 30))
    da = DenoisingAutoencoder(numpy_rng=rng, theano_rng=theano_rng, input=x)
    cost, updates = da.get_cost_updates(corruption_level=0.3, learning_rate=0.1)
    train_da = theano.function([index], cost, updates=updates,
                               givens={x: train_set_x[index * batch_size:
                                                      (index + 1) * batch_size]})
    epochs = []
    for _ in range(15):
        epochs.append(numpy.mean([train_da(i) for i in range(10)]))
    assert numpy.isfinite(epochs).all()
    assert epochs[-1] < 0.7 * epochs[0]
    # the corruption differs from call to call (the stream's state advances)
    corrupt = theano.function([x], da.get_corrupted_input(x, 0.5))
    ones = numpy.ones((10, 36), dtype=theano.config.floatX)
    first, second = corrupt(ones), corrupt(ones)
    assert not numpy.array_equal(first, second)
    assert abs(first.mean() - 0.5) < 0.1
