"""Theano 1.0's configuration flags that symgraph did not have under their own names.

A Theano program ports by changing its imports, and its ``THEANO_FLAGS`` and
``.theanorc`` port by changing their names: so every flag of Theano's ``config.txt``
is declared, with Theano's name, type and accepted values.  Where symgraph has the
mechanism the flag drives it (test values, NumPy's error state around calls, the
profiler's tables, NanGuardMode's defaults, the compile cache's folder, the
rewrites a mode requires, shape-inference errors).  Where symgraph has no such
mechanism the flag is accepted and documented (``docs/theano_compat.md``), and a
value that would ask for something symgraph cannot do raises or warns when it is
set, not later.

Imported by :mod:`symgraph.configdefaults`, so these flags are declared before the
``config`` singleton reads rc files and ``SYMGRAPH_FLAGS``.
"""

import os
import platform
import sys
import sysconfig
import warnings
from collections.abc import Mapping

import numpy as np

from symgraph.config import BoolParam, EnumParam, IntParam, Param, StrParam, add_flag
from symgraph.version import __version__

__all__ = ["numpy_errstate", "elemwise_errstate", "effective_compiledir", "compiledir_format_values"]

_TEST_VALUE_MODES = ("off", "ignore", "warn", "raise", "pdb")
_SETERR = ("ignore", "warn", "raise", "call", "print", "log")


class _RefusedEnum(EnumParam):
    """An enum whose ``refused`` values are Theano's but not honoured by symgraph:
    setting one raises, with ``reason`` saying why, so the program learns it at the
    line that sets the flag rather than through different numbers later."""

    def __init__(self, default, allowed, refused, reason):
        super().__init__(default, *allowed)
        self.refused, self.reason = tuple(refused), reason

    def convert(self, value):
        text = value if isinstance(value, str) else str(value)
        if text.strip() in self.refused:
            raise ValueError(self.reason)
        return super().convert(value)


class _WarnIfSet(Param):
    """A flag symgraph accepts but has nothing to apply to: any value other than
    ``default`` warns once per value, saying what symgraph does instead."""

    def __init__(self, inner, message):
        super().__init__(inner.default)
        self.inner, self.message, self.kind = inner, message, inner.kind
        self._warned = set()

    def convert(self, value):
        converted = self.inner.convert(value)
        if converted != self.inner.convert(self.inner.default) and \
                converted not in self._warned:
            self._warned.add(converted)
            warnings.warn(self.message, UserWarning, stacklevel=4)
        return converted

    def allowed(self):
        return self.inner.allowed()


class _FalseOnly(BoolParam):
    """A boolean whose True asks for what symgraph cannot do: True raises ``reason``."""

    def __init__(self, reason):
        super().__init__(False)
        self.reason = reason

    def convert(self, value):
        if super().convert(value):
            raise ValueError(self.reason)
        return False

    def allowed(self):
        return "False"


# -- test values ------------------------------------------------------------------

add_flag("compute_test_value", "Evaluate each new node on its inputs' tag.test_value as "
         "the graph is built (off, ignore: skip nodes lacking one, warn, raise, pdb).",
         EnumParam("off", *_TEST_VALUE_MODES))
add_flag("compute_test_value_opt", "compute_test_value for the nodes that rewrites build "
         "while a function is compiled.", EnumParam("off", *_TEST_VALUE_MODES))
add_flag("print_test_value", "repr() of a variable shows its test value too.",
         BoolParam(False))

# -- NumPy's error state ----------------------------------------------------------

add_flag("numpy.seterr_all", "NumPy's error handling for every kind, set around each call "
         "of a compiled function; None leaves the program's own state (numpy.seterr).",
         EnumParam("None", *_SETERR))
for _kind in ("divide", "over", "under", "invalid"):
    add_flag(f"numpy.seterr_{_kind}", f"NumPy's handling of {_kind} errors around calls of "
             "compiled functions; None takes numpy.seterr_all.", EnumParam("None", *_SETERR))


