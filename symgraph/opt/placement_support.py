"""What a device backend can run, asked by the ``gpu`` rewrites without
importing the backend (as ``fusion_support.py`` does for fusion).

A backend registers ``support(node) -> None | str`` for its context kind
(``"cuda"``): None when the node can run there, else the reason it cannot
("no CUDA lowering for Sort", "dtype complex128"), which ``placement_report``
shows the user.
"""

__all__ = ["register_device_support", "device_support", "supported_kinds"]

_SUPPORT = {}


def register_device_support(kind, support):
    """``support(node)`` answers for the contexts of ``kind`` from now on."""
    _SUPPORT[kind] = support


def supported_kinds():
    """The context kinds some backend answers for."""
    return sorted(_SUPPORT)


def device_support(kind, node):
    """None when ``node`` can run on a ``kind`` device, else the reason it cannot."""
    support = _SUPPORT.get(kind)
    if support is None:
        return f"no {kind} backend is loaded"
    return support(node)
