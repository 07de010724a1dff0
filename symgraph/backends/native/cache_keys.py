"""Compile-cache keys: a sha256 over named parts (see :func:`make_key`)."""

import hashlib
import sys

__all__ = ["CACHE_FORMAT", "make_key", "environment_parts", "summarize_parts"]

#: Bump when the cache layout or the meaning of an entry changes.
CACHE_FORMAT = "1"


def make_key(**parts):
    """The sha256 hex digest of named parts (strings; other values use ``repr``).
    Each name and value is length-prefixed, so no two part lists collide by
    concatenation; the order of the arguments does not matter."""
    digest = hashlib.sha256()
    for name in sorted(parts):
        value = parts[name]
        value = value if isinstance(value, str) else repr(value)
        for text in (name, value):
            data = text.encode("utf-8", "surrogatepass")
            digest.update(b"%d:" % len(data))
            digest.update(data)
    return digest.hexdigest()


def environment_parts(openmp=False, backend=None):
    """The key parts that do not come from the source: the backend's own
    (compiler, flags, target: ``Backend.key_parts``; default the CPU backend),
    NumPy ABI (major.minor), Python, symgraph, and every flag declared to change
    code (``config.c_key()``).  ``make_key(source=src, **environment_parts())``."""
    import numpy

    from symgraph.backends.protocol import get_backend
    from symgraph.config import config
    from symgraph.version import __version__

    backend = get_backend() if backend is None else backend
    return {
        "format": CACHE_FORMAT,
        **backend.key_parts(openmp),
        "numpy": ".".join(numpy.__version__.split(".")[:2]),
        "python": f"{sys.implementation.cache_tag} {sys.version_info[0]}."
                  f"{sys.version_info[1]}",
        "symgraph": __version__,
        "config": repr(config.c_key()),
    }


def summarize_parts(parts):
    """Key parts for meta.json: long values (the source) as length and hash."""
    out = {}
    for name, value in (parts or {}).items():
        value = value if isinstance(value, str) else repr(value)
        if len(value) > 200 or "\n" in value:
            value = (f"<{len(value)} chars, sha256 "
                     f"{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}>")
        out[name] = value
    return out
