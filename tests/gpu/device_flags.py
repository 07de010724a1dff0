"""Which device the GPU tests run on: the emulated one (the default, and what
CI runs), or a real GPU when SYMGRAPH_TEST_DEVICE=gpu is set, e.g.

    SYMGRAPH_TEST_DEVICE=gpu python -m pytest -m gpu tests/gpu
"""

import os

#: True when the GPU tests run on a real GPU.
REAL_GPU = os.environ.get("SYMGRAPH_TEST_DEVICE", "emulated") == "gpu"

#: The flags the GPU tests compile their functions under.
DEVICE = {"device": "cuda", "gpu.emulate": not REAL_GPU}
