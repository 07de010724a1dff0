"""Building generated CUDA: nvcc for a GPU, the host C++ compiler for the
emulated device, nvcc alone for a cross-compile check.

One source, three builds.  On a GPU, nvcc compiles host glue and kernels into
one shared library (SASS for the architectures of :func:`target_archs`, by
default ``ARCHS``, plus PTX, warnings as errors).  Under ``gpu.emulate`` the
same text is compiled by the host C++ compiler with ``c_src/cuda/sg_cuda_emu.h``
included first, so each CUDA thread runs on the CPU.  ``check_with_nvcc``
compiles host and device code to an object file for one architecture, to
prove the text builds on machines without a GPU.
"""

import os
import shutil
import subprocess
from pathlib import Path

from symgraph.backends.native.c_sources import C_SRC

__all__ = ["CudaCompileError", "cuda_root", "nvcc_path", "nvcc_version", "ARCHS", "target_archs",
           "emulation_header", "build_emulated", "build_nvcc", "check_with_nvcc"]

#: The architectures a GPU build targets (SASS each) and the PTX for later ones.
ARCHS = ("75", "80", "86", "89", "90")
STDERR_CHARS = 6000


class CudaCompileError(RuntimeError):
    """nvcc or the emulation build failed; the message holds the compiler's output."""


def cuda_root():
    """The CUDA installation: the ``cuda.root`` flag, else $CUDA_ROOT/$CUDA_HOME."""
    from symgraph.config import config

    if config.source("cuda.root") != "default":
        return Path(config.cuda.root)
    for name in ("CUDA_ROOT", "CUDA_HOME"):
        if os.environ.get(name):
            return Path(os.environ[name])
    return Path(config.cuda.root)


def nvcc_path():
    """nvcc of :func:`cuda_root` (never the one PATH gives: it may be a wrapper
    that derives the wrong root), or None."""
    path = cuda_root() / "bin" / "nvcc"
    return path if path.is_file() else None


def nvcc_version():
    """nvcc's version line (part of the cache key), or None without nvcc."""
    nvcc = nvcc_path()
    if nvcc is None:
        return None
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if "release" in line]
    return lines[-1].strip() if lines else out.stdout.strip()


def emulation_header():
    """The emulation header included before emulated builds."""
    return C_SRC / "cuda" / "sg_cuda_emu.h"


def _run(command, what, source_path):
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    if proc.returncode != 0:
        output = (proc.stderr or proc.stdout)[-STDERR_CHARS:]
        raise CudaCompileError(f"building {what} failed ({source_path}):\n{output}")


def _cxx():
    from symgraph.config import config

    for name in (config.cxx or "g++", "g++", "c++"):
        found = shutil.which(name)
        if found:
            return found
    raise CudaCompileError("no C++ compiler for the emulated device (set the flag cxx)")


def _includes(include_dirs):
    flags = []
    for directory in include_dirs:
        flags += ["-I", directory]
    return flags


def build_emulated(source, out_path, what="CUDA kernels", include_dirs=()):
    """Compile CUDA ``source`` for the CPU (the emulated device) into
    ``out_path``: the emulator's build (``emulator.build_emulated``: the same
    adaptations of CUDA that C++ cannot spell), at -O1 (generated libraries
    are many and small: compile time counts more than speed there), with
    ``c_src/`` on the include path and no kernel entry points (the runtime
    calls the library's host functions, which launch)."""
    from symgraph.backends.cuda.emulator import EmulatedCompileError
    from symgraph.backends.cuda.emulator import build_emulated as build

    try:
        build(source, out_path, include_dirs=(C_SRC, *include_dirs), kernels={},
              extra_flags=("-O1", "-w"))
    except EmulatedCompileError as exc:
        raise CudaCompileError(f"building {what} for the emulated device failed: {exc}") \
            from None


def _nvcc_or_fail():
    nvcc = nvcc_path()
    if nvcc is None:
        raise CudaCompileError(f"nvcc not found under {cuda_root()} (set the flag cuda.root)")
    return nvcc


def target_archs():
    """The architectures a GPU build makes SASS for, after the flag ``nvcc.archs``:
    ``common`` is :data:`ARCHS`; ``native`` the devices the driver sees (one
    build for one GPU is several times faster than five); else the flag's list.
    PTX is added for the last of them, so later GPUs can run the library too."""
    from symgraph.config import config

    value = str(config.nvcc.archs)
    if value == "common":
        return ARCHS
    if value == "native":
        from symgraph.backends.cuda.device import compute_capabilities

        found = tuple(sorted(set(compute_capabilities()), key=lambda a: (len(a), a)))
        if not found:
            raise CudaCompileError("nvcc.archs=native needs a GPU the driver sees, and it "
                                   "sees none; name the architectures (nvcc.archs=80,90) "
                                   "or use nvcc.archs=common")
        return found
    return tuple(value.split(","))


def _gencode():
    flags = []
    archs = target_archs()
    for arch in archs:
        flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    flags += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    return flags


def _nvcc_flags():
    from symgraph.config import config

    return str(config.nvcc.flags).split()


#: Host-compiler flags of every nvcc build.  Error messages are formatted
#: with snprintf into a fixed buffer and cut short by design; GCC with
#: _FORTIFY_SOURCE (Ubuntu's default) calls that a possible truncation, which
#: -Werror would make fatal.
HOST_FLAGS = ("-Xcompiler", "-Wno-format-truncation")

#: What the cross-compile check adds: the host settings that some
#: distributions' GCC applies by default (Ubuntu's: _FORTIFY_SOURCE, which
#: brings warnings of its own), so a check here fails where a build there
#: would.  Undefined first: where the compiler defines it already, defining
#: it again would be a warning of its own.
CHECK_HOST_FLAGS = ("-Xcompiler", "-U_FORTIFY_SOURCE,-D_FORTIFY_SOURCE=2")


def build_nvcc(source, out_path, what="CUDA kernels", include_dirs=()):
    """Compile CUDA ``source`` with nvcc into the shared library ``out_path``.

    Every library links the shared CUDA runtime (found through an rpath to
    the toolkit), so the kernels' libraries and the memory library share one
    runtime, its device selection and its error state."""
    out_path = Path(out_path)
    src = out_path.with_suffix(".cu")
    src.write_text(source)
    lib_dir = cuda_root() / "lib64"
    command = [_nvcc_or_fail(), "-shared", "-Xcompiler", "-fPIC", "-O3", "-Werror",
               "all-warnings", "-cudart", "shared", "-Xlinker", f"-rpath={lib_dir}",
               *HOST_FLAGS, "-I", C_SRC, *_includes(include_dirs), *_gencode(), *_nvcc_flags(),
               "-x", "cu", src, "-o", out_path]
    _run(command, what, src)


def check_with_nvcc(source, work_dir, arch="90", what="CUDA kernels"):
    """Compile ``source``'s host and device code to an object file for one
    architecture (no GPU needed): nvcc's and the host compiler's verdict on
    the generated text, warnings as errors, at the optimization of a real
    build (some of GCC's warnings appear only there)."""
    work_dir = Path(work_dir)
    src = work_dir / "check.cu"
    src.write_text(source)
    command = [_nvcc_or_fail(), "-c", "-Xcompiler", "-fPIC", "-O3", f"-arch=sm_{arch}",
               "-Werror", "all-warnings", *HOST_FLAGS, *CHECK_HOST_FLAGS, "-I", C_SRC,
               "-x", "cu", src, "-o", work_dir / "check.o"]
    _run(command, what, src)
    return work_dir / "check.o"
