"""Every example of Theano's loop tutorial (doc/tutorial/loop.txt) and of the
scan library page (doc/library/scan.txt), written as Theano writes them with
only the imports changed, against their documented results or NumPy."""

import numpy as np
import pytest

import symgraph as theano
import symgraph.tensor as T

floatX = theano.config.floatX


def test_tanh_of_each_row():
    X = T.matrix("X")
    W = T.matrix("W")
    b_sym = T.vector("b_sym")
    results, updates = theano.scan(lambda v: T.tanh(T.dot(v, W) + b_sym), sequences=X)
    compute_elementwise = theano.function(inputs=[X, W, b_sym], outputs=results)
    x = np.eye(2, dtype=floatX)
    w = np.ones((2, 2), dtype=floatX)
    b = np.ones((2), dtype=floatX)
    b[1] = 2
    np.testing.assert_allclose(compute_elementwise(x, w, b), np.tanh(x.dot(w) + b))
    np.testing.assert_allclose(compute_elementwise(x, w, b),
                               [[0.96402758, 0.99505475], [0.96402758, 0.99505475]])


def test_sequence_with_reversed_input():
    X = T.vector("X")
    W = T.matrix("W")
    U = T.matrix("U")
    Y = T.matrix("Y")
    V = T.matrix("V")
    P = T.matrix("P")
    results, updates = theano.scan(
        lambda y, p, x_tm1: T.tanh(T.dot(x_tm1, W) + T.dot(y, U) + T.dot(p, V)),
        sequences=[Y, P[::-1]], outputs_info=[X])
    compute_seq = theano.function(inputs=[X, W, Y, U, P, V], outputs=results)
    x = np.zeros((2), dtype=floatX)
    x[1] = 1
    w = np.ones((2, 2), dtype=floatX)
    y = np.ones((5, 2), dtype=floatX)
    y[0, :] = -3
    u = np.ones((2, 2), dtype=floatX)
    p = np.ones((5, 2), dtype=floatX)
    p[0, :] = 3
    v = np.ones((2, 2), dtype=floatX)
    x_res = np.zeros((5, 2), dtype=floatX)
    x_res[0] = np.tanh(x.dot(w) + y[0].dot(u) + p[4].dot(v))
    for i in range(1, 5):
        x_res[i] = np.tanh(x_res[i - 1].dot(w) + y[i].dot(u) + p[4 - i].dot(v))
    np.testing.assert_allclose(compute_seq(x, w, y, u, p, v), x_res)
    np.testing.assert_allclose(compute_seq(x, w, y, u, p, v)[:, 0],
                               [-0.99505475, 0.96471973, 0.99998585, 0.99998771, 1.0],
                               rtol=1e-6)


def test_norms_of_rows_and_columns():
    X = T.matrix("X")
    rows, _ = theano.scan(lambda x_i: T.sqrt((x_i ** 2).sum()), sequences=[X])
    cols, _ = theano.scan(lambda x_i: T.sqrt((x_i ** 2).sum()), sequences=[X.T])
    compute = theano.function(inputs=[X], outputs=[rows, cols])
    x = np.diag(np.arange(1, 6, dtype=floatX), 1)
    r, c = compute(x)
    np.testing.assert_allclose(r, [1, 2, 3, 4, 5, 0])
    np.testing.assert_allclose(c, [0, 1, 2, 3, 4, 5])


def test_trace():
    X = T.matrix("X")
    results, updates = theano.scan(lambda i, j, t_f: T.cast(X[i, j] + t_f, "float32"),
                                   sequences=[T.arange(X.shape[0]), T.arange(X.shape[1])],
                                   outputs_info=np.asarray(0., dtype="float32"))
    compute_trace = theano.function(inputs=[X], outputs=results[-1])
    x = np.eye(5, dtype=floatX)
    x[0] = np.arange(5, dtype=floatX)
    assert compute_trace(x) == pytest.approx(4.0)
    assert compute_trace(x) == pytest.approx(np.diagonal(x).sum())


