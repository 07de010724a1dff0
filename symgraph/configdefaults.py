"""The declaration of every configuration flag (Theano's ``configdefaults``).

Imported by :mod:`symgraph.config` once its registry exists and before the
``config`` singleton reads rc files and ``SYMGRAPH_FLAGS``, so every flag is
known when they are checked.  Add new flags here.
"""

import re
import shutil
import sys
import sysconfig

from symgraph.config import (BoolParam, ContextsParam, DeviceParam, EnumParam, FloatParam,
                             IntParam, PathParam, StrParam, add_flag)


def _default_compiledir():
    # one folder per platform and Python, so two interpreters never load each other's
    # extension modules
    plat = re.sub(r"[^\w.-]", "_", sysconfig.get_platform())
    return "~/.cache/symgraph/compiledir_%s-py%d.%d" % ((plat,) + sys.version_info[:2])


_META_ALGOS = ("guess_once", "guess_on_shape_change", "time_once", "time_on_shape_change")
_BWD_ALGOS = ("none", "deterministic", "fft", "small") + _META_ALGOS

add_flag("device", "Where computations run: cpu, or a CUDA GPU.", DeviceParam("cpu"),
         in_c_key=True)
add_flag("contexts", "Theano's context map, dev0->cuda0;dev1->cuda1: names for several "
         "devices of one process, used as shared(value, target='dev0') and x.transfer('dev1'); "
         "with device=cpu, only what the graph puts on a context runs there.",
         ContextsParam(""), in_c_key=True)
add_flag("floatX", "Dtype of floats made without an explicit dtype.",
         EnumParam("float64", "float32", "float16"), in_c_key=True)
add_flag("warn_float64", "What to do when a float64 variable is created.",
         EnumParam("ignore", "warn", "raise"))
add_flag("mode", "Default compilation mode of symgraph.function.",
         EnumParam("FAST_RUN", "FAST_COMPILE", "DebugMode", "NanGuardMode"))
add_flag("linker", "Default linker: c, py, c|py (C where possible, else Python), vm.",
         EnumParam("c|py", "c", "py", "vm"))
add_flag("optimizer", "Default rewrite set; None applies no rewrites.",
         EnumParam("fast_run", "fast_compile", "merge", "None"))
add_flag("optimizer_including", "Extra rewrite tags to include, colon separated.", StrParam(""))
add_flag("optimizer_excluding", "Rewrite tags to exclude, colon separated.", StrParam(""))
add_flag("optimizer_verbose", "Print each rewrite applied and the node it replaced.",
         BoolParam(False))
add_flag("on_opt_error", "What to do when a rewrite raises.",
         EnumParam("warn", "raise", "ignore"))
add_flag("on_unused_input", "What to do when a function input is not used.",
         EnumParam("raise", "warn", "ignore"))
add_flag("compiledir", "Per-user folder of the compile cache.", PathParam(_default_compiledir))
add_flag("compile_cache_size_mb", "Size cap of the compile cache, in MiB.", IntParam(2048, min=0))
add_flag("compile_no_compile", "Make any compilation an error (proves a warm cache).",
         BoolParam(False))
add_flag("compile_warm_start", "Keep each compiled function's optimized graph and schedule "
         "in the compile cache, keyed by the user's graph, flags and versions, and restore "
         "it in later processes without rewriting or generating code.", BoolParam(True))
# Not in the key by its text: the compiler's signature (its resolved path and
# version) is, so a cache filled with g++ on PATH still serves a process that
# finds no compiler (cpu.backend.compiler_identity).
add_flag("cxx", "C++ compiler command; empty means no C code (Python only).",
         StrParam(lambda: shutil.which("g++") or ""))
add_flag("gcc.cxxflags", "Extra flags passed to the C++ compiler.", StrParam(""), in_c_key=True)
# Threads: docs/threads.md (how many, the BLAS pool, waiting).  Off: one thread.
add_flag("openmp", "Run kernels on OpenMP threads (as many as the process is given; "
         "off: one thread, BLAS included).", BoolParam(True), in_c_key=True)
