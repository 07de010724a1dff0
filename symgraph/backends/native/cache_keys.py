"""Compile-cache keys: a sha256 over named parts (see :func:`make_key`)."""

import hashlib
import sys

from symgraph.backends.cpu import compiler

__all__ = ["CACHE_FORMAT", "make_key", "environment_parts", "summarize_parts",
           "compiler_identity"]

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


def environment_parts(openmp=False):
    """The key parts that do not come from the source: compiler and flags, CPU,
    NumPy ABI (major.minor), Python, symgraph, and every flag declared to change
    code (``config.c_key()``).  ``make_key(source=src, **environment_parts())``."""
    import numpy

    from symgraph.version import __version__
    from symgraph.config import config

    signature = compiler_identity()
    return {
        "format": CACHE_FORMAT,
        "compiler": signature,
        "flags": " ".join(compiler.base_flags(openmp, clang="clang" in signature.lower())),
        "cpu": compiler.cpu_signature(),
        "numpy": ".".join(numpy.__version__.split(".")[:2]),
        "python": f"{sys.implementation.cache_tag} {sys.version_info[0]}."
                  f"{sys.version_info[1]}",
        "symgraph": __version__,
        "config": repr(config.c_key()),
    }


_remembered = set()   # (compiledir, cxx, signature) recorded by this process


def compiler_identity():
    """The compiler's signature (:func:`compiler.compiler_signature`), the key part
    that names the compiler.

    Each compiledir remembers the signature of the compiler that ``cxx`` named
    when it last was found; when it is missing now (not on PATH), that
    signature is used, so that the kernels it built still load: a warm cache
    runs natively without a compiler.  Raises CompileError when the compiler is
    missing and the compiledir never saw it.
    """
    from symgraph.backends.native.cache import get_cache
    from symgraph.config import config

    cache = get_cache()
    # by default cxx is whatever g++ PATH gives, and empty when there is none
    chosen = config.source("cxx") != "default"
    name = f"compiler-signature:{config.cxx if chosen else '<default>'}"
    try:
        signature = compiler.compiler_signature()
    except compiler.CompileError:
        record = cache.lookup(name) if config.cxx or not chosen else None
        if record is None or not isinstance(record.get("signature"), str):
            raise
        return record["signature"]
    seen = (str(cache.root), config.cxx, signature)
    if seen not in _remembered:
        record = cache.lookup(name)
        if record is None or record.get("signature") != signature:
            cache.record(name, {"signature": signature})
        _remembered.add(seen)
    return signature


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