def test_two_taps_recurrence():
    X = T.matrix("X")
    W = T.matrix("W")
    b_sym = T.vector("b_sym")
    U = T.matrix("U")
    V = T.matrix("V")
    n_sym = T.iscalar("n_sym")
    results, updates = theano.scan(
        lambda x_tm2, x_tm1: T.dot(x_tm2, U) + T.dot(x_tm1, V) + T.tanh(T.dot(x_tm1, W) + b_sym),
        n_steps=n_sym, outputs_info=[dict(initial=X, taps=[-2, -1])])
    compute_seq2 = theano.function(inputs=[X, U, V, W, b_sym, n_sym], outputs=results)
    x = np.zeros((2, 2), dtype=floatX)
    x[1, 1] = 1
    w = 0.5 * np.ones((2, 2), dtype=floatX)
    u = 0.5 * (np.ones((2, 2), dtype=floatX) - np.eye(2, dtype=floatX))
    v = 0.5 * np.ones((2, 2), dtype=floatX)
    b = np.ones((2), dtype=floatX)
    x_res = np.zeros((10, 2))
    x_res[0] = x[0].dot(u) + x[1].dot(v) + np.tanh(x[1].dot(w) + b)
    x_res[1] = x[1].dot(u) + x_res[0].dot(v) + np.tanh(x_res[0].dot(w) + b)
    for i in range(2, 10):
        x_res[i] = x_res[i - 2].dot(u) + x_res[i - 1].dot(v) + np.tanh(x_res[i - 1].dot(w) + b)
    got = compute_seq2(x, u, v, w, b, 10)
    np.testing.assert_allclose(got, x_res)
    np.testing.assert_allclose(got[-1], [54.28407732, 54.25282732])


def test_jacobian_by_scan():
    v = T.vector()
    A = T.matrix()
    y = T.tanh(T.dot(v, A))
    results, updates = theano.scan(lambda i: T.grad(y[i], v), sequences=[T.arange(y.shape[0])])
    compute_jac_t = theano.function([A, v], results, allow_input_downcast=True)
    x = np.eye(5, dtype=floatX)[0]
    w = np.eye(5, 3, dtype=floatX)
    w[2] = np.ones((3), dtype=floatX)
    np.testing.assert_allclose(compute_jac_t(w, x), ((1 - np.tanh(x.dot(w)) ** 2) * w).T)


def test_accumulate_number_of_loops():
    k = theano.shared(0)
    n_sym = T.iscalar("n_sym")
    results, updates = theano.scan(lambda: {k: (k + 1)}, n_steps=n_sym)
    accumulator = theano.function([n_sym], [], updates=updates, allow_input_downcast=True)
    assert k.get_value() == 0
    accumulator(5)
    assert k.get_value() == 5
    accumulator(3)
    assert k.get_value() == 8


def test_binomial_noise_drawn_at_each_step():
    X = T.matrix("X")
    W = T.matrix("W")
    b_sym = T.vector("b_sym")
    trng = T.shared_randomstreams.RandomStreams(1234)
    d = trng.binomial(size=W[1].shape)
    results, updates = theano.scan(lambda v: T.tanh(T.dot(v, W) + b_sym) * d, sequences=X)
    compute_with_bnoise = theano.function(inputs=[X, W, b_sym], outputs=results,
                                          updates=updates, allow_input_downcast=True)
    x = np.eye(10, 2, dtype=floatX)
    w = np.ones((2, 2), dtype=floatX)
    b = np.ones((2), dtype=floatX)
    first = compute_with_bnoise(x, w, b)
    clean = np.tanh(x.dot(w) + b)
    mask = first / clean
    np.testing.assert_allclose(mask * (1 - mask), 0, atol=1e-12)   # each entry 0 or 1
    assert len({tuple(row) for row in mask}) > 1     # a new draw at each step
    second = compute_with_bnoise(x, w, b)
    assert not np.array_equal(first, second)         # the updates advanced the stream


