"""Native kernels for every form of AdvancedSubtensor / AdvancedIncSubtensor,
and for Nonzero.

Advanced indexing takes any mix of int arrays (of any rank, broadcast
together), ints, boolean masks and slices (constant or symbolic).  A mask of k
dimensions stands for its k ``nonzero()`` arrays, as in NumPy: the kernel
counts its true elements and, before copying, lists their byte offsets into
x.  The indexed shape is NumPy's: the broadcast index dimensions replace the
indexed ones when the advanced entries (ints included) are adjacent, and go
first otherwise.  The checks come in NumPy's order: the masks' shapes, then
ints and slices left to right, then the broadcast of the arrays, then every
array element (only when the broadcast is not empty).  Elements are visited
in C order of the broadcast index, so with repeated indices the last one wins
for set and increments add in that order: NumPy's order, unless NumPy's
iterator picks the memory order of operands that are all Fortran-ordered or
reversed (then a repeated index may keep another value).

Error messages repeat ``perform``'s word for word, as in ``index_codegen``.
"""

import dataclasses
from collections import namedtuple

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.cpu.index.basic import (_copy_input, _inc_support, _join_tuple,
                                                   _nonzero_support, _put_slice_or_int,
                                                   _reader_support, _slice_c, _support,
                                                   _update_kind, _value_check)
from symgraph.backends.cpu.shape.codegen import (all_have_c_types, itemsize, kernel,
                                                   read_int)
from symgraph.ops.subtensor import SYMBOLIC, SliceSpec

#: One ``idx_list`` entry of an advanced node.  ``kind``: 'slice' (``value``: the
#: C expressions of start, stop and step, None where absent), 'int' (a C
#: expression), 'array' or 'mask' (the input number); ``dim``: the first
#: dimension of x that it indexes; ``ndim``: how many (a mask's rank, else 1).
_Entry = namedtuple("_Entry", "kind dim value ndim")