_SETERR_FLAGS = (("all", "numpy.seterr_all"), ("divide", "numpy.seterr_divide"),
                 ("over", "numpy.seterr_over"), ("under", "numpy.seterr_under"),
                 ("invalid", "numpy.seterr_invalid"))


def numpy_errstate():
    """The keyword arguments of ``numpy.errstate`` that the ``numpy.seterr_*`` flags
    ask for, or None when they leave NumPy's state to the program."""
    # Read on every call of every compiled function, so the registry's state is
    # read directly: Config.get would cost several times the C fast path itself.
    if not _CONFIG:
        from symgraph.config import config

        _CONFIG.append(config)
    state = _CONFIG[0]._state  # every declared flag is in it (Config.reload)
    if state["numpy.seterr_all"][0] == "None" and state["numpy.seterr_divide"][0] == \
            "None" and state["numpy.seterr_over"][0] == "None" and \
            state["numpy.seterr_under"][0] == "None" and \
            state["numpy.seterr_invalid"][0] == "None":
        return None
    return {kind: state[name][0] for kind, name in _SETERR_FLAGS
            if state[name][0] != "None"}


_CONFIG = []  # the process's Config, once symgraph.config has built it


def elemwise_errstate():
    """``numpy.errstate`` arguments for an element-wise op's NumPy ``perform``:
    quiet, as the generated C loops are (NaN and Inf propagate), except for the
    kinds that the ``numpy.seterr_*`` flags set.  Theano's Python ops obeyed
    NumPy's error state and its C code never raised; so are symgraph's."""
    state = numpy_errstate()
    return {"all": "ignore"} if state is None else {"all": "ignore", **state}


# -- NanGuardMode, DebugMode, profiling ---------------------------------------------

for _what in ("nan", "inf", "big"):
    add_flag(f"NanGuardMode.{_what}_is_error", f"Theano's name of nan_guard.{_what}_is_error "
             "(setting it sets that flag).", BoolParam(True),
             sets=(f"nan_guard.{_what}_is_error",))

add_flag("DebugMode.check_preallocated_output", "Theano's checks of ops writing into "
         "preallocated buffers; symgraph's ops allocate their outputs, so only '' applies.",
         _WarnIfSet(StrParam(""), "DebugMode.check_preallocated_output has no effect: "
                    "symgraph's perform() methods allocate their own outputs, so there is "
                    "no preallocated buffer to check"))
add_flag("DebugMode.check_preallocated_output_ndim", "With check_preallocated_output: the "
         "highest rank checked (accepted, no effect).", IntParam(4, min=0))
add_flag("DebugMode.warn_input_not_reused", "Theano's warning for in-place ops that "
         "return a new array (accepted; symgraph's DebugMode checks destroy_map and "
         "view_map, and raises).", BoolParam(True))

add_flag("profile_memory", "Memory columns in profiles; symgraph's profiler times only.",
         _WarnIfSet(BoolParam(False), "profile_memory has no effect: symgraph's profiler "
                    "records time per node and per op, not memory"))
add_flag("profiling.n_apply", "Rows of the time-per-node table in a profile summary.",
         IntParam(20, min=0))
add_flag("profiling.n_ops", "Rows of the time-per-op table in a profile summary.",
         IntParam(20, min=0))
add_flag("profiling.min_memory_size", "Smallest variable listed in memory profiles "
         "(accepted; no memory profile).", IntParam(1024, min=0))
add_flag("profiling.min_peak_memory", "Peak memory per function in profiles (accepted; "
         "no memory profile).", _WarnIfSet(BoolParam(False), "profiling.min_peak_memory "
                                           "has no effect: symgraph profiles no memory"))
# stdout, not Theano's stderr: summary() printed there before this flag existed
add_flag("profiling.destination", "Where ProfileStats.summary() prints by default: stdout, "
         "stderr or a file path (appended to).", StrParam("stdout"))
add_flag("profiling.debugprint", "Print the profiled function's graph with its summary.",
         BoolParam(False))
add_flag("profiling.ignore_first_call", "Leave each function's first call out of its "
         "profile (it pays for one-time setup).", BoolParam(False))

