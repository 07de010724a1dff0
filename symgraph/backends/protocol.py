"""The backend protocol: the one interface the linker talks to, and the registry
of backends by name.

A backend turns nodes into kernels (its lowering table, see ``lowering.py``),
answers the fusion rewrites (``opt/fusion_support.py``), names the parts of a
cache key that are its own (compiler, flags, target), builds a group of
kernels into one library, prepares a loaded library for its kernels, and
allocates the buffers its kernels write (``allocator``).  The linker
(``native/linker.py``), the cache and the runtime know nothing else about it,
so a second backend is a package that subclasses :class:`Backend`, registers
its lowerings and calls :func:`register_backend`.
"""

import abc

from symgraph.backends.lowering import lower, lowering_rule

__all__ = ["Backend", "register_backend", "get_backend", "registered_backends"]


class Backend(abc.ABC):
    """What the linker asks of a backend (see the module docstring).

    Subclasses set :attr:`name` (the name their lowerings register under) and
    :attr:`allocator`, and implement the abstract methods.
    """

    #: The name lowerings and fusion answers are registered under.
    name = None
    #: The runtime allocator of the buffers its kernels write
    #: (``native.allocator.Allocator``).
    allocator = None

    def claims(self, node):
        """True when ``node`` is this backend's to run whatever the other
        backends say (a device backend's device nodes); the CPU backend takes
        every node nobody claims."""
        return False

    def output_allocator(self, node):
        """The allocator of ``node``'s outputs (a transfer back to the host
        writes host memory from a device backend)."""
        return self.allocator

    def step_context(self, node):
        """The allocator whose ``enter`` the runtime calls before ``node``'s
        step (a device backend selects the node's device there), or None."""
        return None

    def assemble(self, kernels, manifest=()):
        """One translation unit for ``kernels`` ((prefix, kernel) pairs)."""
        from symgraph.backends.native.assemble import assemble

        return assemble(kernels, manifest)

    def has_lowering(self, node):
        """True when this backend has a lowering rule for ``node``'s op."""
        return lowering_rule(node.op, self.name) is not None

    def lower(self, node):
        """The kernel of ``node`` (a ``native.kernel.CKernel``), or None when the
        backend has no rule for its op or its rule declines the node."""
        return lower(node, self.name)

    def can_fuse_elemwise(self, scalar_op, dtypes):
        """Whether ``scalar_op`` over ``dtypes`` can join a fused loop here."""
        from symgraph.opt.fusion_support import can_fuse_elemwise

        return can_fuse_elemwise(scalar_op, dtypes, backend=self.name)

    @abc.abstractmethod
    def available(self):
        """True when this backend can build kernels now (its compiler is found)."""

    @abc.abstractmethod
    def key_parts(self, openmp=False):
        """The cache-key parts that belong to this backend: its compiler's
        identity, its flags and its target, as a dict of strings."""

    @abc.abstractmethod
    def headers_digest(self):
        """A hash of every header its kernels include (part of each kernel's key)."""

    @abc.abstractmethod
    def build(self, source, out_path, openmp=False, what=None):
        """Compile ``source`` (a group of kernels, see ``native/assemble.py``) into
        the shared library ``out_path``."""

    @abc.abstractmethod
    def prepare_library(self, lib, kernel):
        """Set up a loaded library for ``kernel`` (global pointers its code reads)."""

    def prepare_process(self, openmp=False):
        """Process-wide set-up before a library is loaded (e.g. the OpenMP runtime)."""

    def keeps_libraries_loaded(self):
        """True when this backend's libraries must never be unloaded once loaded
        (``RTLD_NODELETE``); by default a library goes with its last program."""
        return False

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


_BACKENDS = {}


def register_backend(backend):
    """Register ``backend`` (a :class:`Backend` instance) under ``backend.name``;
    registering a name again replaces the earlier backend."""
    if not isinstance(backend, Backend):
        raise TypeError(f"register_backend: {backend!r} is not a Backend")
    if not isinstance(backend.name, str) or not backend.name:
        raise ValueError(f"register_backend: {type(backend).__name__} has no name")
    _BACKENDS[backend.name] = backend
    return backend


def get_backend(name="cpu"):
    """The backend registered under ``name``; KeyError naming the registered
    ones when there is none."""
    if name == "cpu" and name not in _BACKENDS:
        # the CPU backend registers itself on import; everything needs it
        import symgraph.backends.cpu.backend  # noqa: F401
    try:
        return _BACKENDS[name]
    except KeyError:
        raise KeyError(f"no backend named {name!r} (registered: "
                       f"{sorted(_BACKENDS) or 'none'})") from None


def registered_backends():
    """{name: backend} of every registered backend."""
    return dict(_BACKENDS)