# The thresholds are compiled into the kernels, so they are part of the key.  Each
# is the size (elements; convolution: multiply-adds) from which two threads beat
# one, measured per op family (docs/threads.md has the measurements).
add_flag("openmp_elemwise_minsize", "Smallest element-wise size run on OpenMP threads.",
         IntParam(16384, min=0), in_c_key=True)
add_flag("openmp_reduce_minsize", "Smallest reduction input run on OpenMP threads.",
         IntParam(262144, min=0), in_c_key=True)
add_flag("openmp_softmax_minsize", "Smallest softmax (and its gradient) run on OpenMP "
         "threads.", IntParam(32768, min=0), in_c_key=True)
add_flag("openmp_pool_minsize", "Smallest pooling input run on OpenMP threads.",
         IntParam(65536, min=0), in_c_key=True)
add_flag("openmp_conv_minsize", "Smallest convolution (multiply-adds) run on OpenMP threads "
         "(read when a convolution kernel is linked).", IntParam(32768, min=0))
add_flag("openmp_batchnorm_minsize", "Smallest batch norm input run on OpenMP threads.",
         IntParam(131072, min=0), in_c_key=True)
add_flag("exception_verbosity", "How much graph detail errors print.", EnumParam("low", "high"))
add_flag("traceback.limit", "Stack frames kept per node for errors; -1 keeps all.",
         IntParam(8, min=-1))
add_flag("profile", "Profile compiled functions (f.profile).", BoolParam(False))
add_flag("profile_optimizer", "Profile the rewrite phases.", BoolParam(False))
add_flag("nan_guard.nan_is_error", "NanGuardMode: a NaN is an error.", BoolParam(True))
add_flag("nan_guard.inf_is_error", "NanGuardMode: an Inf is an error.", BoolParam(True))
add_flag("nan_guard.big_is_error", "NanGuardMode: a huge value is an error.", BoolParam(True))
add_flag("dnn.enabled", "Use cuDNN: auto (if found), True (must), False (never).",
         EnumParam("auto", "True", "False"), in_c_key=True)
add_flag("dnn.include_path", "Folder holding cudnn.h; empty means search.", StrParam(""),
         in_c_key=True)
add_flag("dnn.library_path", "Folder holding libcudnn; empty means search.", StrParam(""),
         in_c_key=True)
add_flag("dnn.conv.algo_fwd", "Forward convolution algorithm.",
         EnumParam("small", "none", "large", "fft", "fft_tiling", "winograd", *_META_ALGOS),
         in_c_key=True)
# The backward defaults are "small" like the forward's, not Theano's "none":
# Theano's "none" was cuDNN's algorithm 0, fast on a GPU; symgraph's "none" is
# the direct loop, which takes about 12 times as long as the tiled implicit GEMM
# for the filter gradient of a typical layer (docs/nnet.md).
add_flag("dnn.conv.algo_bwd_data", "Algorithm of the convolution gradient wrt inputs.",
         EnumParam("small", *_BWD_ALGOS, "fft_tiling"), in_c_key=True)
add_flag("dnn.conv.algo_bwd_filter", "Algorithm of the convolution gradient wrt weights.",
         EnumParam("small", *_BWD_ALGOS), in_c_key=True)
# a shorthand: its effect is fully in the two flags it sets, so it stays out of the key
add_flag("dnn.conv.algo_bwd", "Sets both dnn.conv.algo_bwd_data and algo_bwd_filter.",
         EnumParam("small", *_BWD_ALGOS),
         sets=("dnn.conv.algo_bwd_data", "dnn.conv.algo_bwd_filter"))
add_flag("dnn.conv.precision", "Convolution accumulation dtype; as_input_f32 uses float32 "
         "for float16 inputs.", EnumParam("as_input_f32", "as_input", "float16", "float32",
                                          "float64"), in_c_key=True)
add_flag("dnn.conv.workmem_bytes", "Workspace limit of convolution algorithms; 0 is none.",
         IntParam(0, min=0), in_c_key=True)
add_flag("cuda.root", "CUDA installation folder (nvcc, headers).", StrParam("/usr/local/cuda"),
         in_c_key=True)
add_flag("nvcc.flags", "Extra flags passed to nvcc.", StrParam(""), in_c_key=True)


