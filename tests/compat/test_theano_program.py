"""A classic Theano program runs after changing only its imports.

This is the logistic regression of Theano's tutorial, with ``theano``
replaced by ``symgraph`` and nothing else changed.
"""

import numpy
import symgraph as theano
import symgraph.tensor as T


def test_logistic_regression_tutorial():
    rng = numpy.random.RandomState(42)

    N = 400                                   # training sample size
    feats = 784                               # number of input variables

    # generate a dataset: D = (input_values, target_class)
    D = (rng.randn(N, feats), rng.randint(size=N, low=0, high=2))
    training_steps = 1000

    # Declare Theano symbolic variables
    x = T.dmatrix("x")
    y = T.dvector("y")

    # initialize the weight vector w randomly
    w = theano.shared(rng.randn(feats), name="w")

    # initialize the bias term
    b = theano.shared(0., name="b")

    # Construct Theano expression graph
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))   # Probability that target = 1
    prediction = p_1 > 0.5                    # The prediction thresholded
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)  # Cross-entropy loss function
    cost = xent.mean() + 0.01 * (w ** 2).sum()  # The cost to minimize
    gw, gb = T.grad(cost, [w, b])             # Compute the gradient of the cost

    # Compile
    train = theano.function(
        inputs=[x, y],
        outputs=[prediction, xent],
        updates=((w, w - 0.1 * gw), (b, b - 0.1 * gb)))
    predict = theano.function(inputs=[x], outputs=prediction)

    # Train
    first_cost = None
    for i in range(training_steps):
        pred, err = train(D[0], D[1])
        if first_cost is None:
            first_cost = err.mean()
    assert err.mean() < first_cost / 2
    accuracy = (predict(D[0]) == D[1]).mean()
    assert accuracy > 0.9
    theano.printing.debugprint(predict, file="str")


def test_softmax_regression_with_classic_idioms():
    rng = numpy.random.RandomState(0)
    x = T.matrix("x")
    y = T.ivector("y")
    W = theano.shared(numpy.zeros((5, 3), dtype=theano.config.floatX), name="W", borrow=True)
    b = theano.shared(numpy.zeros((3,), dtype=theano.config.floatX), name="b", borrow=True)
    e = T.exp(T.dot(x, W) + b)
    p_y_given_x = e / e.sum(axis=1, keepdims=True)
    y_pred = T.argmax(p_y_given_x, axis=1)
    nll = -T.mean(T.log(p_y_given_x)[T.arange(y.shape[0]), y])
    errors = T.mean(T.neq(y_pred, y))
    g_W = T.grad(cost=nll, wrt=W)
    g_b = T.grad(cost=nll, wrt=b)
    train = theano.function([x, y], nll, updates=[(W, W - 0.5 * g_W), (b, b - 0.5 * g_b)])
    test = theano.function([x, y], errors)
    data = rng.randn(300, 5).astype(theano.config.floatX)
    labels = (numpy.argmax(data[:, :3], axis=1)).astype("int32")
    losses = [train(data, labels) for _ in range(50)]
    assert losses[-1] < losses[0]
    assert test(data, labels) < 0.2