class _AdvancedIndex:
    """The index of an advanced node, classified when its kernel is generated, and
    the C that checks it and walks it (see the module docstring).

    The C it writes names: ``q[]`` the scalar index inputs; ``fixed`` the byte
    offset of the ints and slice starts into the indexed array; ``bshape`` and
    ``bsize`` the broadcast index shape and size; ``mc<i>`` the true count of the
    mask of input i; ``ishape`` the indexed shape (``ndim`` dimensions) and
    ``ixs`` its strides into the indexed array (0 along the broadcast ones).
    """

    def __init__(self, op, node, first):
        self.op, self.node, self.x = op, node, node.inputs[0]
        self.entries, self.reads = self._classify(first)
        self.arrays = [e for e in self.entries if e.kind == "array"]
        self.masks = [e for e in self.entries if e.kind == "mask"]
        self.nb = max([node.inputs[e.value].ndim for e in self.arrays] +
                      [1 if self.masks else 0])
        self.layout = self._layout()
        used = sum(e.ndim for e in self.entries)
        self.trailing = list(range(used, self.x.ndim))
        self.ndim = len(self.layout) + len(self.trailing)
        # The dimensions up to the last broadcast one are walked one by one,
        # the rest by a copy plan (they are strided dimensions of x).
        self.n_outer = max(p for p, item in enumerate(self.layout) if item[0] == "b") + 1

    def _classify(self, first):
        """(entries, reads): the ``_Entry`` list and the C expressions of the
        scalar inputs (``q[k]`` is reads[k])."""
        entries, reads, i, dim = [], [], first, 0

        def scalar(part):
            nonlocal i
            if part is None:
                return None
            if part != SYMBOLIC:
                return f"{int(part)}LL"
            reads.append(read_int(self.node.inputs[i].dtype, f"in[{i}].data"))
            i += 1
            return f"q[{len(reads) - 1}]"

        for entry in self.op.idx_list:
            if isinstance(entry, SliceSpec):
                entries.append(_Entry("slice", dim, tuple(scalar(p) for p in entry), 1))
            elif entry != SYMBOLIC or self.node.inputs[i].ndim == 0:
                entries.append(_Entry("int", dim, scalar(entry), 1))
            else:
                var = self.node.inputs[i]
                mask = var.dtype == "bool"
                entries.append(_Entry("mask" if mask else "array", dim, i,
                                      var.ndim if mask else 1))
                i += 1
            dim += entries[-1].ndim
        return entries, reads

    def _layout(self):
        """The indexed dimensions before the trailing ones, NumPy's order: ('b', j)
        for broadcast dimension j, ('slice', dim) for the slice over ``dim``."""
        adv = [k for k, e in enumerate(self.entries) if e.kind != "slice"]
        broadcast = [("b", j) for j in range(self.nb)]
        slices = [(k, ("slice", e.dim)) for k, e in enumerate(self.entries) if e.kind == "slice"]
        if adv != list(range(adv[0], adv[-1] + 1)):  # not adjacent: broadcast first
            return broadcast + [item for _, item in slices]
        return [item for k, item in slices if k < adv[0]] + broadcast + \
            [item for k, item in slices if k > adv[-1]]

    # -- error messages --------------------------------------------------------

    def _put_index(self):
        """C statements printing the index as perform shows it."""
        puts = []
        for e in self.entries:
            if e.kind in ("int", "slice"):
                puts.append(_put_slice_or_int(e.kind, e.value))
            else:
                dtype = str(self.node.inputs[e.value].dtype)
                shown = "NULL" if dtype in ("int64", "bool") else c_string(dtype, quote=True)  # NumPy's repr
                puts.append(f"sg_ix_put_array(&m, &in[{e.value}], sg_ix_rd_{dtype}, "
                            f"{int(e.kind == 'mask')}, {shown});")
        return _join_tuple(puts)

    def head(self):
        """C defining ``SG_FN(index_error)``, which starts perform's IndexError
        message (up to the '(' before NumPy's reason): one copy per kernel."""
        return f"""static void SG_FN(index_error)(sg_error *err, const sg_array *in,
                                 const int64_t *q, sg_sh_msg *out) {{
    sg_sh_msg m = sg_sh_msg_start(err, SG_ERR_INDEX);
    (void)q;
    sg_sh_put(&m, "%s: index (", {c_string(self.op, quote=True)}); {self._put_index()}
    sg_sh_put(&m, ") is out of bounds for %s of shape ", {c_string(self.x, quote=True)});
    sg_sh_put_shape(&m, in[0].shape, {self.x.ndim});
    sg_sh_put(&m, " (");
    *out = m;
}}
"""

    def _fail(self):
        """C starting perform's IndexError message in ``m``."""
        return "sg_sh_msg m; SG_FN(index_error)(err, in, q, &m);"

    def kernel(self, run, **kw):
        """The CKernel of ``run`` (and ``shape``), with ``head()`` before them."""
        k = kernel(run, **kw)
        return dataclasses.replace(k, source=self.head() + k.source)

    # -- checks and the indexed shape ------------------------------------------

    def checks(self, base):
        """C: every check but the array elements' (in NumPy's order), then the
        indexed shape; strides and offsets are ``base``'s (an sg_array pointer
        of x's shape)."""
        size = max(self.ndim, 1)
        lines = [f"    int64_t q[{max(len(self.reads), 1)}];"]
        lines += [f"    q[{k}] = {r};" for k, r in enumerate(self.reads)]
        lines.append(f"    int64_t fixed = 0, ishape[{size}], ixs[{size}];")
        lines += [self._mask_shape(e) for e in self.masks]
        lines += [self._int_or_slice(e, base) for e in self.entries if e.kind in ("int", "slice")]
        lines.append(self._broadcast())
        for pos, item in enumerate(self.layout):
            if item[0] == "b":
                lines.append(f"    ishape[{pos}] = bshape[{item[1]}]; ixs[{pos}] = 0;")
        for pos, d in enumerate(self.trailing, len(self.layout)):
            lines.append(f"    ishape[{pos}] = in[0].shape[{d}]; "
                         f"ixs[{pos}] = {base}->strides[{d}];")
        lines.append("    (void)fixed; (void)ixs; (void)bsize;")
        return "\n".join(lines)

    def _mask_shape(self, e):
        """C checking that mask ``e`` has the shape of the dimensions it covers."""
        return f"""    for (int j = 0; j < {e.ndim}; j++) {{
        int64_t have = in[{e.value}].shape[j], n = in[0].shape[{e.dim} + j];
        if (have == n) continue;
        {self._fail()}
        sg_sh_put(&m, "boolean index did not match indexed array along axis %d; size of axis "
                      "is %lld but size of corresponding boolean axis is %lld)",
                  {e.dim} + j, (long long)n, (long long)have);
        return 1;
    }}"""

    def _int_or_slice(self, e, base):
        """C checking an int (adding its offset to ``fixed``) or resolving a slice
        (its start into ``fixed``, its length and stride into the indexed shape)."""
        if e.kind == "int":
            return f"""    {{
        int64_t i = {e.value}, n = in[0].shape[{e.dim}];
        if (i < -n || i >= n) {{
            {self._fail()}
            sg_sh_put(&m, "index %lld is out of bounds for axis {e.dim} with size %lld)",
                      (long long)i, (long long)n);
            return 1;
        }}
        fixed += (i < 0 ? i + n : i) * {base}->strides[{e.dim}];
    }}"""
        pos = self.layout.index(("slice", e.dim))
        lines = [f"    {{\n        int64_t n = in[0].shape[{e.dim}];"] + _slice_c(*e.value)
        lines.append(f"""        fixed += start * {base}->strides[{e.dim}];
        ishape[{pos}] = len;
        ixs[{pos}] = step * {base}->strides[{e.dim}];
    }}""")
        return "\n".join(lines)

    def _broadcast(self):
        """C broadcasting the arrays and the masks' nonzero() arrays (NumPy's
        IndexError when they do not fit), setting ``bshape`` and ``bsize``."""
        nb = self.nb
        lines = [f"    int64_t bshape[{nb}], bsize = 1;\n    int mismatch = 0;",
                 f"    for (int b = 0; b < {nb}; b++) bshape[b] = 1;"]
        shapes = []
        for e in self.entries:
            if e.kind == "mask":
                lines.append(f"""    int64_t mc{e.value} = sg_ix_count_nonzero_bool(&in[{e.value}]);
    {{
        int64_t s = mc{e.value}, *t = &bshape[{nb - 1}];
        if (s != 1) {{ if (*t == 1) *t = s; else if (*t != s) mismatch = 1; }}
    }}""")
                shapes += [f'sg_sh_put(&m, "(%lld,) ", (long long)mc{e.value});'] * e.ndim
            elif e.kind == "array":
                nd = self.node.inputs[e.value].ndim
                lines.append(f"""    for (int d = 0; d < {nd}; d++) {{
        int64_t s = in[{e.value}].shape[d], *t = &bshape[{nb - nd} + d];
        if (s == 1) continue;
        if (*t == 1) *t = s; else if (*t != s) mismatch = 1;
    }}""")
                shapes.append(f'sg_ix_put_shape_compact(&m, in[{e.value}].shape, {nd}); '
                              f'sg_sh_put(&m, " ");')
        lines.append(f"""    if (mismatch) {{
        {self._fail()}
        sg_sh_put(&m, "shape mismatch: indexing arrays could not be broadcast "
                      "together with shapes ");
        {" ".join(shapes)}
        sg_sh_put(&m, ")");
        return 1;
    }}
    for (int b = 0; b < {nb}; b++) bsize *= bshape[b];""")
        return "\n".join(lines)

    def bounds(self):
        """C checking every array element (NumPy skips this when the broadcast is empty)."""
        checks = []
        for e in self.arrays:
            reader = f"sg_ix_rd_{self.node.inputs[e.value].dtype}"
            n = f"in[0].shape[{e.dim}]"
            checks.append(f"""        if (sg_ix_find_oob(&in[{e.value}], {reader}, {n}, &bad)) {{
            {self._fail()}
            sg_sh_put(&m, "index %lld is out of bounds for axis {e.dim} with size %lld)",
                      (long long)bad, (long long)in[0].shape[{e.dim}]);
            return 1;
        }}""")
        if not checks:
            return ""
        return "    if (bsize > 0) {\n        int64_t bad;\n" + "\n".join(checks) + "\n    }"

    # -- the walk --------------------------------------------------------------

    def loop(self, xside, dense, dstr, gather, body1, body):
        """C visiting the indexed elements: at each outer position ``xp`` points at
        the element of ``xside`` (x's shape) and ``dp`` into ``dense`` (laid out in
        the indexed shape, byte strides ``dstr``); ``body1``/``body`` (one element /
        the inner ``plan``) use them.  The plan writes ``dense`` when ``gather``,
        else ``xside``.  Mask offsets live in a workspace freed at the end."""
        no, nd = self.n_outer, self.ndim
        decl, off, step, back = [], [], [], []
        for e in self.arrays:
            i, a_nd = e.value, self.node.inputs[e.value].ndim
            # Array i's strides over the outer dims (0 outside its dims and where it broadcasts).
            decl.append(f"""    const char *ap{i} = in[{i}].data;
    int64_t as{i}[{no}] = {{0}};
    for (int d = 0; d < {a_nd}; d++)
        if (in[{i}].shape[d] != 1) as{i}[{no - a_nd} + d] = in[{i}].strides[d];""")
            n = f"{xside}->shape[{e.dim}]"
            off.append(f"{{ int64_t v = sg_ix_rd_{self.node.inputs[i].dtype}(ap{i}); "
                       f"off += (v < 0 ? v + {n} : v) * {xside}->strides[{e.dim}]; }}")
            step.append(f"ap{i} += as{i}[k];")
            back.append(f"ap{i} -= as{i}[k] * ishape[k];")
        for e in self.masks:
            i = e.value
            decl.append(f"""    const char *mp{i} = (const char *)next;
    sg_ix_mask_offsets(&in[{i}], {xside}->strides + {e.dim}, next);
    next += mc{i};
    int64_t ms{i}[{no}] = {{0}};
    if (mc{i} != 1) ms{i}[{no - 1}] = sizeof(int64_t);""")
            off.append(f"{{ int64_t v; memcpy(&v, mp{i}, sizeof v); off += v; }}")
            step.append(f"mp{i} += ms{i}[k];")
            back.append(f"mp{i} -= ms{i}[k] * ishape[k];")
        strides = (f"{dstr} + {no}, ixs + {no}") if gather else (f"ixs + {no}, {dstr} + {no}")
        return f"""{self._workspace()}
{chr(10).join(decl)}
    int64_t cnt[{no}] = {{0}}, total = 1;
    for (int d = 0; d < {no}; d++) total *= ishape[d];
    sg_sh_plan plan;
    sg_sh_plan_init(&plan, {nd - no}, ishape + {no}, {strides});
    char *xo = {xside}->data + fixed;
    char *dp = (char *)({dense});
    for (int64_t e = 0; e < total; e++) {{
        int64_t off = 0;
        {" ".join(off)}
        char *xp = xo + off;
        if (plan.ndim == 0) {{ {body1} }} else {{ {body} }}
        for (int k = {no} - 1; k >= 0; k--) {{
            xo += ixs[k]; dp += {dstr}[k]; {" ".join(step)}
            if (++cnt[k] < ishape[k]) break;
            xo -= ixs[k] * ishape[k]; dp -= {dstr}[k] * ishape[k]; {" ".join(back)}
            cnt[k] = 0;
        }}
    }}
    {"free(tab);" if self.masks else ""}
"""

    def _workspace(self):
        """C allocating ``tab``: the byte offsets of every mask's true elements."""
        if not self.masks:
            return ""
        count = " + ".join(f"mc{e.value}" for e in self.masks)
        return f"""    int64_t *tab = (int64_t *)malloc((size_t)({count} + 1) * sizeof(int64_t));
    if (!tab) SG_FAIL(err, SG_ERR_MEMORY, "%s: cannot allocate the offsets of %lld mask "
                      "elements", {c_string(self.op, quote=True)}, (long long)({count}));
    int64_t *next = tab;"""

    def support(self, *extra):
        """The kernel's support code: shared helpers, ``extra``, then the readers of
        the index dtypes (and mask counting)."""
        dtypes = sorted({str(self.node.inputs[e.value].dtype) for e in self.arrays + self.masks})
        counting = (_nonzero_support("bool"),) if self.masks else ()
        return _support(*extra, *counting, *[_reader_support(d) for d in dtypes])