# -- dtypes -------------------------------------------------------------------------

add_flag("cast_policy", "How Python numbers mix with tensors; symgraph follows 'custom' "
         "(a Python number takes the tensor's dtype when it fits: NumPy's NEP 50).",
         _RefusedEnum("custom", (), ("numpy+floatX",),
                      "symgraph follows cast_policy='custom' only: a Python number takes "
                      "the tensor's dtype when it fits (float32_x * 0.5 stays float32), "
                      "which is NumPy 2's rule; 'numpy+floatX' (NumPy 1's value-based "
                      "casting) would give other dtypes and results for the same program"))
add_flag("int_division", "What x / y of integers means in Theano's Python 2 division; "
         "under Python 3, '/' is true division and '//' integer division for every value.",
         EnumParam("int", "raise", "floatX"))

# -- memory, graph checks, stack traces ---------------------------------------------------

add_flag("allow_gc", "Free intermediate results: symgraph's Python linker empties them at "
         "the end of each call and the native runtime reuses its own pool (either value).",
         BoolParam(True))
add_flag("cycle_detection", "Theano's in-place cycle check strategy; symgraph's destroy "
         "handler checks the same way for both values.", EnumParam("regular", "fast"))
add_flag("check_stack_trace", "Check that every node of an optimized graph keeps the user's "
         "source line (off, log, warn, raise).", EnumParam("off", "log", "warn", "raise"))
add_flag("on_shape_error", "What to do when an op's infer_shape fails: raise, or warn and "
         "compute the shape at run time (Theano's default is warn).",
         EnumParam("raise", "warn"))
add_flag("warn.ignore_bug_before", "Theano's warnings about its own fixed bugs; symgraph "
         "never had those bugs, so no value warns.",
         EnumParam("0.9", "None", "all", "0.3", "0.4", "0.4.1", "0.5", "0.6", "0.7", "0.8",
                   "0.8.1", "0.8.2", "0.9", "0.10", "1.0", "1.0.1", "1.0.2", "1.0.3",
                   "1.0.4", "1.0.5"))

# Theano's switches for its warnings about results its old versions got wrong
# (flag, the Theano version that fixed the bug).  Theano programs set them to
# silence those warnings (the deep-learning tutorials set
# warn.subtensor_merge_bug); symgraph never had the bugs, so they are accepted
# and never warn.  The default is Theano's under its default
# warn.ignore_bug_before (0.9): on for bugs fixed after 0.9.
_THEANO_BUG_FLAGS = (
    ("argmax_pushdown_bug", "0.3", "argmax pushed down through a softmax"),
    ("gpusum_01_011_0111_bug", "0.3", "GPU sums over patterns 01, 011, 0111"),
    ("sum_sum_bug", "0.3", "two consecutive sums"),
    ("sum_div_dimshuffle_bug", "0.3", "sums of divisions of dimshuffled tensors"),
    ("subtensor_merge_bug", "0.5", "indexing a subtensor with a negative step"),
    ("gpu_set_subtensor1", "0.6", "set_subtensor with an integer vector on the GPU"),
    ("signal_conv2d_interface", "0.7", "signal.conv2d's changed interface"),
    ("reduce_join", "0.7", "a reduction of a join over another axis"),
    ("inc_set_subtensor1", "0.7", "inc/set_subtensor with an integer vector or matrix"),
    ("round", "0.9", "round's default mode (half to even, as NumPy's, in symgraph)"),
    ("inc_subtensor1_opt", "0.10", "inc_subtensor(zeros[idx], x)[idx] with repeated idx"),
    ("identify_1pexp_bug", "0.4.1", "the recognition of 1 + exp(x)"),
)
for _name, _fixed, _what in _THEANO_BUG_FLAGS:
    _default = tuple(int(p) for p in _fixed.split(".")) > (0, 9)
    add_flag(f"warn.{_name}", f"Theano's warning about its bug with {_what} (fixed in "
             f"Theano {_fixed}); symgraph never had it, so the flag never warns.",
             BoolParam(_default))
