"""Test-suite settings: a failing rewrite is an error, never a warning."""

import pytest

from symgraph.config import config

config.on_opt_error = "raise"


@pytest.fixture
def rng():
    """A seeded NumPy generator, so failures reproduce."""
    import numpy as np

    return np.random.default_rng(1234)
