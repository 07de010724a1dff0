"""A scan whose step is scalar element-wise arithmetic, compiled as one C loop.

The runtime's ``Loop`` (``c_src/runtime.c``) calls a step's kernels one after
the other for every step: about 20 ns per kernel call, most of it in the
kernel's generic array handling, which a recurrence on single numbers
(``x = a * x + 1``) pays at every step.  When every value of the step is a
0-d array and every node is an Elemwise with C code, this module writes the
whole loop as one C function instead: each node's element code (the same
``element_code`` as the Elemwise kernels, so the same rounding) on C locals,
the step's inputs loaded from their arrays, its outputs stored to theirs,
and a recurrent output with the single tap -1 carried in a local from step to
step.  The function (``SG_FN(loop)``) has the signature of ``sg_loop_fn`` in
``c_src/runtime.c``::

    int loop(int64_t n, char *const *base, const int64_t *stride,
             const int64_t *start, const int64_t *ring, int64_t *done, sg_error *err)

with one operand per step input then per step output (the stop condition,
computed in the loop, has none): operand k's entry at step t is
``base[k] + pos * stride[k]``, where ``pos`` starts at ``start[k]`` and grows
by one per step, back to 0 at ``ring[k]`` (0: no ring).  Non-sequences have
stride 0.  ``done`` gets the number of steps run.
"""

import numpy as np

from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.c_family.scalar_base import c_exact
from symgraph.backends.c_family.scalar_c import c_error_messages, c_input_dtypes, c_support
from symgraph.backends.cpu.elemwise.loop import _ctype, element_code
from symgraph.backends.native.kernel import COMPUTE, CKernel
from symgraph.graph.basic import Constant
from symgraph.ops.elemwise import Elemwise

__all__ = ["scalar_loop_kernel"]

KERNEL_VERSION = 1


def _scalar(var):
    dtype = getattr(var.type, "dtype", None)
    return (var.type.__class__.__name__ == "TensorType" and var.type.ndim == 0
            and has_c_type(dtype) and dtype not in ("complex64", "complex128", "float16"))


def _literal(const):
    """A 0-d constant as a C expression of its dtype."""
    value = np.asarray(const.data)
    dtype = str(value.dtype)
    if dtype == "bool":
        return "1" if value else "0"
    if dtype.startswith("float"):
        number = float(value)
        if not np.isfinite(number):
            text = "NAN" if np.isnan(number) else ("INFINITY" if number > 0 else "-INFINITY")
        else:
            text = number.hex()   # exact
        return f"(({_ctype(dtype)}){text})"
    return f"(({_ctype(dtype)}){int(value)}LL)" if dtype.startswith("int") else \
        f"(({_ctype(dtype)}){int(value)}ULL)"


def scalar_loop_kernel(info, fgraph, order):
    """The CKernel of the compiled loop of a scan (``info``: its ScanInfo) whose
    compiled step graph is ``fgraph`` scheduled as ``order``; None when the
    step is not scalar element-wise arithmetic (see the module docstring)."""
    inputs, outputs = list(fgraph.inputs), list(fgraph.outputs)
    if info.n_states or not all(_scalar(v) for v in inputs + outputs):
        return None
    for node in order:
        if not isinstance(node.op, Elemwise) or not all(_scalar(v) for v in
                                                        node.inputs + node.outputs):
            return None
        want = c_input_dtypes(node.op.scalar_op, *[str(v.dtype) for v in node.inputs])
        if c_error_messages(node.op.scalar_op, want):
            return None   # errors flagged per element: the step-by-step loop reports them
    names = {var: f"v{i}" for i, var in enumerate(inputs)}
    n_in = len(inputs)
    cond = info.inner_out_cond
    stored = [k for k in range(len(outputs)) if k != cond]
    # A recurrent output read only at tap -1 is carried in a local.
    carried = {}
    for k in range(info.n_rec):
        if tuple(info.rec_taps[k]) == (-1,):
            carried[info.inner_taps(k)[0]] = info.inner_out_rec(k)
    moving = [i for i in range(n_in) if i < info.n_seqs + info.n_taps] + \
        [n_in + j for j in range(len(stored))]

    def ctype(var):
        return _ctype(str(var.dtype))

    def entry(k, ctype_):
        return f"*({ctype_} *)(base[{k}] + q{k} * stride[{k}])"

    lines = ["int SG_FN(loop)(int64_t n, char *const *base, const int64_t *stride, "
             "const int64_t *start, const int64_t *ring, int64_t *done, sg_error *err) {",
             "    (void)err; (void)ring;"]
    lines += [f"    int64_t q{k} = start[{k}];" for k in moving]
    for i, var in enumerate(inputs):
        if i >= info.n_seqs + info.n_taps:   # a non-sequence: read once
            lines.append(f"    const {ctype(var)} v{i} = *(const {ctype(var)} *)base[{i}];")
        elif i in carried:
            lines.append(f"    {ctype(var)} c{i} = {entry(i, 'const ' + ctype(var))};")
    lines.append("    for (int64_t t = 0; t < n; t++) {")
    for i, var in enumerate(inputs[:info.n_seqs + info.n_taps]):
        value = f"c{i}" if i in carried else entry(i, "const " + ctype(var))
        lines.append(f"        const {ctype(var)} v{i} = {value};")
    support, count = {}, 0
    for node in order:
        loads = [_literal(v) if isinstance(v, Constant) else names[v] for v in node.inputs]
        outs = []
        for var in node.outputs:
            names[var] = f"w{count}"
            outs.append(names[var])
            count += 1
            lines.append(f"        {ctype(var)} {names[var]};")
        code = element_code(node.op.scalar_op, [str(v.dtype) for v in node.inputs],
                            [str(v.dtype) for v in node.outputs], loads,
                            [lambda r, o=o, v=v: f"{o} = ({ctype(v)}){r};"
                             for o, v in zip(outs, node.outputs)])
        if code is None:
            return None
        lines.append("        " + code[0].replace("\n", "\n        "))
        support.update(c_support(node.op.scalar_op))
    for j, k in enumerate(stored):
        var = outputs[k]
        value = _literal(var) if isinstance(var, Constant) else names[var]
        lines.append(f"        {entry(n_in + j, ctype(var))} = {value};")
    for i, k in carried.items():
        var = outputs[k]
        lines.append(f"        c{i} = {_literal(var) if isinstance(var, Constant) else names[var]};")
    for k in moving:
        lines.append(f"        if (++q{k} == ring[{k}]) q{k} = 0;")
    if cond is not None:
        var = outputs[cond]
        value = _literal(var) if isinstance(var, Constant) else names[var]
        lines.append(f"        if ({value}) {{ *done = t + 1; return 0; }}")
    lines += ["    }", "    *done = n;", "    return 0;", "}"]
    return CKernel(source=c_exact("\n".join(lines)), kind=COMPUTE,
                   support=tuple(support.items()), version=KERNEL_VERSION)
