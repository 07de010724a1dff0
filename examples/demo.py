"""symgraph's demo: a small MLP classifier trained on synthetic data.

It builds the model's graph, takes gradients, compiles a training function
with SGD updates of shared weights, prints the optimized graph and trains,
printing the loss as it goes down.  Run: ``python examples/demo.py``.
"""

import time

import numpy as np

import symgraph
import symgraph.tensor as T
from symgraph.printing import debugprint


def make_data(rng, n_samples=2000, n_features=20, n_classes=4):
    """Gaussian blobs, one per class, with some overlap."""
    centers = rng.normal(scale=0.35, size=(n_classes, n_features))
    labels = rng.integers(0, n_classes, size=n_samples)
    points = centers[labels] + rng.normal(size=(n_samples, n_features))
    return points.astype(symgraph.config.floatX), labels.astype("int64")


def init_layer(rng, n_in, n_out, name):
    scale = np.sqrt(6.0 / (n_in + n_out))
    w = rng.uniform(-scale, scale, size=(n_in, n_out)).astype(symgraph.config.floatX)
    b = np.zeros(n_out, dtype=symgraph.config.floatX)
    return symgraph.shared(w, name=f"W_{name}"), symgraph.shared(b, name=f"b_{name}")


def build_model(rng, n_features, n_hidden, n_classes, learning_rate=0.1):
    """The symbolic MLP and its compiled train and predict functions."""
    x = T.matrix("x")
    y = T.lvector("y")
    w1, b1 = init_layer(rng, n_features, n_hidden, "hidden")
    w2, b2 = init_layer(rng, n_hidden, n_classes, "out")

    hidden = T.tanh(T.dot(x, w1) + b1)
    logits = T.dot(hidden, w2) + b2
    # A log-softmax written from primitives; the rewrites keep it stable.
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - T.log(T.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[T.arange(y.shape[0]), y].mean()
    l2 = 1e-4 * ((w1 ** 2).sum() + (w2 ** 2).sum())
    cost = loss + l2

    params = [w1, b1, w2, b2]
    grads = symgraph.grad(cost, params)
    updates = [(p, p - learning_rate * g) for p, g in zip(params, grads)]
    train = symgraph.function([x, y], loss, updates=updates, name="train")
    predict = symgraph.function([x], T.argmax(logits, axis=1), name="predict")
    return train, predict


def main():
    rng = np.random.default_rng(0)
    points, labels = make_data(rng)
    n_train = 1600
    start = time.perf_counter()
    train, predict = build_model(rng, points.shape[1], 64, 4)
    print(f"compiled in {time.perf_counter() - start:.2f}s\n")
    print("The optimized training graph:")
    debugprint(train)
    print()

    batch = 100
    for epoch in range(10):
        order = rng.permutation(n_train)
        losses = [train(points[order[i:i + batch]], labels[order[i:i + batch]])
                  for i in range(0, n_train, batch)]
        accuracy = (predict(points[n_train:]) == labels[n_train:]).mean()
        print(f"epoch {epoch}: loss {np.mean(losses):.4f}, held-out accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
