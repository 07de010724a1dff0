"""Theano's older module path ``tensor.nnet.conv``: ``conv2d`` and ``conv3d``.

Theano's ``nnet.conv.conv2d(input, filters, image_shape, filter_shape,
border_mode, subsample)`` takes its first six arguments in the same order as
the abstract ``conv2d``, whose fifth keyword is still ``image_shape``; both
names here are the functions of ``symgraph.tensor.nnet.abstract_conv`` (one
op, whatever the import path).
"""

from symgraph.tensor.nnet.abstract_conv import conv2d, conv3d  # noqa: F401

__all__ = ["conv2d", "conv3d"]
