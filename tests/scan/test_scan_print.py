"""debugprint shows a scan's inner graph and which outer input feeds each
inner input."""

import re

import numpy as np

import symgraph
import symgraph.tensor as T


def _id_of(text, pattern):
    match = re.search(pattern + r" \[id (\w+)\]", text)
    assert match, f"{pattern!r} not in:\n{text}"
    return match.group(1)


def test_debugprint_of_a_graph_shows_the_step():
    A = T.vector("A")
    k = T.iscalar("k")
    result, _ = symgraph.scan(lambda prior, A: prior * A, outputs_info=T.ones_like(A),
                              non_sequences=A, n_steps=k, name="power")
    text = symgraph.printing.debugprint(result, file="str")
    assert "Scan{power}" in text and "Inner graphs:" in text
    inner = text.split("Inner graphs:")[1]
    assert " >Elemwise{mul}" in inner
    # The inner A is fed by the outer A, the tap by the initial buffer.
    outer_a = _id_of(text.split("Inner graphs:")[0], r"\|A")
    assert re.search(r"\|A \[id \w+\] -> \[id " + outer_a + r"\]", inner)
    assert re.search(r"\|outputs_info\[0\]\[t-1\] \[id \w+\] -> \[id \w+\]", inner)


def test_debugprint_of_a_function_shows_the_compiled_step():
    x = T.matrix("x")
    W = T.matrix("W")
    out, _ = symgraph.scan(lambda x_t, h: T.tanh(T.dot(h, T.exp(W)) + x_t), sequences=x,
                           outputs_info=T.zeros_like(x[0]), name="rnn")
    f = symgraph.function([x, W], out)
    f(np.ones((2, 2)), np.ones((2, 2)))
    text = symgraph.printing.debugprint(f, file="str")
    outer, inner = text.split("Inner graphs:")
    assert "Elemwise{exp}" in outer          # moved out of the loop
    assert "exp" not in inner and "tanh" in inner
    assert re.search(r"x\[t\] \[id \w+\] -> \[id \w+\]", inner)


def test_debugprint_of_nested_scans_prints_each_inner_graph():
    x = T.tensor3("x")

    def step(x_t):
        inner, _ = symgraph.scan(lambda a, acc: acc + a, sequences=x_t,
                                 outputs_info=T.zeros_like(x_t[0]), name="inner_sum")
        return inner[-1]

    out, _ = symgraph.scan(step, sequences=x, name="outer_loop")
    text = symgraph.printing.debugprint(out, file="str")
    inner_part = text.split("Inner graphs:")[1]
    assert "Scan{outer_loop}" in inner_part and "Scan{inner_sum}" in inner_part
    np.testing.assert_allclose(symgraph.function([x], out)(np.ones((2, 3, 4))),
                               3 * np.ones((2, 4)))
