"""The C of the fused Composite op (``symgraph/ops/composite.py``): its members'
bodies in one element function; registered in the C family's scalar table
(``scalar_c.py``)."""

from symgraph.backends.c_family.scalar_c import (c_body, c_error_messages, c_input_dtypes,
                                                 c_method, c_support)
from symgraph.backends.c_family.scalar_base import c_ctype, c_lit
from symgraph.ops.composite import Composite, _literal_value


@c_method(Composite, "c_input_dtypes")
def _composite_c_input_dtypes(composite, *dtypes):
    # Each member converts its own inputs; the composite takes them as they are.
    return [str(d) for d in dtypes]


@c_method(Composite, "c_body")
def _composite_c_body(composite, inputs, in_dtypes, outputs, out_dtypes, error_flag=None):
    """One statement per inner node into block-local temporaries, then the
    outputs; None when a member has no C for its dtypes."""
    inner = composite.inner_dtypes(*in_dtypes)
    lines = []
    names = []
    for j, ((op, args), node_dtypes) in enumerate(zip(composite.nodes, inner)):
        arg_names = []
        arg_dtypes = [composite._ref_dtype(r, in_dtypes, inner) for r in args]
        want = c_input_dtypes(op, *arg_dtypes)
        for pos, (ref, have, need) in enumerate(zip(args, arg_dtypes, want)):
            if ref[0] == "c":
                arg_names.append(c_lit(_literal_value(ref[1], ref[2]), need))
                continue
            name = inputs[ref[1]] if ref[0] == "i" else names[ref[1]][ref[2]]
            if c_ctype(have) != c_ctype(need) or (have == "bool") != (need == "bool"):
                cast = f"t{j}_a{pos}"
                lines.append(f"const {c_ctype(need)} {cast} = "
                             f"({c_ctype(need)})({name});")
                name = cast
            arg_names.append(name)
        outs = [f"t{j}_{o}" for o in range(len(node_dtypes))]
        body = c_body(op, arg_names, want, outs, list(node_dtypes), error_flag=error_flag)
        if body is None:
            return None
        lines += [f"{c_ctype(dt)} {name};" for name, dt in zip(outs, node_dtypes)]
        lines.append(body)
        lines += [f"{name} = SG_ROUND_F16({name});"
                  for name, dt in zip(outs, node_dtypes) if dt == "float16"]
        names.append(outs)
    for out_name, ref, dt in zip(outputs, composite.outputs, out_dtypes):
        if ref[0] == "c":
            value = c_lit(_literal_value(ref[1], ref[2]), dt)
        else:
            value = inputs[ref[1]] if ref[0] == "i" else names[ref[1]][ref[2]]
        lines.append(f"{out_name} = {value};")
    return "{\n" + "\n".join(lines) + "\n}"


@c_method(Composite, "c_expr")
def _composite_c_expr(composite, inputs, in_dtypes, out_dtype):
    """A GNU statement expression (single-output composites only)."""
    if composite.nout != 1:
        return None
    body = c_body(composite, inputs, in_dtypes, ["sg_r"], [out_dtype])
    if body is None:
        return None
    return f"({{ {c_ctype(out_dtype)} sg_r; {body} sg_r; }})"


@c_method(Composite, "c_error_messages")
def _composite_c_error_messages(composite, in_dtypes):
    inner = composite.inner_dtypes(*in_dtypes)
    messages = []
    for (op, args), _ in zip(composite.nodes, inner):
        arg_dtypes = [composite._ref_dtype(r, in_dtypes, inner) for r in args]
        for message in c_error_messages(op, c_input_dtypes(op, *arg_dtypes)):
            if message not in messages:
                messages.append(message)
    return tuple(messages)


@c_method(Composite, "c_support")
def _composite_c_support(composite):
    support = {}
    for op, _ in composite.nodes:
        for key, code in c_support(op):
            support.setdefault(key, code)
    return tuple(support.items())
