"""The emulated CUDA device: CUDA source built for the CPU and launched through ctypes.

``build_emulated(source, out_path)`` compiles a CUDA translation unit with the
host C++ compiler and ``c_src/cuda/sg_cuda_emu.h`` (each CUDA thread a fiber,
blocks one after another); ``EmulatedModule(out_path).launch(...)`` runs one of
its kernels with cuLaunchKernel's conventions (grid, block, dynamic shared
bytes, arguments), so the same call sites can later drive a real GPU. Emulated
device memory is host memory: NumPy arrays are passed by their data pointers.

The source stays valid CUDA: what C++ cannot spell is adapted here, at build
time (``extern __shared__`` arrays, the per-kernel C entry points), never by
the author of the kernels. Where the build folder comes from (the compile cache)
is the caller's business.
"""

import ctypes
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from symgraph.backends.cuda.compiler import CudaCompileError, _cxx, emulation_header

__all__ = ["ABI_VERSION", "EmulatedCompileError", "EmulatedLaunchError", "EmulatedModule",
           "build_emulated", "emulation_source", "kernel_names"]

#: The version of the entry points' ABI (``cuda_emu_abi_version()`` in the header).
ABI_VERSION = 1
STDERR_CHARS = 8000
MAX_PARAMS = 256

#: Flags of every emulated build. ``-fno-strict-aliasing``: CUDA code type-puns
#: through pointer casts (``reinterpret_cast<float4 *>``), which nvcc tolerates.
CXX_FLAGS = ("-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-fno-strict-aliasing",
             "-DSG_CUDA_EMULATED")


class EmulatedCompileError(CudaCompileError):
    """The host compiler rejected an emulated build; the message holds its output."""


class EmulatedLaunchError(RuntimeError):
    """A launch on the emulated device failed (bad configuration, barrier
    divergence, ``__trap``, a device-side ``assert``...). ``code`` is the CUDA
    error number; ``kernel`` the kernel's name; the message is the emulator's."""

    def __init__(self, kernel, code, message):
        super().__init__(f"{message} (CUDA error {code})")
        self.kernel = kernel
        self.code = code


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_EXTERN_SHARED = re.compile(
    r"\bextern\s+__shared__\s+(?:__align__\s*\(\s*\w+\s*\)\s*)?"
    r"(?P<type>[A-Za-z_][\w:<>,\s]*?)\s*(?:__align__\s*\(\s*\w+\s*\)\s*)?"
    r"\b(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;")
_KERNEL = re.compile(
    r"\b__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*|static\s+|inline\s+)*void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(?P<name>[A-Za-z_]\w*)\s*\(")


def _strip_comments(source):
    # Keep the newlines, so that positions and line numbers stay meaningful.
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), source)


def kernel_names(source):
    """The names of the non-template ``__global__`` functions of ``source``, in
    order. A template kernel needs an explicit ``CUDA_EMU_EXPORT_AS(name, k<T>)``."""
    text = _strip_comments(source)
    names = []
    for match in _KERNEL.finditer(text):
        before = text[:match.start()].rstrip()
        # `template <...> __global__ void k(` : not launchable without its arguments.
        if before.endswith(">") and "template" in before[before.rfind(";") + 1:]:
            continue
        if match.group("name") not in names:
            names.append(match.group("name"))
    return names


def emulation_source(source, kernels=None):
    """``source`` as the emulated build compiles it: each ``extern __shared__
    T name[];`` becomes a reference to the launch's dynamic shared memory (C++
    has no such declaration), and an entry point is appended for each kernel
    not exported already. ``kernels``: kernel names, or a mapping from the name
    to launch by to a C++ expression for the kernel (``{"scale_f32":
    "scale<float>"}`` for a template instance); default :func:`kernel_names`.
    Line numbers are kept, so compiler messages point into the original text."""
    def shared(match):
        newlines = match.group().count("\n")
        kind = " ".join(match.group("type").split())
        return f"CUDA_EMU_EXTERN_SHARED({kind}, {match.group('name')});" + "\n" * newlines

    text = _EXTERN_SHARED.sub(shared, source)
    if kernels is None:
        kernels = kernel_names(source)
    if not isinstance(kernels, dict):
        kernels = {name: name for name in kernels}
    exported = set(re.findall(r"CUDA_EMU_EXPORT(?:_AS)?\s*\(\s*(\w+)", _strip_comments(source)))
    exports = [f"CUDA_EMU_EXPORT_AS({name}, {expr})" for name, expr in kernels.items()
               if name not in exported]
    if exports:
        text = (text.rstrip("\n") + "\n\n// entry points of the emulated build\n"
                + "\n".join(exports) + "\n")
    return text


