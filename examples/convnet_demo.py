"""symgraph's convnet demo: a LeNet-style classifier on synthetic images.

conv 3x3 + bias + relu, 2x2 max pooling, a dense layer and softmax
cross-entropy with integer labels, trained with SGD updates of shared
weights.  The convolution algorithms are chosen by timing on the first call
(``dnn.conv.algo_fwd=time_once``); the printed graph shows the concrete ops,
the fused conv + bias + relu, and after the first call which algorithm each
convolution runs and why.  Run: ``python examples/convnet_demo.py``.
"""

import time

import numpy as np

import symgraph
import symgraph.tensor as T
from symgraph.printing import debugprint
from symgraph.tensor import nnet
from symgraph.tensor.signal.pool import pool_2d

N_CLASSES, SIZE, FILTERS = 4, 12, 8


def make_images(rng, n_images=512):
    """Images holding a bright bar whose orientation and place give the class."""
    images = rng.normal(scale=1.0, size=(n_images, 1, SIZE, SIZE)).astype("float32")
    labels = rng.integers(0, N_CLASSES, size=n_images)
    for image, label in zip(images, labels):
        if label == 0:
            image[0, 3, 2:10] += 1.2       # a horizontal bar, top
        elif label == 1:
            image[0, 8, 2:10] += 1.2       # a horizontal bar, bottom
        elif label == 2:
            image[0, 2:10, 3] += 1.2       # a vertical bar, left
        else:
            image[0, 2:10, 8] += 1.2       # a vertical bar, right
    return images, labels.astype("int64")


def build_model(rng, learning_rate=0.05):
    """The symbolic convnet and its compiled train and predict functions."""
    x = T.tensor4("x", dtype="float32")
    y = T.lvector("y")
    w_conv = symgraph.shared(rng.normal(scale=0.3, size=(FILTERS, 1, 3, 3)).astype("float32"),
                             name="w_conv")
    b_conv = symgraph.shared(np.zeros(FILTERS, dtype="float32"), name="b_conv")
    n_pooled = FILTERS * ((SIZE - 2) // 2) ** 2
    w_out = symgraph.shared(rng.normal(scale=0.05, size=(n_pooled, N_CLASSES)).astype("float32"),
                            name="w_out")
    b_out = symgraph.shared(np.zeros(N_CLASSES, dtype="float32"), name="b_out")

    features = nnet.relu(nnet.conv2d(x, w_conv) + b_conv.dimshuffle("x", 0, "x", "x"))
    pooled = pool_2d(features, ws=(2, 2), ignore_border=True, mode="max")
    logits = T.dot(pooled.flatten(2), w_out) + b_out
    loss = T.mean(nnet.categorical_crossentropy(nnet.softmax(logits), y))

    params = [w_conv, b_conv, w_out, b_out]
    grads = symgraph.grad(loss, params)
    updates = [(p, p - learning_rate * g) for p, g in zip(params, grads)]
    with symgraph.config.change_flags({"dnn.conv.algo_fwd": "time_once",
                                       "dnn.conv.algo_bwd": "time_once"}):
        train = symgraph.function([x, y], loss, updates=updates, name="train")
        predict = symgraph.function([x], T.argmax(logits, axis=1), name="predict")
    return train, predict


def main():
    rng = np.random.default_rng(0)
    images, labels = make_images(rng)
    n_train = 384
    start = time.perf_counter()
    train, predict = build_model(rng)
    print(f"compiled in {time.perf_counter() - start:.2f}s")

    batch = 64
    for epoch in range(6):
        order = rng.permutation(n_train)
        losses = [train(images[order[i:i + batch]], labels[order[i:i + batch]])
                  for i in range(0, n_train, batch)]
        accuracy = (predict(images[n_train:]) == labels[n_train:]).mean()
        print(f"epoch {epoch}: loss {np.mean(losses):.4f}, held-out accuracy {accuracy:.3f}")
        if epoch == 0:
            print("\nThe optimized training graph, with the algorithms chosen on the "
                  "first call:")
            debugprint(train)
            print()


if __name__ == "__main__":
    main()