class _ArchsParam(StrParam):
    """``common``, ``native`` or a comma list of compute capabilities (``80,90``)."""

    def convert(self, value):
        value = super().convert(value).lower().replace(" ", "")
        if value in ("common", "native") or re.fullmatch(r"\d{2,3}[af]?(,\d{2,3}[af]?)*", value):
            return value
        raise ValueError("not common, native or a comma list of compute capabilities")

    def allowed(self):
        return "common, native, or compute capabilities such as 80,90"


add_flag("nvcc.archs", "The GPU architectures nvcc builds machine code for: common (those "
         "of the CUDA backend's ARCHS, plus PTX for later ones), native (the GPUs this "
         "machine has: a build several times faster, for those GPUs alone), or a list "
         "such as 80,90.", _ArchsParam("common"))
add_flag("gpu.cross_compile", "Build CUDA modules with nvcc without running them.",
         BoolParam(False))
add_flag("gpu.emulate", "With device=cuda: run the generated CUDA on the CPU through the "
         "emulation header (machines without a GPU); the graph is the one a GPU gets.",
         BoolParam(False), in_c_key=True)
add_flag("gpu.emulate_devices", "With gpu.emulate: how many devices the emulated device "
         "offers (cuda0 to cuda<n-1>), each with its own memory cache and counters.",
         IntParam(2, min=1, max=16))
add_flag("gpu.cublas", "Matrix products on the device through cuBLAS where it is installed "
         "(the emulated device has a stand-in with cuBLAS's conventions); False: symgraph's "
         "own tiled kernels.", BoolParam(True), in_c_key=True)
add_flag("force_device", "With device=cuda and no usable GPU: True raises an error; False "
         "warns and runs on the CPU (Theano's default).", BoolParam(True))
add_flag("print_active_device", "Print the device's name to stderr when it is first used.",
         BoolParam(True))
add_flag("init_gpu_device", "Theano's way to use a GPU with device=cpu; symgraph moves "
         "graphs with device=cuda only, so a value here warns.", StrParam(""))
add_flag("gpuarray.preallocate", "Device memory cache: 0 grows on demand; -1 turns it off "
         "(every free goes back to the device); a fraction <= 1 of the device's memory or a "
         "number of megabytes is reserved when the device is first used.",
         FloatParam(0.0, min=-1.0))
add_flag("gpuarray.sched", "How the host waits for the device: default (the driver "
         "chooses), single (spins: fastest, keeps a core busy), multi (sleeps: for processes "
         "sharing cores).", EnumParam("default", "single", "multi"))
add_flag("gpuarray.single_stream", "Kernels run in order on one stream; False is refused "
         "(symgraph has no multi-stream scheduler).", BoolParam(True))
add_flag("gpuarray.cache_path", "Theano's kernel cache folder; symgraph keeps device kernels "
         "in the compile cache (compiledir), so a value here warns.", StrParam(""))
add_flag("dnn.conv.workmem", "Theano's deprecated name: sets dnn.conv.algo_fwd.",
         EnumParam("small", "none", "large"), sets=("dnn.conv.algo_fwd",))
add_flag("dnn.conv.workmem_bwd", "Theano's deprecated name: sets dnn.conv.algo_bwd.",
         EnumParam("none", "deterministic", "fft", "small"),
         sets=("dnn.conv.algo_bwd_data", "dnn.conv.algo_bwd_filter"))
add_flag("magma.enabled", "Theano's MAGMA linear algebra on the GPU; symgraph runs linear "
         "algebra on the CPU, so True warns.", BoolParam(False))
add_flag("magma.include_path", "Folder holding MAGMA's headers (see magma.enabled).",
         StrParam(""))
add_flag("magma.library_path", "Folder holding MAGMA's library (see magma.enabled).",
         StrParam(""))
add_flag("ctc.root", "Theano's warp-ctc folder; symgraph's ctc needs no library, so a value "
         "here warns.", StrParam(""))
add_flag("assert_no_cpu_op", "With device=cuda: what to do about nodes left on the CPU "
         "(ignore, warn, raise).", EnumParam("ignore", "warn", "raise"))
add_flag("deterministic", "more: prefer deterministic (slower) implementations.",
         EnumParam("default", "more"))

# Theano 1.0's flags that symgraph had not declared under their own names.
from symgraph import configdefaults_theano  # noqa: E402,F401