def test_power():
    k = T.iscalar("k")
    A = T.vector("A")

    def inner_fct(prior_result, B):
        return prior_result * B

    result, updates = theano.scan(fn=inner_fct, outputs_info=T.ones_like(A),
                                  non_sequences=A, n_steps=k)
    final_result = result[-1]
    power = theano.function(inputs=[A, k], outputs=final_result, updates=updates)
    np.testing.assert_allclose(power(range(10), 2), [0., 1., 4., 9., 16., 25., 36., 49., 64., 81.])
    np.testing.assert_allclose(power(range(10), 4), np.arange(10.) ** 4)


def test_polynomial():
    coefficients = theano.tensor.vector("coefficients")
    x = T.scalar("x")
    max_coefficients_supported = 10000
    full_range = theano.tensor.arange(max_coefficients_supported)
    components, updates = theano.scan(fn=lambda coeff, power, free_var:
                                      coeff * (free_var ** power),
                                      outputs_info=None,
                                      sequences=[coefficients, full_range],
                                      non_sequences=x)
    polynomial = components.sum()
    calculate_polynomial = theano.function(inputs=[coefficients, x], outputs=polynomial)
    test_coeff = np.asarray([1, 0, 2], dtype=np.float32)
    assert calculate_polynomial(test_coeff, 3) == pytest.approx(19.0)


def test_polynomial_exercise_reduced_by_scan():
    coefficients = T.vector("coefficients")
    x = T.scalar("x")
    full_range = T.arange(10000)
    outputs, _ = theano.scan(lambda coeff, power, prior, free_var:
                             prior + coeff * (free_var ** power),
                             sequences=[coefficients, full_range],
                             outputs_info=T.as_tensor_variable(np.asarray(0, floatX)),
                             non_sequences=x)
    poly = theano.function([coefficients, x], outputs[-1])
    assert poly(np.asarray([1, 0, 2], dtype=floatX), 3) == pytest.approx(19.0)