add_flag("warn.vm_gc_bug", "Theano's warning about a bug of an unreleased Theano version; "
         "symgraph never had it, so the flag never warns.", BoolParam(False))
add_flag("traceback.compile_limit", "Stack frames kept for nodes built by rewrites; symgraph "
         "keeps the user's line instead, copied from the node replaced.", IntParam(0, min=-1))
add_flag("experimental.local_alloc_elemwise_assert", "Keep a shape assert when an Alloc "
         "is removed from under an element-wise op.", BoolParam(True))
add_flag("conv.assert_shape", "Check at run time the shapes given to conv2d (input_shape, "
         "filter_shape) against the actual ones.", BoolParam(False))
add_flag("reoptimize_unpickled_function", "Rewrite a function's graph again when it is "
         "unpickled; symgraph restores the optimized graph, so only False applies.",
         _WarnIfSet(BoolParam(False), "reoptimize_unpickled_function has no effect: "
                    "symgraph keeps the optimized graph it pickled and its warm start "
                    "restores it"))

# -- compiler, cache ------------------------------------------------------------------

_DEFAULT_FORMAT = "compiledir_%(short_platform)s-py%(python_version)s"


def _hostname():
    import socket    # here: its import costs a few ms that only this name needs

    return socket.gethostname()


class _FormatValues(Mapping):
    """The names of ``compiledir_format`` with their values, each computed when
    a template first uses it: ``platform.processor()`` runs ``uname -p`` and
    ``platform.platform()`` reads the system's files, which ``import symgraph``
    (checking the flag's default) need not pay for."""

    _GETTERS = {
        "platform": lambda: platform.platform(),
        "short_platform": lambda: "".join(c if c.isalnum() or c in "._-" else "_"
                                          for c in sysconfig.get_platform()),
        "processor": lambda: platform.processor() or platform.machine(),
        "python_version": lambda: "%d.%d" % sys.version_info[:2],
        "python_bitwidth": lambda: str(8 * np.dtype(np.intp).itemsize),
        "python_int_bitwidth": lambda: str(8 * np.dtype(int).itemsize),
        "numpy_version": lambda: np.__version__,
        "symgraph_version": lambda: __version__,
        "theano_version": lambda: __version__,
        "hostname": lambda: _hostname(),
    }
    _known = {}     # name -> value, shared: a machine's values do not change

    def __getitem__(self, name):
        if name not in self._known:
            self._known[name] = self._GETTERS[name]()
        return self._known[name]

    def __iter__(self):
        return iter(self._GETTERS)

    def __len__(self):
        return len(self._GETTERS)


def compiledir_format_values():
    """The names that ``compiledir_format`` may use, with this machine's values
    (a mapping whose values are computed on first use)."""
    return _FormatValues()


class _FormatParam(StrParam):
    """A ``%(name)s`` template over :func:`compiledir_format_values`: an unknown name
    is an error when the flag is set, not when the cache first opens."""

    def convert(self, value):
        text = super().convert(value)
        try:
            result = text % compiledir_format_values()
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"not a template over {', '.join(compiledir_format_values())} "
                             f"({exc})") from None
        if not result.strip() or os.path.isabs(result):
            raise ValueError("must give a relative folder name")
        return text


add_flag("base_compiledir", "Folder holding the compile cache's folder (see "
         "compiledir_format); used when compiledir is not set.", StrParam("~/.cache/symgraph"))
add_flag("compiledir_format", "Name of the compile cache's folder under base_compiledir, "
         "a template over platform, short_platform, processor, python_version, ...",
         _FormatParam(_DEFAULT_FORMAT))


def effective_compiledir(cfg=None):
    """The compile cache's folder under ``cfg`` (default: the process's config):
    ``compiledir`` when it was set, else ``base_compiledir`` joined with
    ``compiledir_format`` when either of those was set (Theano's rule), else
    ``compiledir``'s default."""
    if cfg is None:
        from symgraph.config import config as cfg

    config = cfg
    if config.source("compiledir") == "default" and (
            config.source("base_compiledir") != "default" or
            config.source("compiledir_format") != "default"):
        name = config.get("compiledir_format") % compiledir_format_values()
        base = os.path.expanduser(config.get("base_compiledir"))
        return os.path.abspath(os.path.join(base, name))
    return config.get("compiledir")


