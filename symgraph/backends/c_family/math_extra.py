"""The C of the extra math scalar ops (``symgraph/ops/math_extra.py``),
registered in the C family's scalar table (``scalar_c.py``)."""

from symgraph.backends.c_family.scalar_c import register_attrs
from symgraph.ops.math_extra import Gamma


register_attrs(Gamma, c_name="tgamma")