def build_emulated(source, out_path, include_dirs=(), kernels=None, extra_flags=()):
    """Compile the CUDA ``source`` for the CPU into the shared library
    ``out_path`` (its folder is created). ``kernels``: the kernels to export,
    as for :func:`emulation_source` (default: every non-template
    ``__global__`` function). The library appears whole or not at all
    (written aside, then renamed), so concurrent builders and readers never see
    a partial file. ``extra_flags`` follow the standard flags (a sanitizer,
    ``-DCUDA_EMU_FAST_SWITCH=0``...). Returns ``out_path`` as a Path; raises
    :class:`EmulatedCompileError` with the compiler's output on failure (the
    source as compiled is left next to ``out_path``, as ``<stem>.emu.cu``)."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    src = out_path.with_name(out_path.stem + ".emu.cu")
    # Private names while building, renamed when done: concurrent builds of
    # the same library (test workers, processes) never read each other's halves.
    fd, tmp_src = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.stem}.", suffix=".cu")
    with os.fdopen(fd, "w") as f:
        # Messages (the compiler's, the emulator's) name the kept file, at the
        # lines of the caller's source.
        f.write(f'#line 1 "{src.name}"\n' + emulation_source(source, kernels))
    tmp = Path(tmp_src).with_suffix(".so")
    command = [_cxx(), *CXX_FLAGS, "-include", str(emulation_header())]
    for directory in include_dirs:
        command += ["-I", str(directory)]
    command += [*extra_flags, "-x", "c++", tmp_src, "-o", str(tmp)]
    proc = subprocess.run(command, capture_output=True, text=True)
    os.replace(tmp_src, src)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        output = (proc.stderr or proc.stdout)[-STDERR_CHARS:]
        raise EmulatedCompileError(
            f"building {src.name} for the emulated device failed:\n{output}")
    os.replace(tmp, out_path)
    return out_path


def _dims(value, what):
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise TypeError(f"{what} must be an int or 1 to 3 ints, not {value!r}")
    if any(d < 0 or d > 0xFFFFFFFF for d in dims):
        raise ValueError(f"{what} {value!r} has a dimension out of range")
    return (ctypes.c_uint * 3)(*dims, *(1,) * (3 - len(dims)))


def _argument(value, index):
    """A ctypes object holding kernel argument ``index``."""
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            raise ValueError(f"argument {index}: a kernel gets a bare pointer, so the array "
                             f"must be C-contiguous (pass np.ascontiguousarray(a))")
        return ctypes.c_void_p(value.ctypes.data)
    if isinstance(value, np.generic):
        return np.ctypeslib.as_ctypes_type(value.dtype)(value.item())
    if isinstance(value, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array)):
        return value
    raise TypeError(f"argument {index}: {type(value).__name__} has no fixed C type; pass a ctypes "
                    f"value (ctypes.c_int(3)), a NumPy scalar (np.float32(2)) or an ndarray")


class _Kernel:
    """One exported kernel: its entry point and its parameters' sizes."""

    def __init__(self, lib, name):
        try:
            self.entry = getattr(lib, f"sg_emu_launch_{name}")
            sizes_of = getattr(lib, f"sg_emu_params_{name}")
        except AttributeError:
            raise KeyError(f"no kernel {name!r} in the library (only non-template __global__ "
                           f"functions are exported by default; see CUDA_EMU_EXPORT_AS)") from None
        self.entry.restype = ctypes.c_int
        self.entry.argtypes = (ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
                               ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p))
        sizes = (ctypes.c_size_t * MAX_PARAMS)()
        sizes_of.restype = ctypes.c_int
        count = sizes_of(sizes, MAX_PARAMS)
        self.sizes = tuple(sizes[:min(count, MAX_PARAMS)])


class EmulatedModule:
    """A library built by :func:`build_emulated`, loaded: its kernels launch on
    the CPU with :meth:`launch`. Launches are synchronous."""

    def __init__(self, path):
        self.path = Path(path)
        # RTLD_LOCAL (ctypes' default): each library keeps its own emulator state.
        self._lib = ctypes.CDLL(str(self.path))
        try:
            version = self._lib.cuda_emu_abi_version()
        except AttributeError:
            raise ImportError(f"{self.path} was not built with the emulation header") from None
        if version != ABI_VERSION:
            raise ImportError(f"{self.path} has emulator ABI {version}; this symgraph expects "
                              f"{ABI_VERSION} (rebuild it)")
        self._last_error = self._lib.cuda_emu_last_error
        self._last_error.restype = ctypes.c_char_p
        self._kernels = {}

    def kernel_params(self, kernel_name):
        """The byte sizes of ``kernel_name``'s parameters."""
        return self._kernel(kernel_name).sizes

    def _kernel(self, name):
        if name not in self._kernels:
            self._kernels[name] = _Kernel(self._lib, name)
        return self._kernels[name]

    def launch(self, kernel_name, grid, block, args, shared_bytes=0):
        """Run ``kernel_name`` over ``grid`` blocks of ``block`` threads (each an
        int or up to 3 ints) with ``shared_bytes`` of dynamic shared memory.
        ``args`` are ctypes values, NumPy scalars or C-contiguous ndarrays (their
        data pointers), checked against the kernel's parameter count and sizes.
        Raises :class:`EmulatedLaunchError` when the launch fails."""
        kernel = self._kernel(kernel_name)
        if shared_bytes < 0:
            raise ValueError(f"shared_bytes must be >= 0, not {shared_bytes}")
        values = [_argument(value, i) for i, value in enumerate(args)]
        if len(values) != len(kernel.sizes):
            raise TypeError(f"{kernel_name} takes {len(kernel.sizes)} arguments, "
                            f"{len(values)} given")
        for i, (value, size) in enumerate(zip(values, kernel.sizes)):
            if ctypes.sizeof(value) != size:
                raise TypeError(f"{kernel_name} argument {i}: the parameter has {size} bytes, "
                                f"the value {ctypes.sizeof(value)} ({value!r})")
        params = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        code = kernel.entry(_dims(grid, "grid"), _dims(block, "block"), int(shared_bytes), params)
        if code != 0:
            message = self._last_error().decode(errors="replace")
            raise EmulatedLaunchError(kernel_name, code, message)