_NO_EFFECT = ("has no effect in symgraph: its native build, its compile cache and its "
              "flags (cxx, gcc.cxxflags, compiledir, compile_cache_size_mb) replace "
              "Theano's cmodule machinery")

add_flag("lib.amdlibm", "Link AMD's libm; symgraph's generated C uses the system libm.",
         _FalseOnly("symgraph cannot link amdlibm: its kernels call the system libm "
                    "(gcc vectorizes them itself with -O3)"))
add_flag("blas.ldflags", "Linker flags of a BLAS; symgraph calls the BLAS that SciPy "
         "ships, found at run time.", _WarnIfSet(StrParam(""), "blas.ldflags is ignored: "
                                                 "symgraph calls the BLAS that SciPy ships"))
add_flag("nocleanup", "Keep the temporary files of failed compilations.",
         _WarnIfSet(BoolParam(False), "nocleanup " + _NO_EFFECT))
add_flag("compile.timeout", "Seconds before a stale compile lock is broken; symgraph "
         "locks per cache key and never waits on others' builds of other keys.",
         IntParam(120, min=0))
add_flag("compile.wait", "Seconds between tries for Theano's global compile lock "
         "(accepted; symgraph has no global lock).", IntParam(5, min=0))
add_flag("cmodule.warn_no_version", "Warn about ops whose C code has no version (symgraph's "
         "cache keys hash the generated source, so every op is versioned).", BoolParam(False))
add_flag("cmodule.remove_gxx_opt", "Compile without -O3; in symgraph write gcc.cxxflags=-O0.",
         _FalseOnly("use gcc.cxxflags=-O0 instead: symgraph passes gcc.cxxflags after "
                    "its own optimization flags, so the last -O wins"))
add_flag("cmodule.compilation_warning", "Print the C compiler's warnings.",
         _WarnIfSet(BoolParam(False), "cmodule.compilation_warning " + _NO_EFFECT))
add_flag("cmodule.preload_cache", "Load every cached module at import (symgraph loads each "
         "on first use, which is faster).", BoolParam(False))
add_flag("cmodule.age_thresh_use", "Seconds before an unused cache entry is deleted; "
         "symgraph caps the cache by size (compile_cache_size_mb) instead.",
         IntParam(60 * 60 * 24 * 24, min=0))
add_flag("cmodule.debug", "Debug output of the module cache.",
         _WarnIfSet(BoolParam(False), "cmodule.debug " + _NO_EFFECT +
                    "; `python -m symgraph cache` lists the cache"))

# -- the optimizer ------------------------------------------------------------------

add_flag("optimizer_requiring", "Apply only the rewrites carrying every one of these tags, "
         "colon separated (Mode.requiring).", StrParam(""))
add_flag("metaopt.verbose", "Theano's meta-optimizer output; symgraph has no meta-optimizer "
         "(it chooses convolution algorithms in the backend).", IntParam(0, min=0))
add_flag("metaopt.optimizer_excluding", "Theano's meta-optimizer tags (accepted; no "
         "meta-optimizer).", StrParam(""))
add_flag("metaopt.optimizer_including", "Theano's meta-optimizer tags (accepted; no "
         "meta-optimizer).", StrParam(""))

# -- scan -----------------------------------------------------------------------------

add_flag("scan.allow_output_prealloc", "Let scan's inner function write into preallocated "
         "outputs (accepted; symgraph's scan chooses its own buffers).", BoolParam(True))
add_flag("scan.allow_gc", "Free scan's inner intermediates between steps (accepted; the "
         "inner function frees them as allow_gc says).", BoolParam(False))
add_flag("scan.debug", "Print scan's internal debugging output (accepted; no effect).",
         BoolParam(False))
