"""The CUDA backend as the linker sees it (``backends/protocol.py``).

It claims the device nodes (``OnDevice``) and the transfers; everything else
stays with the CPU backend.  With ``gpu.emulate`` its libraries are built by
the host C++ compiler with the emulation header; otherwise nvcc builds them for
the GPU.  Either way its buffers are ``DeviceArray`` objects of the device
memory library (``device_memory.py``), built the same two ways.
"""

import functools
import hashlib
import warnings

from symgraph.backends.cuda import compiler, lowerings
from symgraph.backends.cuda.assemble import assemble_cuda
from symgraph.backends.lowering import lower, lowering_rule
from symgraph.backends.native.allocator import HOST
from symgraph.backends.native.c_sources import C_SRC
from symgraph.backends.protocol import Backend, register_backend
from symgraph.config import ConfigError
from symgraph.ops.device_op import OnDevice
from symgraph.ops.transfer import GpuFromHost, GpuToGpu, HostFromGpu
from symgraph.tensor.gpu_type import register_device_array

__all__ = ["CudaBackend", "CUDA", "NoDeviceError", "ensure_device"]


class NoDeviceError(RuntimeError):
    """device=cuda without a GPU, and without gpu.emulate."""


def _emulated():
    from symgraph.config import config

    return bool(config.gpu.emulate)


class CudaBackend(Backend):
    """CUDA kernels: nvcc on a GPU, the host compiler on the emulated device."""

    name = lowerings.BACKEND

    @property
    def allocator(self):
        """The allocator of the default context's device (with device=cpu, of
        the first context of the flag contexts); nodes get their own device's
        through ``output_allocator``."""
        from symgraph.tensor.gpu_contexts import context_map, default_context

        return self._device_allocator(default_context() or next(iter(context_map()), None))

    def claims(self, node):
        return isinstance(node.op, (OnDevice, GpuFromHost, HostFromGpu, GpuToGpu))

    def _target(self, node):
        """(op, node) the table is asked about: the wrapped op of a device node."""
        if isinstance(node.op, OnDevice):
            inner = node.op.inner_node(node)
            return node.op.op, inner
        return node.op, node

    def has_lowering(self, node):
        return lowering_rule(self._target(node)[0], self.name) is not None

    def lower(self, node):
        return lower(self._target(node)[1], self.name)

    def output_allocator(self, node):
        if isinstance(node.op, HostFromGpu):
            return HOST
        return self._device_allocator(node.outputs[0].type.context_name)

    def step_context(self, node):
        """The allocator whose ``enter`` selects the node's device before its
        step runs: the device of its outputs, or of its input for a copy to
        the host."""
        if isinstance(node.op, HostFromGpu):
            return self._device_allocator(node.inputs[0].type.context_name)
        return self._device_allocator(node.outputs[0].type.context_name)

    def _device_allocator(self, context_name):
        if not _emulated() and _device_count() == 0:
            raise NoDeviceError(_no_device_message())
        from symgraph.backends.cuda.device_memory import allocator

        return allocator(context_name)

    def available(self):
        if _emulated():
            try:
                compiler._cxx()
                return True
            except compiler.CudaCompileError:
                return False
        return compiler.nvcc_path() is not None and _device_count() > 0

    def keeps_libraries_loaded(self):
        """On a GPU, yes: unloading a library unregisters its kernels from the
        CUDA runtime, and a library loaded later at the same address then
        failed its launches with 'named symbol not found' (seen on an H100).
        The emulated device's libraries are plain host code and may go."""
        return not _emulated()

    def key_parts(self, openmp=False):
        if _emulated():
            return {"cuda": "emulated", "compiler": _cxx_version(),
                    "emulator": _emulator_digest()}
        from symgraph.backends.cuda.device import driver_version

        return {"cuda": "nvcc", "compiler": compiler.nvcc_version() or "none",
                "archs": ",".join(compiler.target_archs()), "driver": str(driver_version())}

    def headers_digest(self):
        return _headers_digest()

    def assemble(self, kernels, manifest=()):
        return assemble_cuda(kernels, manifest)

    def build(self, source, out_path, openmp=False, what=None):
        from symgraph.config import config

        if config.gpu.cross_compile:
            compiler.check_with_nvcc(source, out_path.parent, what=what or "CUDA kernels")
        if _emulated():
            compiler.build_emulated(source, out_path, what=what or "CUDA kernels")
        else:
            compiler.build_nvcc(source, out_path, what=what or "CUDA kernels")

    def prepare_library(self, lib, kernel):
        """Set the global pointers of ``kernel.symbols`` (the device memory
        cache's scratch functions) in the loaded library; on the emulated
        device also its emulator's hooks (which device each allocation and
        the calling thread are on, so that its launches refuse another
        device's memory)."""
        import ctypes

        def set_once(name, address_fn):
            cell = ctypes.c_void_p.in_dll(lib, name)
            if not cell.value:
                cell.value = address_fn()

        for name, address_fn in kernel.symbols:
            set_once(name, address_fn)
        if _emulated():
            from symgraph.backends.cuda.device_memory import emulator_hooks

            for name, address in emulator_hooks().items():
                set_once(name, lambda: address)


