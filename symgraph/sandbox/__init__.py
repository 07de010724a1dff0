"""Theano's ``sandbox`` import paths that Theano programs still use.

``symgraph.sandbox.rng_mrg.MRG_RandomStreams`` is the MRG31k3p generator that
Theano's deep-learning tutorials import from ``theano.sandbox.rng_mrg``.
"""
