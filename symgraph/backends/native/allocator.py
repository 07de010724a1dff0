"""The runtime's allocators, as backends name them (``c_src/sg_allocator.h``).

A backend's :attr:`Backend.allocator` says where the buffers its kernels write
live.  The runtime makes, describes and views buffers through an
``sg_allocator``: NumPy arrays in host memory are its own (number 0); a
backend with memory elsewhere (a device) exports an ``sg_allocator`` from its
native library, and :class:`Allocator` registers it with the runtime once per
process and gives its number to the linker, which puts it in each of that
backend's steps.
"""

import threading

__all__ = ["Allocator", "HOST"]


class Allocator:
    """An allocator of buffers: ``name``, and ``capsule()`` returning a
    PyCapsule of its ``sg_allocator`` (None: the runtime's host allocator)."""

    def __init__(self, name, capsule=None):
        self.name = name
        self._capsule = capsule
        self._numbers = {}      # id(runtime module) -> its number there
        self._lock = threading.Lock()

    def capsule(self):
        """The PyCapsule of this allocator's ``sg_allocator``, or None for the host's."""
        return self._capsule() if callable(self._capsule) else self._capsule

    def runtime_number(self, runtime):
        """This allocator's number in ``runtime`` (registered on first use)."""
        capsule = self.capsule()
        if capsule is None:
            return 0
        with self._lock:
            key = id(runtime)
            if key not in self._numbers:
                self._numbers[key] = runtime.register_allocator(capsule)
            return self._numbers[key]

    def __repr__(self):
        return f"<Allocator {self.name}>"


#: Host memory: NumPy arrays, the runtime's own allocator.
HOST = Allocator("host")