def _device_count():
    try:
        from symgraph.backends.cuda.device import driver_available
    except ImportError:
        return 0
    return driver_available()


def _no_device_message():
    from symgraph.backends.cuda.device import missing

    from symgraph.config import config
    from symgraph.tensor.gpu_contexts import default_context

    why = missing() or "no usable GPU was found"
    if default_context() is None:
        # device=cpu: the flag contexts asked for the devices
        return (f"the flag contexts={config.contexts} names devices, but {why}; set "
                "gpu.emulate=True to run the generated CUDA on the CPU (the emulated "
                "device), or empty the flag contexts")
    return (f"device=cuda, but {why}; set gpu.emulate=True to run the generated CUDA on the "
            "CPU (the emulated device), or device=cpu")


@functools.lru_cache(maxsize=1)
def _cxx_version():
    import subprocess

    cxx = compiler._cxx()
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    return f"{cxx} {out.splitlines()[0] if out else ''}"


@functools.lru_cache(maxsize=1)
def _emulator_digest():
    return hashlib.sha256(compiler.emulation_header().read_bytes()).hexdigest()[:24]


@functools.lru_cache(maxsize=1)
def _headers_digest():
    digest = hashlib.sha256()
    for path in [C_SRC / "sg_kernel.h", *sorted((C_SRC / "cuda").glob("*.h"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _register_arrays():
    from symgraph.backends.cuda import device_memory
    from symgraph.tensor.gpu_contexts import context_map, default_context

    context = default_context() or next(iter(context_map()), "cuda0")
    emulated = _emulated()

    def put(value, context_name):
        # the device the functions were compiled for, whatever the flags say
        # when they run
        return device_memory.put(value, context_name, emulated)

    def adopt(value, context_name):
        # None: wherever its memory is (cuda0 for memory CUDA ties to no device)
        return device_memory.adopt(value, context_name or "cuda0", emulated,
                                   in_place=context_name is None)

    register_device_array("cuda", [device_memory.device_array_class(context, emulated)],
                          put, device_memory.get, adopt)


def ensure_device(fallback=True):
    """Make the device of the flags usable now: its arrays registered (the
    emulated device's under gpu.emulate).  True when it is; with no GPU and
    no emulation, a clear error, or (``force_device=False`` and ``fallback``)
    a warning, the flag ``device`` set to cpu, and False."""
    from symgraph.config import config

    if not _emulated() and (_device_count() == 0 or compiler.nvcc_path() is None):
        if config.force_device or not fallback:
            raise NoDeviceError(_no_device_message())
        warnings.warn(f"{_no_device_message()}\nforce_device=False: running on the CPU "
                      "instead (the flag device is now cpu, the flag contexts empty).",
                      stacklevel=3)
        config.device = "cpu"
        config.contexts = ""
        return False
    if not config.gpuarray.single_stream:
        raise ConfigError("gpuarray.single_stream=False: symgraph runs every kernel in order "
                          "on one stream (no multi-stream scheduler); leave it True")
    from symgraph.backends.cuda.contexts import check_contexts

    check_contexts()
    _register_arrays()
    _warn_unhonoured_flags()
    return True


@functools.lru_cache(maxsize=1)
def _warn_unhonoured_flags():
    """Theano's GPU flags that symgraph accepts but cannot honour: said once."""
    from symgraph.config import config

    unhonoured = [
        (config.init_gpu_device, "init_gpu_device: device=cuda already moves graphs to the "
                                 "device"),
        (config.gpuarray.cache_path, "gpuarray.cache_path: device kernels are kept in the "
                                     "compile cache (the flag compiledir)"),
        (config.magma.enabled, "magma.enabled: linear algebra runs on the CPU, with "
                               "transfers (no MAGMA)"),
        (config.ctc.root, "ctc.root: symgraph's ctc needs no warp-ctc library"),
    ]
    for value, text in unhonoured:
        if value:
            warnings.warn(f"{text}; the flag has no effect", stacklevel=4)


#: The CUDA backend (registered on import).
CUDA = register_backend(CudaBackend())
