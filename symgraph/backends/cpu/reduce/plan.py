from symgraph.backends.c_family.c_files import c_file
"""The run-time plan shared by every reduction kernel (C support code).

``sg_red_plan_build`` turns an element-wise shape, the inputs' strides, the
reduced axes and the output's strides into kept and reduced dimension lists:
size-1 dimensions dropped (a size-1 input dimension broadcasts: stride 0),
each list sorted by stride, largest first (the reduced list keeps C order
when asked, for argmax/argmin), and neighbours merged where every array
steps through them as one.  ``reduce_codegen`` generates the loops over it.
"""

#: The most inputs a fused reduction's kernel takes (the planner's table width).
MAX_INPUTS = 16

SUPPORT_KEY = "sg_reduce_plan_v1"
SUPPORT = c_file("cpu/reduce/plan.inc", maxin=MAX_INPUTS)
