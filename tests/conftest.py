"""Test-suite settings.

* A failing rewrite is an error, never a warning.
* One compile cache for the whole session (and across sessions on the same
  machine), separate from the user's own: compiled kernels are shared by every
  test and by both xdist workers, so each kernel is compiled once.
"""

import os
import tempfile

import pytest

from symgraph.config import config

config.on_opt_error = "raise"
if config.source("compiledir") == "default":
    config.compiledir = os.path.join(tempfile.gettempdir(),
                                     f"symgraph-test-compiledir-{os.getuid()}")


@pytest.fixture
def rng():
    """A seeded NumPy generator, so failures reproduce."""
    import numpy as np

    return np.random.default_rng(1234)
