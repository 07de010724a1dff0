"""Theano's context map, the flag ``contexts`` (``dev0->cuda0;dev1->cuda1``):
names a user chooses for devices.  Parsed here, apart from the flag
registry, because the flag's type and the device backend both read it."""

import re

__all__ = ["parse_contexts"]


def parse_contexts(text):
    """The flag ``contexts`` (Theano's syntax, ``dev0->cuda0;dev1->cuda1``) as a
    dict {context name: device name}, in the flag's order; ValueError naming
    the mapping that is wrong."""
    mapping = {}
    for part in (p.strip() for p in str(text).split(";")):
        if not part:
            continue
        name, arrow, device = (t.strip() for t in part.partition("->"))
        if not arrow or not name or not device:
            raise ValueError(f"{part!r} is not a mapping 'name->cudaN'")
        if "->" in device:
            raise ValueError(f"{part!r}: a context name cannot contain '->'")
        # a name that looks like a device would be read as one elsewhere
        # (transfer('cuda1') means the device); Theano refuses these too
        if name == "cpu" or name.startswith(("cuda", "opencl")):
            raise ValueError(f"{part!r}: a context name cannot be 'cpu' or begin with "
                             "'cuda' or 'opencl' (those name devices)")
        if not re.fullmatch(r"cuda\d+", device.lower()):
            raise ValueError(f"{part!r}: the device must be cuda0, cuda1, ...")
        if name in mapping:
            raise ValueError(f"the context {name!r} is mapped twice")
        mapping[name] = device.lower()
    return mapping
