"""The native CPU backend as the linker sees it (``backends/protocol.py``):
gcc builds the kernels, the shared support library and the convolution
library give them their helpers, host memory holds their buffers."""

import functools
import hashlib

from symgraph.backends.cpu import compiler
from symgraph.backends.cpu import lowerings  # noqa: F401  (registers the lowering table)
from symgraph.backends.native.allocator import HOST
from symgraph.backends.native.c_sources import C_SRC
from symgraph.backends.protocol import Backend, register_backend

__all__ = ["CpuBackend", "CPU", "compiler_identity"]


class CpuBackend(Backend):
    """C kernels compiled by the host's C compiler into shared libraries."""

    name = lowerings.BACKEND
    allocator = HOST

    def available(self):
        from symgraph.config import config

        try:
            return bool(config.cxx) and compiler.compiler_command() is not None
        except Exception:  # noqa: BLE001 - any failure to find it means "not available"
            return False

    def key_parts(self, openmp=False):
        signature = compiler_identity()
        return {"compiler": signature,
                "flags": " ".join(compiler.base_flags(openmp,
                                                      clang="clang" in signature.lower())),
                "cpu": compiler.cpu_signature()}

    def headers_digest(self):
        return _headers_digest()

    def build(self, source, out_path, openmp=False, what=None):
        compiler.compile_library(source, out_path, openmp=openmp, what=what)

    def prepare_library(self, lib, kernel):
        """Point the library's ``sg_sup`` at the support table and set the
        global pointers of ``kernel.symbols``; a pointer the library does not
        define is one the shared helpers call (BLAS), set in the support library."""
        import ctypes

        from symgraph.backends.cpu.support_lib import bind_library, set_support_symbol

        bind_library(lib)
        for name, address_fn in kernel.symbols:
            try:
                cell = ctypes.c_void_p.in_dll(lib, name)
            except ValueError:
                if set_support_symbol(name, address_fn):
                    continue
                raise
            if not cell.value:
                cell.value = address_fn()

    def prepare_process(self, openmp=False):
        from symgraph.backends.native.threads import sync_enabled

        if openmp:
            compiler.prepare_openmp_environment()
        sync_enabled()      # the openmp flag now: symgraph's BLAS products follow it


@functools.lru_cache(maxsize=1)
def _headers_digest():
    """A hash of every header in c_src/ and its folders (``*.h``, and the ``*.inc``
    templates they include): kernels include them, so they are part of every
    kernel's key (editing sg_kernel.h or an algorithm must not reuse stale builds)."""
    from symgraph.backends.cpu.support_lib import current_source_hash

    digest = hashlib.sha256()
    for path in sorted(C_SRC.rglob("*")):
        if path.suffix in (".h", ".inc") and path.is_file():
            name = path.relative_to(C_SRC).as_posix()
            digest.update(name.encode() + b"\0" + path.read_bytes())
    # The generated support header (support_lib.py) is included by kernels too.
    digest.update(b"support\0" + current_source_hash().encode())
    return digest.hexdigest()


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


#: The CPU backend (registered on import).
CPU = register_backend(CpuBackend())
