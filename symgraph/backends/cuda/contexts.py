"""Which devices exist, and whether the contexts of the flags name them.

The flags ``device`` and ``contexts`` name devices (``cuda1``); a GPU
machine has as many as its driver sees, the emulated device as many as the
flag ``gpu.emulate_devices`` says.  A name past them is one error, raised
when the device backend is first made ready, naming the flag and what
exists.
"""

from symgraph.tensor.gpu_contexts import ContextError, context_map, default_context

__all__ = ["device_count", "existing_devices", "check_contexts", "check_device"]


def _emulated():
    from symgraph.config import config

    return bool(config.gpu.emulate)


def device_count(emulated=None):
    """How many devices this process can use: the driver's count on a GPU
    machine, ``gpu.emulate_devices`` on the emulated device."""
    from symgraph.config import config

    emulated = _emulated() if emulated is None else emulated
    if emulated:
        return int(config.gpu.emulate_devices)
    from symgraph.backends.cuda.device import driver_available

    return driver_available()


def existing_devices(emulated=None):
    """What exists, in words: 'cuda0, cuda1 (the emulated device offers 2:
    gpu.emulate_devices=2)' or 'cuda0 (the 1 GPU the driver sees)'."""
    emulated = _emulated() if emulated is None else emulated
    n = device_count(emulated)
    names = ", ".join(f"cuda{i}" for i in range(n)) or "no device"
    if emulated:
        return f"{names} (the emulated device offers {n}: gpu.emulate_devices={n})"
    return f"{names} (the {n} GPU(s) the driver sees)"


def _named_devices():
    """(where it is named, device number) of every device the flags name."""
    named = []
    default = default_context()
    if default is not None:
        from symgraph.config import config

        named.append((f"the flag device={config.device}", int(default[len("cuda"):])))
    for name, device in context_map().items():
        named.append((f"the flag contexts ({name}->{device})", int(device[len("cuda"):])))
    return named


def check_device(number, what=None, emulated=None):
    """ContextError unless device ``number`` exists; ``what`` says where it
    was named (a flag, a context)."""
    emulated = _emulated() if emulated is None else emulated
    if 0 <= number < device_count(emulated):
        return
    named = f"{what} names cuda{number}, which" if what else f"cuda{number}"
    raise ContextError(f"{named} does not exist: this process can use "
                       f"{existing_devices(emulated)}")


def check_contexts(emulated=None):
    """ContextError for the first device the flags ``device`` and
    ``contexts`` name that does not exist."""
    for what, number in _named_devices():
        check_device(number, what, emulated)
