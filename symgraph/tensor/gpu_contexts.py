"""Context names and the devices they stand for (Theano's gpuarray contexts).

A ``GpuArrayType`` carries a context name: a device name (``cuda0``,
``cuda1``; ``cuda`` is ``cuda0``) or a name of the flag ``contexts``
(``dev0->cuda0;dev1->cuda1``), which lets a program name its devices once
and run on machines numbered differently.  ``None`` (Theano's default
context) is the device of the flag ``device``.  A name keeps the device it
had when first used for the life of the process (Theano registered its
contexts once), so functions compiled under the flag keep working when it
changes; mapping a used name to another device is an error.  This module
only reads the flags: whether a device exists is the device backend's
question (``backends/cuda/contexts.py``).
"""

import functools
import re

from symgraph.config import ConfigError

__all__ = ["ContextError", "context_map", "default_context", "context_name", "device_of",
           "device_number"]

_DEVICE = re.compile(r"cuda(\d*)")


class ContextError(ConfigError):
    """A context name that no flag defines, or a device that does not exist."""


#: context name -> device number, for every name of the flag contexts used so far
_USED = {}


def context_map():
    """{context name: device name} of the flag ``contexts``, in its order."""
    from symgraph.config import config

    return dict(_parsed(config.contexts))


@functools.lru_cache(maxsize=8)
def _parsed(text):
    # device arrays resolve their context at every conversion: parse once
    from symgraph.config import parse_contexts

    return tuple(parse_contexts(text).items())


def default_context():
    """The context of the flag ``device`` ('cuda0' for 'cuda'), or None with device=cpu."""
    from symgraph.config import config

    match = _DEVICE.fullmatch(str(config.device))
    if match is None:
        return None
    return f"cuda{match.group(1) or 0}"


def context_name(target):
    """The context name types carry for ``target``: a name of the flag
    ``contexts`` as is, a device name spelled ``cudaN``, None as the default
    context; ContextError for a name nothing defines."""
    if target is None:
        context = default_context()
        if context is None:
            raise ContextError("the default context (None) is the device of the flag device, "
                               "which is cpu: set device=cuda, or name a context of the flag "
                               f"contexts ({_defined()})")
        return context
    target = str(target)
    match = _DEVICE.fullmatch(target)
    if match is not None:
        return f"cuda{match.group(1) or 0}"
    device_number(target)
    return target


def device_of(name):
    """The device name ('cuda1') a context name stands for."""
    return f"cuda{device_number(name)}"


def device_number(name):
    """The CUDA device number of a context name."""
    match = _DEVICE.fullmatch(str(name))
    if match is not None:
        return int(match.group(1) or 0)
    mapped = context_map().get(name)
    if mapped is None:
        if name in _USED:
            return _USED[name]
        raise ContextError(f"no context is named {name!r}: {_defined()}")
    number = int(mapped[len("cuda"):])
    if _USED.setdefault(name, number) != number:
        raise ContextError(f"the flag contexts maps {name} to {mapped}, but this process used "
                           f"{name} as cuda{_USED[name]} already: a context keeps its device "
                           "for the life of the process (choose another name)")
    return number


def _defined():
    mapping = context_map()
    names = ", ".join(f"{n} ({d})" for n, d in mapping.items())
    return (f"the flag contexts defines {names}" if names else "the flag contexts is empty") + \
        "; device names (cuda0, cuda1, ...) are contexts too"
