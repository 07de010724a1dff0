"""One loader for the native libraries that installing symgraph may build ahead
of time: "use the one built at install when it is current, else build it once
into the compile cache".

The runtime (``symgraph._runtime``), the support library (``symgraph._support``)
and the convolution algorithm library (never built at install: it follows the
``openmp`` flag) all load through a :class:`Prebuilt`; each says how to open
its installed build, which build id that must carry, and how to build and open
it in the cache.
"""

import ctypes
import importlib.util
import logging

__all__ = ["Prebuilt"]

_log = logging.getLogger("symgraph.compile.prebuilt")


class Prebuilt:
    """A native library that an install may have built: ``what`` (for messages),
    the installed module's import name ``installed`` (None: never built at
    install), how to open that build (``open_installed(path)``), the build id it
    carries (``build_id(opened)``) and the one the current sources give
    (``expected_id()``); and the compile cache's entry for it: ``key()``,
    ``build(tmp_dir)``, ``loader(path)`` (default ``ctypes.CDLL``), and the
    key's ``parts`` recorded beside the entry (optional)."""

    def __init__(self, what, *, key, build, loader=None, parts=None, installed=None,
                 open_installed=None, build_id=None, expected_id=None):
        self.what, self.key, self.build, self.loader = what, key, build, loader
        self.parts = parts
        self.installed_name, self.open_installed = installed, open_installed
        self.build_id, self.expected_id = build_id, expected_id

    def load(self):
        """The installed build when it is current, else the cache's (built once)."""
        return self.installed() or self.cached()

    def cached(self):
        """The build in the compile cache, made first when missing."""
        from symgraph.backends.native.cache import get_cache

        return get_cache().load(self.key(), self.build, loader=self.loader or ctypes.CDLL,
                                what=self.what,
                                parts=self.parts)

    def installed(self):
        """The build made at install, or None: missing, unloadable, or made from
        other sources (a checkout edited since ``pip install``) or for another
        CPU, each with a log line, never an error (the cache has the current one)."""
        if self.installed_name is None:
            return None
        name, what = self.installed_name, self.what
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):    # a parent missing; a module without a spec
            spec = None
        if spec is None or not spec.origin:
            _log.debug("no installed build of %s (%s): building it in the compile cache",
                       what, name)
            return None
        try:
            opened = self.open_installed(spec.origin)
            built = self.build_id(opened)
        except (ImportError, OSError, ValueError) as exc:
            _log.info("the installed build of %s (%s) cannot be loaded (%s)", what,
                      spec.origin, exc)
            return None
        try:
            wanted = self.expected_id()
        except OSError:
            return opened      # no sources to compare with: the installed build is all there is
        if built != wanted:
            _log.info("the installed build of %s (%s) was made from other sources or for "
                      "another CPU; building the current one in the compile cache "
                      "(reinstall with pip install to avoid this)", what, spec.origin)
            return None
        return opened
