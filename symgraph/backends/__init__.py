"""The seam between ops and the code that runs them.

A backend (the native CPU backend today, CUDA next) registers, per op class,
the rule that lowers a node of that class to one of its kernels
(:func:`~symgraph.backends.lowering.register_lowering`).  Ops hold semantics
only and import no backend; the linker asks the table.
"""

from symgraph.backends.lowering import (  # noqa: F401  (the public names)
    lower, lowering_rule, register_lowering, registered_lowerings)

__all__ = ["lower", "lowering_rule", "register_lowering", "registered_lowerings"]
