"""Build script: everything is declared in setup.cfg, except the native runtime.

The runtime (``c_src/runtime.c``, the one C file that includes Python's and
NumPy's headers) is compiled here, once, as the extension ``symgraph._runtime``
(``pip install -e .`` builds it too), so that no process pays for it on its
first compiled function.  ``symgraph/compile/native/runtime.py`` loads it, and
builds the runtime through the compile cache instead when this extension is
missing (a checkout run without installing) or older than ``c_src/`` (its
``source_hash`` differs from :func:`runtime_source_hash`).
"""

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: The files the runtime is compiled from: their hash is embedded in the build.
RUNTIME_SOURCES = ("runtime.c", "sg_kernel.h")


def runtime_source_hash(c_src=ROOT / "c_src"):
    """sha256 of the runtime's sources (the same as ``runtime.runtime_source_hash``)."""
    digest = hashlib.sha256()
    for name in RUNTIME_SOURCES:
        digest.update(name.encode() + b"\0" + (Path(c_src) / name).read_bytes() + b"\0")
    return digest.hexdigest()


def runtime_extension():
    """The setuptools Extension of ``symgraph._runtime``."""
    import numpy
    from setuptools import Extension

    return Extension(
        "symgraph._runtime", ["c_src/runtime.c"],
        include_dirs=[numpy.get_include(), "c_src"],
        define_macros=[("SG_RUNTIME_PACKAGED", "1"),
                       ("SG_RUNTIME_SOURCE_HASH", '"%s"' % runtime_source_hash())])


if __name__ == "__main__":
    from setuptools import setup

    setup(ext_modules=[runtime_extension()])
