"""Theano's ``tensor.nnet.bn``: batch normalization for users.

``batch_normalization_train`` normalizes with the statistics of the batch
(and updates running averages of them), ``batch_normalization_test`` with
given statistics; both build the ops of ``symgraph/ops/bn.py``.
``batch_normalization`` is the seed's older element-wise form with a given
mean and standard deviation.

``axes`` says which dimensions are normalized over (reduced):
``'per-activation'`` is ``(0,)`` (each activation over the batch),
``'spatial'`` is every axis but 1 (each channel of an image batch over the
batch and the image: ``(0, 2, 3)`` for 4-d inputs), or a tuple of axes.

The parameters (``gamma``, ``beta``, the running averages, ``mean``, ``var``)
come in one of two shapes, as in the seed: with one dimension per axis that is
*not* normalized (``(C,)`` for a spatial 4-d batch), or with the input's rank
and size 1 along the normalized axes (``(1, C, 1, 1)``).  The statistics that
``batch_normalization_train`` returns take the same form as ``gamma``.

``epsilon`` may be any positive number (the seed refused less than 1e-5, a
bound that cuDNN alone needs).
"""

import numpy as np

from symgraph.ops.bn import (AbstractBatchNormInference, AbstractBatchNormTrain,  # noqa: F401
                             AbstractBatchNormTrainGrad)
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["batch_normalization", "batch_normalization_train", "batch_normalization_test",
           "AbstractBatchNormTrain", "AbstractBatchNormTrainGrad",
           "AbstractBatchNormInference"]


def _prepare_axes(axes, ndim, name):
    """``(axes, kept_axes)``: the sorted normalized axes and the others."""
    if isinstance(axes, str):
        if axes == "per-activation":
            axes = (0,)
        elif axes == "spatial":
            axes = (0,) + tuple(range(2, ndim))
        else:
            raise ValueError(f"{name}: axes must be 'per-activation', 'spatial' or a tuple "
                             f"of ints, got {axes!r}")
    elif isinstance(axes, (tuple, list, np.ndarray)):
        bad = [a for a in axes if isinstance(a, (bool, np.bool_))
               or not isinstance(a, (int, np.integer))]
        if bad:
            raise ValueError(f"{name}: axes must be ints, got {tuple(axes)!r}")
        axes = tuple(int(a) for a in axes)
    else:
        raise ValueError(f"{name}: axes must be 'per-activation', 'spatial' or a tuple of "
                         f"ints, got {axes!r}")
    if not axes:
        raise ValueError(f"{name}: there must be at least one axis to normalize over")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: axes {axes} repeat an axis")
    if min(axes) < 0 or max(axes) >= ndim:
        raise ValueError(f"{name}: axes must be in range(0, {ndim}) for {ndim}-d inputs, "
                         f"got {axes}")
    axes = tuple(sorted(axes))
    return axes, tuple(d for d in range(ndim) if d not in axes)


def _check_epsilon(epsilon, name):
    if isinstance(epsilon, (int, float, np.number)) and not epsilon > 0:
        raise ValueError(f"{name}: epsilon must be positive, got {epsilon}")


def _as_params(name, named, ndim, kept):
    """The parameters as tensors, and whether they come without the normalized
    axes (then they are broadcast to the input's rank)."""
    from symgraph.ops.elemwise import dimshuffle

    params = {k: as_tensor_variable(v) for k, v in named.items()}
    first = next(iter(params.values()))
    short = first.ndim != ndim
    want = len(kept) if short else ndim
    for key, p in params.items():
        if p.ndim != want:
            raise ValueError(
                f"{name}: {key} ({p}) must have one dimension per axis that is not "
                f"normalized ({len(kept)}) or the rank of the inputs ({ndim}), like the "
                f"other parameters ({want}); got {p.ndim}")
    if short:
        pattern = ["x"] * ndim
        for i, d in enumerate(kept):
            pattern[d] = i
        params = {k: dimshuffle(p, pattern) for k, p in params.items()}
    return params, short


