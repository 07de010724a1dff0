"""What a device backend can run, asked by the ``gpu`` rewrites without
importing the backend (as ``fusion_support.py`` does for fusion).

A backend registers ``support(node) -> None | str`` for its context kind
(``"cuda"``): None when the node can run there, else the reason it cannot
("no CUDA lowering for Sort", "dtype complex128"), which ``placement_report``
shows the user.
"""

__all__ = ["register_device_support", "device_support", "host_inputs", "supported_kinds"]

_SUPPORT = {}
_HOST_INPUTS = {}


def register_device_support(kind, support, host_inputs=None):
    """``support(node)`` answers for the contexts of ``kind`` from now on;
    ``host_inputs(node)`` gives the positions of the inputs its kernels read
    on the host (index values, shapes), which stay in host memory."""
    _SUPPORT[kind] = support
    _HOST_INPUTS[kind] = host_inputs


def host_inputs(kind, node):
    """The positions of ``node``'s inputs that stay on the host on a ``kind`` device."""
    fn = _HOST_INPUTS.get(kind)
    return tuple(sorted(fn(node))) if fn is not None else ()


def supported_kinds():
    """The context kinds some backend answers for."""
    return sorted(_SUPPORT)


def device_support(kind, node):
    """None when ``node`` can run on a ``kind`` device, else the reason it cannot."""
    support = _SUPPORT.get(kind)
    if support is None:
        return f"no {kind} backend is loaded"
    return support(node)