def test_triangular_numbers():
    up_to = T.iscalar("up_to")

    def accumulate_by_adding(arange_val, sum_to_date):
        return sum_to_date + arange_val

    seq = T.arange(up_to)
    outputs_info = T.as_tensor_variable(np.asarray(0, seq.dtype))
    scan_result, scan_updates = theano.scan(fn=accumulate_by_adding,
                                            outputs_info=outputs_info, sequences=seq)
    triangular_sequence = theano.function(inputs=[up_to], outputs=scan_result)
    np.testing.assert_array_equal(triangular_sequence(15),
                                  [n * (n + 1) // 2 for n in range(15)])


def test_set_value_at_position():
    location = T.imatrix("location")
    values = T.vector("values")
    output_model = T.matrix("output_model")

    def set_value_at_position(a_location, a_value, output_model):
        zeros = T.zeros_like(output_model)
        zeros_subtensor = zeros[a_location[0], a_location[1]]
        return T.set_subtensor(zeros_subtensor, a_value)

    result, updates = theano.scan(fn=set_value_at_position, outputs_info=None,
                                  sequences=[location, values], non_sequences=output_model)
    assign = theano.function(inputs=[location, values, output_model], outputs=result,
                             allow_input_downcast=True)
    test_locations = np.asarray([[1, 1], [2, 3]], dtype=np.int32)
    test_values = np.asarray([42, 50], dtype=np.float32)
    got = assign(test_locations, test_values, np.zeros((5, 5), dtype=np.float32))
    expected = np.zeros((2, 5, 5))
    expected[0, 1, 1] = 42
    expected[1, 2, 3] = 50
    np.testing.assert_array_equal(got, expected)


def test_rnn_with_several_taps():
    rng = np.random.default_rng(3)
    W, W_in_1, W_in_2, W_feedback, W_out = [
        theano.shared(rng.normal(size=s) * 0.3)
        for s in [(3, 3), (2, 3), (2, 3), (4, 3), (3, 4)]]

    def oneStep(u_tm4, u_t, x_tm3, x_tm1, y_tm1, W, W_in_1, W_in_2, W_feedback, W_out):
        x_t = T.tanh(theano.tensor.dot(x_tm1, W) + theano.tensor.dot(u_t, W_in_1) +
                     theano.tensor.dot(u_tm4, W_in_2) + theano.tensor.dot(y_tm1, W_feedback))
        y_t = theano.tensor.dot(x_tm3, W_out)
        return [x_t, y_t]

    u = T.matrix()
    x0 = T.matrix()
    y0 = T.vector()
    ([x_vals, y_vals], updates) = theano.scan(
        fn=oneStep, sequences=dict(input=u, taps=[-4, -0]),
        outputs_info=[dict(initial=x0, taps=[-3, -1]), y0],
        non_sequences=[W, W_in_1, W_in_2, W_feedback, W_out])
    f = theano.function([u, x0, y0], [x_vals, y_vals], updates=updates)
    uv, x0v, y0v = rng.normal(size=(9, 2)), rng.normal(size=(3, 3)), rng.normal(size=4)
    got_x, got_y = f(uv, x0v, y0v)
    w = [p.get_value() for p in (W, W_in_1, W_in_2, W_feedback, W_out)]
    xs, ys = list(x0v), [y0v]
    for t in range(4, 9):   # uvals[0] is u[-4]: the loop starts at uvals[4]
        x_t = np.tanh(xs[-1] @ w[0] + uv[t] @ w[1] + uv[t - 4] @ w[2] + ys[-1] @ w[3])
        ys.append(xs[-3] @ w[4])
        xs.append(x_t)
    np.testing.assert_allclose(got_x, xs[3:])
    np.testing.assert_allclose(got_y, ys[1:])


def test_gibbs_sampling_with_shared_variables():
    rng = np.random.default_rng(0)
    W = theano.shared(rng.normal(size=(6, 4)))
    bvis = theano.shared(np.zeros(6))
    bhid = theano.shared(np.zeros(4))
    trng = T.shared_randomstreams.RandomStreams(1234)

    def OneStep(vsample):
        hmean = T.nnet.sigmoid(theano.tensor.dot(vsample, W) + bhid)
        hsample = trng.binomial(size=hmean.shape, n=1, p=hmean)
        vmean = T.nnet.sigmoid(theano.tensor.dot(hsample, W.T) + bvis)
        return trng.binomial(size=vsample.shape, n=1, p=vmean, dtype=theano.config.floatX)

    sample = theano.tensor.vector()
    values, updates = theano.scan(OneStep, outputs_info=sample, n_steps=10)
    gibbs10 = theano.function([sample], values[-1], updates=updates)
    assert len(updates) == 2       # both random streams advance
    start = np.ones(6)
    draws = [gibbs10(start) for _ in range(4)]
    for d in draws:
        assert d.shape == (6,) and set(np.unique(d)) <= {0.0, 1.0}
    assert len({tuple(d) for d in draws}) > 1
    frozen = theano.function([sample], values[-1])   # without the updates: same draw
    np.testing.assert_array_equal(frozen(start), frozen(start))


def test_updates_dictionary_used_afterwards():
    a = theano.shared(1)
    values, updates = theano.scan(lambda: {a: a + 1}, n_steps=10)
    b = a + 1
    c = updates[a] + 1
    f = theano.function([], [b, c], updates=updates)
    assert [int(v) for v in f()] == [2, 12] and a.get_value() == 11
    assert [int(v) for v in f()] == [12, 22] and a.get_value() == 21
    g = theano.function([], [b, c])
    assert [int(v) for v in g()] == [22, 32] and a.get_value() == 21


def test_until_powers_of_two():
    def power_of_2(previous_power, max_value):
        return previous_power * 2, theano.scan_module.until(previous_power * 2 > max_value)

    max_value = T.scalar()
    values, _ = theano.scan(power_of_2, outputs_info=T.constant(1.), non_sequences=max_value,
                            n_steps=1024)
    f = theano.function([max_value], values)
    np.testing.assert_array_equal(f(45), [2., 4., 8., 16., 32., 64.])
    np.testing.assert_array_equal(f(0.5), [2.])
    capped, _ = theano.scan(power_of_2, outputs_info=T.constant(1.), non_sequences=max_value,
                            n_steps=10)
    np.testing.assert_array_equal(theano.function([max_value], capped)(1e300),
                                  2.0 ** np.arange(1, 11))


def test_deep_learning_tutorial_lstm_layer():
    """The LSTM layer of Theano's deep-learning tutorial (lstm.py), as written
    there: masks, slices of the pre-activation, tensor.alloc initial states."""
    tensor = T
    dim = 4
    rng = np.random.RandomState(0)
    tparams = {k: theano.shared(rng.randn(*s) * 0.3, name=k)
               for k, s in [("lstm_W", (dim, 4 * dim)), ("lstm_U", (dim, 4 * dim)),
                            ("lstm_b", (4 * dim,))]}

    def numpy_floatX(data):
        return np.asarray(data, dtype=theano.config.floatX)

    def lstm_layer(state_below, mask):
        nsteps = state_below.shape[0]
        n_samples = state_below.shape[1]

        def _slice(_x, n, dim):
            return _x[:, n * dim:(n + 1) * dim]

        def _step(m_, x_, h_, c_):
            preact = tensor.dot(h_, tparams['lstm_U'])
            preact += x_
            i = tensor.nnet.sigmoid(_slice(preact, 0, dim))
            f = tensor.nnet.sigmoid(_slice(preact, 1, dim))
            o = tensor.nnet.sigmoid(_slice(preact, 2, dim))
            c = tensor.tanh(_slice(preact, 3, dim))
            c = f * c_ + i * c
            c = m_[:, None] * c + (1. - m_)[:, None] * c_
            h = o * tensor.tanh(c)
            h = m_[:, None] * h + (1. - m_)[:, None] * h_
            return h, c

        state_below = (tensor.dot(state_below, tparams['lstm_W']) + tparams['lstm_b'])
        rval, updates = theano.scan(_step, sequences=[mask, state_below],
                                    outputs_info=[tensor.alloc(numpy_floatX(0.), n_samples, dim),
                                                  tensor.alloc(numpy_floatX(0.), n_samples, dim)],
                                    name='lstm_layers', n_steps=nsteps)
        return rval[0]

    x = tensor.tensor3('x')
    mask = tensor.matrix('mask')
    cost = (lstm_layer(x, mask)[-1] ** 2).sum()
    params = list(tparams.values())
    f = theano.function([x, mask], [cost] + tensor.grad(cost, wrt=params))
    xv, mv = rng.randn(5, 3, dim), np.ones((5, 3))
    mv[3:, 1] = 0

    def np_cost(W, U, b):
        sig = lambda v: 1 / (1 + np.exp(-v))   # noqa: E731
        h, c = np.zeros((3, dim)), np.zeros((3, dim))
        for t in range(5):
            pre = h @ U + xv[t] @ W + b
            i, fg, o = sig(pre[:, :dim]), sig(pre[:, dim:2 * dim]), sig(pre[:, 2 * dim:3 * dim])
            c_new = fg * c + i * np.tanh(pre[:, 3 * dim:])
            c_new = mv[t][:, None] * c_new + (1 - mv[t])[:, None] * c
            h_new = o * np.tanh(c_new)
            h = mv[t][:, None] * h_new + (1 - mv[t])[:, None] * h
            c = c_new
        return (h ** 2).sum()

    values = [p.get_value() for p in params]
    got = f(xv, mv)
    assert got[0] == pytest.approx(np_cost(*values))
    for k, (value, g) in enumerate(zip(values, got[1:])):
        for idx in list(np.ndindex(value.shape))[::7]:
            d = np.zeros_like(value)
            d[idx] = 1e-6
            plus = [v + d if j == k else v for j, v in enumerate(values)]
            minus = [v - d if j == k else v for j, v in enumerate(values)]
            assert g[idx] == pytest.approx((np_cost(*plus) - np_cost(*minus)) / 2e-6, abs=1e-6)