def batch_normalization_train(inputs, gamma, beta, axes="per-activation", epsilon=1e-4,
                              running_average_factor=0.1, running_mean=None,
                              running_var=None):
    """Batch normalization with the statistics of this batch.

    Returns ``(out, mean, invstd)``, or ``(out, mean, invstd, new_running_mean,
    new_running_var)`` when ``running_mean`` and ``running_var`` are given.
    ``out = (inputs - mean) * gamma * invstd + beta`` where ``mean`` and ``var``
    are over ``axes`` and ``invstd = 1 / sqrt(var + epsilon)``.  The new running
    averages are ``running_mean * (1 - running_average_factor) + mean *
    running_average_factor`` and the same for ``running_var`` with the unbiased
    variance ``var * m / (m - 1)`` (``m`` elements per channel), ready for the
    ``updates`` of a function.

    ``axes``: ``'per-activation'``, ``'spatial'`` or a tuple (see the module
    docstring, which also says the shapes ``gamma``, ``beta`` and the running
    averages may take).  The gradient flows to ``inputs``, ``gamma`` and
    ``beta`` from every output.
    """
    name = "batch_normalization_train"
    inputs = as_tensor_variable(inputs)
    axes, kept = _prepare_axes(axes, inputs.ndim, name)
    _check_epsilon(epsilon, name)
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{name}: running_mean and running_var must either both be given "
                         f"or both be None")
    named = {"gamma": gamma, "beta": beta}
    if running_mean is not None:
        named.update(running_mean=running_mean, running_var=running_var)
    params, short = _as_params(name, named, inputs.ndim, kept)
    op = AbstractBatchNormTrain(axes)
    if running_mean is None:
        results = list(op(inputs, params["gamma"], params["beta"], epsilon,
                          running_average_factor))
    else:
        results = list(op(inputs, params["gamma"], params["beta"], epsilon,
                          running_average_factor, params["running_mean"],
                          params["running_var"]))
    if short:
        from symgraph.ops.elemwise import dimshuffle

        # Drop the broadcast dimensions again (the output keeps them).
        return tuple([results[0]] + [dimshuffle(r, list(kept)) for r in results[1:]])
    if running_mean is not None:
        from symgraph.ops.shape import patternbroadcast

        # The new values keep the type of the old, so that they can update them.
        for k, old in ((3, running_mean), (4, running_var)):
            old = as_tensor_variable(old)
            if results[k].broadcastable != old.broadcastable:
                results[k] = patternbroadcast(results[k], old.broadcastable)
    return tuple(results)


def batch_normalization_test(inputs, gamma, beta, mean, var, axes="per-activation",
                             epsilon=1e-4):
    """Batch normalization with given statistics (at test time):
    ``(inputs - mean) * gamma / sqrt(var + epsilon) + beta``.

    ``axes`` and the parameter shapes as for :func:`batch_normalization_train`
    (``mean`` and ``var`` usually its running averages).  The gradient flows to
    all five tensors.
    """
    name = "batch_normalization_test"
    inputs = as_tensor_variable(inputs)
    axes, kept = _prepare_axes(axes, inputs.ndim, name)
    _check_epsilon(epsilon, name)
    params, _ = _as_params(name, {"gamma": gamma, "beta": beta, "mean": mean, "var": var},
                           inputs.ndim, kept)
    return AbstractBatchNormInference(axes)(inputs, params["gamma"], params["beta"],
                                            params["mean"], params["var"], epsilon)


def batch_normalization(inputs, gamma, beta, mean, std, mode="low_mem"):
    """The seed's element-wise batch normalization with a given ``mean`` and
    standard deviation ``std``: ``(inputs - mean) * (gamma / std) + beta``,
    all five broadcasting as element-wise operations do.

    ``mode``: ``'low_mem'`` or ``'high_mem'``.  The seed computed the first as
    one element-wise loop and the second as several with temporaries; here
    element-wise fusion makes one loop of either, so both build the same graph.
    """
    if mode not in ("low_mem", "high_mem"):
        raise ValueError(f"batch_normalization: mode must be 'low_mem' or 'high_mem', "
                         f"got {mode!r}")
    inputs, gamma, beta, mean, std = (as_tensor_variable(v)
                                      for v in (inputs, gamma, beta, mean, std))
    return (inputs - mean) * (gamma / std) + beta
