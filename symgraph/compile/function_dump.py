"""Theano's ``function_dump``: the arguments of a ``function`` call, pickled, so
that someone else can rebuild the function (to report a bug, say) with

    import pickle, symgraph
    with open(filename, "rb") as f:
        fn = symgraph.function(**pickle.load(f))
"""

import pickle

from symgraph.graph.basic import Variable, ancestors

__all__ = ["function_dump"]


def _variables(*roots):
    found = []
    for root in roots:
        if root is None:
            continue
        if isinstance(root, dict):
            root = list(root.items())
        items = root if isinstance(root, (list, tuple)) else [root]
        for item in items:
            if isinstance(item, (list, tuple)):
                found.extend(_variables(*item))
            elif isinstance(item, Variable):
                found.append(item)
            elif hasattr(item, "variable"):  # In / Out
                found.append(item.variable)
    return found


def function_dump(filename, inputs, outputs=None, mode=None, updates=None, givens=None,
                  no_default_updates=False, accept_inplace=False, name=None,
                  rebuild_strict=True, allow_input_downcast=None, profile=None,
                  on_unused_input=None, extra_tag_to_remove=None):
    """Pickle ``function``'s arguments to ``filename`` (Theano's signature).

    ``extra_tag_to_remove``: names of ``var.tag`` attributes to delete from every
    variable of the graph first (values that do not pickle, for example).
    The file holds a dict of ``function``'s keyword arguments.
    """
    args = dict(inputs=inputs, outputs=outputs, mode=mode, updates=updates, givens=givens,
                no_default_updates=no_default_updates, accept_inplace=accept_inplace,
                name=name, rebuild_strict=rebuild_strict,
                allow_input_downcast=allow_input_downcast, profile=profile,
                on_unused_input=on_unused_input)
    if extra_tag_to_remove:
        for var in ancestors(_variables(inputs, outputs, updates, givens)):
            for tag in extra_tag_to_remove:
                if hasattr(var.tag, tag):
                    delattr(var.tag, tag)
    with open(filename, "wb") as f:
        pickle.dump(args, f, protocol=pickle.HIGHEST_PROTOCOL)
