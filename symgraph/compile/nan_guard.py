"""NanGuardMode's check: the first NaN, Inf or huge value in a node's outputs."""

import numpy as np

def nan_guard_check(mode):
    """A VM check raising FloatingPointError at the first NaN/Inf/huge output."""

    def check(node, inputs, outputs, vm=None):
        for i, value in enumerate(outputs):
            if not isinstance(value, np.ndarray) or value.dtype.kind not in "fc":
                continue
            problem = None
            if mode.nan_is_error and np.isnan(value).any():
                problem = "NaN"
            elif mode.inf_is_error and np.isinf(value).any():
                problem = "Inf"
            elif mode.big_is_error and value.size and np.nanmax(np.abs(value)) > 1e10:
                problem = "a huge value (> 1e10)"
            if problem:
                from symgraph.compile.errors import node_origin

                raise FloatingPointError(
                    f"NanGuardMode: output {i} of {node} contains {problem}" + node_origin(node))

    return check