def advanced_subtensor_kernel(op, node):
    """AdvancedSubtensor, every form (see the module docstring): a gather into a
    new array."""
    if not all_have_c_types(node):
        return None
    ix = _AdvancedIndex(op, node, 1)
    size = itemsize(node.inputs[0].dtype)
    shape = f"""{ix.checks("(&in[0])")}
    for (int d = 0; d < {ix.ndim}; d++) out_shapes[d] = ishape[d];"""
    loop = ix.loop("(&in[0])", "out[0].data", "out[0].strides", True,
                   f"memcpy(dp, xp, {size});", f"sg_sh_copy(&plan, dp, xp, {size});")
    run = f"""{ix.checks("(&in[0])")}
{ix.bounds()}
    if (sg_size(&out[0]) == 0) return 0;
{loop}"""
    return ix.kernel(run, shape=shape, support=ix.support())


def advanced_inc_subtensor_kernel(op, node):
    """AdvancedIncSubtensor, every form: x copied (unless in place), then y added
    at the indexed elements as ``np.add.at`` does (repeated indices accumulate) or
    stored (the last repeated index wins)."""
    if not all_have_c_types(node):
        return None
    ix = _AdvancedIndex(op, node, 2)
    dtype, size = str(node.inputs[0].dtype), itemsize(node.inputs[0].dtype)
    kind, kw = _update_kind(op)
    if op.set_instead_of_inc:
        body1, body = f"memcpy(xp, dp, {size});", f"sg_sh_copy(&plan, xp, dp, {size});"
    else:
        body1, body = f"sg_ix_inc1_{dtype}(xp, dp);", f"sg_ix_inc_{dtype}(&plan, xp, dp);"
    run = f"""{_copy_input(node, kind)}
{ix.checks("(&out[0])")}
{ix.bounds()}
{_value_check(op, node, "ishape", ix.ndim)}
    int64_t tsize = 1;
    for (int d = 0; d < {ix.ndim}; d++) tsize *= ishape[d];
    if (tsize == 0) return 0;
{ix.loop("(&out[0])", "in[1].data", "ys", False, body1, body)}"""
    shape = f"    for (int d = 0; d < {node.inputs[0].ndim}; d++) out_shapes[d] = in[0].shape[d];"
    return ix.kernel(run, shape=shape, kind=kind, support=ix.support(_inc_support(dtype)), **kw)


# ---------------------------------------------------------------------------
# Nonzero


def nonzero_kernel(op, node):
    """Nonzero: one int64 vector per dimension of x, the indices of its non-zero
    elements in C order (a first pass counts them, for the output shapes)."""
    if not all_have_c_types(node):
        return None
    dtype, ndim = str(node.inputs[0].dtype), node.inputs[0].ndim
    shape = f"""    int64_t count = sg_ix_count_nonzero_{dtype}(&in[0]);
    for (int k = 0; k < {ndim}; k++) out_shapes[k * SG_MAXDIMS] = count;"""
    run = f"    sg_ix_nonzero_{dtype}(&in[0], out);"
    return kernel(run, shape=shape, support=_support(_nonzero_support(dtype)))
