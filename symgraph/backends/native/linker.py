"""The native linker: turns a scheduled FunctionGraph into a runtime Program.

It talks to a backend only through ``backends/protocol.py``.  Each node's
kernel (the backend's lowering of it) is looked up in the kernel index of the
compile cache by a key over its source, the backend's key parts (compiler,
flags, target) and the flags that change code; the kernels not found are compiled together into one library
(or, for a large function on several cores, a few libraries compiled in
parallel: see ``_groups``) and recorded in the index, so that a later function
that needs the same kernel (the same op on the same types) loads it without
compiling.  Nodes without a kernel become
Python steps that call ``perform``.
"""

import _ctypes
import ctypes
import os
import re
import threading
import time
import weakref

import numpy as np

from symgraph.backends.native.assemble import MANIFEST_SYMBOL, kernel_prefix
from symgraph.backends.native.kernel import COMPUTE, INPLACE, VIEW_OR_COPY
from symgraph.backends.native.lazy import is_select, set_branch_guards
from symgraph.backends.native.program import (assemble_program, assign_slots, native_step,
                                              step_allocators)
from symgraph.backends.protocol import get_backend
from symgraph.config import config

KERNEL_FORMAT_VERSION = 1
_LIB_KEY_RE = re.compile(r"[0-9a-f]{64}")   # make_key's sha256
_PREFIX_RE = re.compile(r"sgk[0-9]{1,6}")   # assemble.kernel_prefix


class NoNativeCodeError(TypeError):
    """linker=c was asked for, and a node has no native kernel."""


def python_only_chosen():
    """True when the user set the flag ``cxx`` to an empty string (no native
    code, no warning); an empty default means g++ was not found."""
    return not config.cxx and config.source("cxx") != "default"


def native_available(backend=None):
    """True when the backend (default the CPU's) can build kernels: for the
    CPU, a C compiler is configured (``cxx`` not empty) and found."""
    return (backend or get_backend()).available()


class NoCompilerWarning(UserWarning):
    """No C compiler was found although the flag ``cxx`` names one."""


_warned_no_compiler = False


def warn_no_compiler():
    """Warn, once per process, that functions run without a C compiler."""
    global _warned_no_compiler
    if _warned_no_compiler:
        return
    _warned_no_compiler = True
    import warnings

    from symgraph.graph.trace import user_line

    message = (
        f"symgraph: no C compiler was found ({_compiler_wanted()}). Kernels the compile "
        "cache already holds run natively; every other node runs in Python, typically 10 "
        "to 30 times slower. Install a C compiler (gcc), or set the flag cxx to an empty "
        "string to choose Python-only execution without this warning.")
    line = user_line()   # the user's line that asked for a function
    if line is None:
        warnings.warn(message, NoCompilerWarning, stacklevel=2)
    else:
        warnings.warn_explicit(message, NoCompilerWarning, line.filename, line.lineno)


def _compiler_wanted():
    if config.cxx:
        return f"the flag cxx={config.cxx!r}, nor gcc or cc on PATH"
    return "no g++, gcc or cc on PATH, so the flag cxx defaulted to ''"


def node_kernel(node, backend=None):
    """The node's kernel from ``backend`` (default the CPU's), or None when it
    has no native code there."""
    backend = backend or get_backend()
    if not backend.has_lowering(node):
        return None
    from symgraph.backends.c_family.c_types import has_c_type

    for var in node.inputs + node.outputs:
        if not has_c_type(getattr(var.type, "dtype", "object")):
            return None
    return backend.lower(node)


def _kernel_key(kernel, backend, environments=None):
    """The kernel's cache key.  ``environments`` ({(backend, openmp):
    environment_parts}) lets one function's kernels share those parts: they do
    not change while a function is linked, and computing them is most of the
    cost of a key."""
    from symgraph.backends.native.cache import environment_parts, make_key

    if environments is None:
        environments = {}
    where = (backend.name, kernel.openmp)
    if where not in environments:
        environments[where] = environment_parts(openmp=kernel.openmp, backend=backend)
    return make_key(source=backend.assemble([("k", kernel)]), headers=backend.headers_digest(),
                    kind=kernel.kind,
                    aliases=repr((kernel.view_of, kernel.inplace_of)),
                    version=f"{kernel.version}.{KERNEL_FORMAT_VERSION}",
                    **environments[where])


class KernelLibrary:
    """A loaded library of kernels: its cache key, its ``dlopen`` handle and what
    its manifest (``assemble.MANIFEST_SYMBOL``) says it holds, {kernel key: prefix}.

    Opened with ``dlopen`` itself rather than ``ctypes.CDLL``, which makes a
    class per library and caches an object per symbol looked up: a process
    that makes thousands of functions keeps none of that.  The library is
    unloaded when the last program using it (``NativeProgram.libraries``) goes,
    unless ``keep_loaded`` (``RTLD_NODELETE``: the backend's
    ``keeps_libraries_loaded``).  ``_handle`` is the attribute ``ctypes`` reads
    in ``in_dll``.
    """

    def __init__(self, key, path, keep_loaded=False):
        self.key = key
        mode = os.RTLD_NOW | os.RTLD_LOCAL | (os.RTLD_NODELETE if keep_loaded else 0)
        self._handle = _ctypes.dlopen(path, mode)
        address = self.address(MANIFEST_SYMBOL)
        if address is None:  # not a kernel library of this version
            self.manifest = {}
            return
        text = ctypes.string_at(address).decode("ascii", "replace")
        self.manifest = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)

    def address(self, name):
        """The address of symbol ``name``, or None when the library has none."""
        try:
            return _ctypes.dlsym(self._handle, name)
        except OSError:
            return None

    def holds(self, key, prefix):
        """True when the library was built with kernel ``key`` under ``prefix``."""
        return self.manifest.get(key) == prefix

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and _ctypes is not None:   # None: the interpreter is shutting down
            _ctypes.dlclose(handle)


class LoadedLibraries:
    """Kernel libraries loaded by this process, by compile cache and library key:
    each loaded once while some program uses it (weak references: a library
    whose functions are all gone is unloaded)."""

    def __init__(self):
        self.libs = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self._pinned_openmp = False

    def open(self, cache, lib_key, build_fn=None, openmp=False, what=None, backend=None):
        """The KernelLibrary of entry ``lib_key``, built first when missing and
        ``build_fn`` is given; None when it is missing (or damaged) and not."""
        where = (str(cache.root), lib_key)
        lib = self.libs.get(where)
        if lib is None:
            backend = backend or get_backend()
            # before the OpenMP runtime is first loaded
            backend.prepare_process(openmp=openmp)
            keep = backend.keeps_libraries_loaded()
            lib = cache.load(lib_key, build_fn, what=what,
                             loader=lambda path: KernelLibrary(lib_key, path, keep_loaded=keep))
            if lib is None:
                return None
            if openmp:
                self._pin_openmp_runtime()
            with self._lock:
                lib = self.libs.setdefault(where, lib)
        return lib

    def _pin_openmp_runtime(self):
        """Keep the OpenMP runtime loaded for good once a kernel library pulled it
        in: its worker threads outlive the library, and unloading the runtime
        under them would crash the process."""
        if self._pinned_openmp:
            return
        for name in ("libgomp.so.1", "libomp.so", "libiomp5.so"):
            try:
                _ctypes.dlopen(name, os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_NODELETE)
            except OSError:
                continue
        self._pinned_openmp = True


LOADED = LoadedLibraries()


def kernel_addresses(lib, prefix, kind):
    """(run, shape, view) addresses of a kernel of the KernelLibrary ``lib``; 0
    for the functions its kind does not export.  An in-place kernel's shape
    function is optional: the runtime calls it, when there is one, to check the
    inputs before the kernel writes."""
    def required(name):
        address = lib.address(name)
        if address is None:
            raise RuntimeError(f"the kernel library {lib.key} has no symbol {name}")
        return address

    shape = 0
    if kind in (COMPUTE, VIEW_OR_COPY):
        shape = required(f"{prefix}_shape")
    elif kind == INPLACE:
        shape = lib.address(f"{prefix}_shape") or 0
    view = required(f"{prefix}_view") if kind == VIEW_OR_COPY else 0
    return required(f"{prefix}_run"), shape, view


def _symbol(lib, name):
    address = lib.address(name)
    if address is None:
        raise RuntimeError(f"the kernel library {lib.key} has no symbol {name}")
    return address


def resolve_function(kernel, name, timings=None, backend=None):
    """``(address, library)`` of the function ``SG_FN(name)`` of ``kernel`` (a
    CKernel outside the node ABI), from the compile cache or compiled now; None
    when it cannot be built (no compiler)."""
    backend = backend or get_backend()
    if not native_available(backend):
        return None
    key = _kernel_key(kernel, backend)
    addresses, libraries = resolve_kernels({key: kernel}, {} if timings is None else timings,
                                           backend=backend, symbols=(name,))
    if key not in addresses:
        return None
    return addresses[key][0], libraries[0]


def _index_ref(cache, key):
    """(library key, prefix) that the kernel index records for ``key``, or None:
    a record of another shape (damaged, tampered with, an older format) is a miss."""
    entry = cache.lookup(key)
    if entry is None:
        return None
    lib_key, prefix = entry.get("lib"), entry.get("prefix")
    if (isinstance(lib_key, str) and isinstance(prefix, str) and _LIB_KEY_RE.fullmatch(lib_key)
            and _PREFIX_RE.fullmatch(prefix)):
        return lib_key, prefix
    return None


def resolve_kernels(kernels, timings, compile=True, backend=None, symbols=None):
    """``(addresses, libraries)``: {key: (run_address, shape_address,
    view_address)} for ``kernels`` ({key: CKernel} of ``backend``, default the
    CPU's), compiling the ones the cache does not have (with ``compile`` false,
    those are left out), and the KernelLibraries they are in (which must stay
    alive while they run).  With ``symbols`` (names), each kernel's addresses
    are instead those of its functions ``SG_FN(name)``, for kernels outside the
    node ABI (a scan's compiled loop).

    The index says which library holds a kernel under which prefix; the library
    is trusted only for the kernels its own manifest lists, so a wrong record is
    a miss: compiled again and recorded anew."""
    from symgraph.backends.native.cache import get_cache

    backend = backend or get_backend()
    cache = get_cache()
    found, missing, wanted = {}, {}, {}
    for key, kernel in kernels.items():
        ref = _index_ref(cache, key)
        if ref is None:
            missing[key] = kernel
        else:
            wanted.setdefault(ref[0], []).append((key, ref[1]))
    start = time.perf_counter()
    for lib_key, items in wanted.items():
        lib = LOADED.open(cache, lib_key, openmp=any(kernels[k].openmp for k, _ in items),
                          backend=backend)
        for key, prefix in items:
            if lib is not None and lib.holds(key, prefix):
                found[key] = (lib, prefix)
            else:
                missing[key] = kernels[key]
    timings["load"] = timings.get("load", 0.0) + time.perf_counter() - start
    if missing and compile:
        start = time.perf_counter()
        for lib, group in zip(_compile_in_parallel(cache, missing, backend),
                              _groups(missing)):
            for key, prefix in group:
                if not lib.holds(key, prefix):
                    raise RuntimeError(f"the library built for kernel {key} does not "
                                       f"hold it (its manifest: {sorted(lib.manifest)})")
                cache.record(key, {"lib": lib.key, "prefix": prefix})
                found[key] = (lib, prefix)
        timings["compile"] = timings.get("compile", 0.0) + time.perf_counter() - start
    start = time.perf_counter()
    addresses, libraries = {}, {}
    for key, (lib, prefix) in found.items():
        backend.prepare_library(lib, kernels[key])
        if symbols is not None:
            addresses[key] = tuple(_symbol(lib, f"{prefix}_{name}") for name in symbols)
        else:
            addresses[key] = kernel_addresses(lib, prefix, kernels[key].kind)
        libraries[lib.key] = lib
    timings["load"] = timings.get("load", 0.0) + time.perf_counter() - start
    return addresses, list(libraries.values())


#: The fraction by which one more library must shorten a function's longest
#: compile for its missing kernels to be split over that many (see _groups).
SPLIT_GAIN = 0.2
#: The compiler's fixed cost of one library (its start, headers, linking), in
#: characters of C it compiles in the same time (about 0.1 s with GCC 12 at -O2).
LIBRARY_OVERHEAD_CHARS = 10_000


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: How far over an even share of the work a library may grow to keep kernels
#: with the same support code together.
BALANCE_SLACK = 0.1


def _weighted(kernel):
    """A kernel's estimated compile cost, in characters of element-wise C."""
    return len(kernel.source) * kernel.compile_weight


def _partition(kernels, n_groups):
    """``kernels`` ([(key, CKernel)], largest first) split into ``n_groups`` lists,
    and the estimated cost of the costliest one.

    The cost of a library is estimated from its source size: the compiler's fixed
    cost, the support code of its kernels (each block once) and their sources
    (compile time follows the amount of C: about 10 us per character at -O2).
    Each kernel goes to the library it adds least to (one that has its support
    code already), as long as that library stays within an even share of the
    work (plus BALANCE_SLACK); when none does, to the one it leaves cheapest
    (the longest processing time rule).  So kernels that share support code
    share a library, and the support code is compiled fewer times.
    """
    unique_support = {}
    for _, kernel in kernels:
        unique_support.update(kernel.support)
    total = (n_groups * LIBRARY_OVERHEAD_CHARS + sum(_weighted(k) for _, k in kernels)
             + sum(len(code) for code in unique_support.values()))
    limit = total / n_groups * (1.0 + BALANCE_SLACK)
    groups = [([], set(), LIBRARY_OVERHEAD_CHARS) for _ in range(n_groups)]
    for key, kernel in kernels:
        options = []
        for index, (members, support, cost) in enumerate(groups):
            added = _weighted(kernel) + sum(
                len(code) for name, code in kernel.support if name not in support)
            options.append((index, added, cost + added))
        fitting = [o for o in options if o[2] <= limit]
        if fitting:
            best = min(fitting, key=lambda o: (o[1], o[2], o[0]))
        else:
            best = min(options, key=lambda o: (o[2], o[0]))
        members, support, _ = groups[best[0]]
        members.append(key)
        support.update(name for name, _ in kernel.support)
        groups[best[0]] = (members, support, best[2])
    groups = [g for g in groups if g[0]]
    return [sorted(members) for members, _, _ in groups], max(cost for _, _, cost in groups)


def _groups(missing):
    """The missing kernels split into libraries: [[(key, prefix), ...], ...].

    One compiler run per library; several libraries compile at once on several
    cores, so a large function is not one long serial compile.  But each library
    compiles its kernels' support code again, so a function is split over one
    more library (at most one per core) only while that shortens the estimated
    longest compile by SPLIT_GAIN: small functions stay in one library (the
    support code of an MLP's kernels is half of its C).  Deterministic:
    the same missing kernels give the same libraries (so processes compiling
    the same function at once wait for one another's build).
    """
    kernels = sorted(missing.items(),
                     key=lambda item: (-_weighted(item[1]), item[0]))
    limit = max(1, min(_cores(), len(kernels)))
    groups, cost = _partition(kernels, 1)
    for n_groups in range(2, limit + 1):
        more, more_cost = _partition(kernels, n_groups)
        if more_cost > cost * (1.0 - SPLIT_GAIN):
            break
        groups, cost = more, more_cost
    return [[(key, kernel_prefix(i)) for i, key in enumerate(group)] for group in groups]


def _compile_in_parallel(cache, missing, backend):
    """The loaded KernelLibrary of each group of ``_groups(missing)``, in order."""
    from concurrent.futures import ThreadPoolExecutor

    from symgraph.backends.native.cache import environment_parts, make_key

    def build_group(group):
        source = backend.assemble([(prefix, missing[key]) for key, prefix in group],
                                  manifest=group)
        openmp = any(missing[key].openmp for key, _ in group)
        lib_key = make_key(source=source, headers=backend.headers_digest(),
                           kernels=",".join(k for k, _ in group),
                           **environment_parts(openmp=openmp, backend=backend))

        def build(tmp_dir):
            backend.build(source, tmp_dir / "lib.so", openmp=openmp)

        return LOADED.open(cache, lib_key, build, openmp=openmp, what=f"{len(group)} kernels",
                           backend=backend)

    groups = _groups(missing)
    if len(groups) == 1:
        return [build_group(groups[0])]
    with ThreadPoolExecutor(len(groups)) as pool:
        return list(pool.map(build_group, groups))


def python_step(node):
    """A callable running ``node.op.perform`` for the runtime."""
    perform = node.op.perform
    n_out = len(node.outputs)

    def step(*values):
        storage = [[None] for _ in range(n_out)]
        perform(node, list(values), storage)
        return [cell[0] for cell in storage]

    step.node = node
    return step


class NativeProgram:
    """A runtime Program and what the Function needs to drive it."""

    def __init__(self, program, order, slot_of, step_nodes, n_inputs, python_nodes=(),
                 libraries=()):
        self.program = program
        #: the KernelLibraries of its kernels: unloaded once no program holds them
        self.libraries = list(libraries)
        #: the nodes run by their Python ``perform`` (no native kernel)
        self.python_nodes = list(python_nodes)
        self.order = order
        self.slot_of = slot_of
        self.step_nodes = step_nodes
        self.n_inputs = n_inputs

    def failed_node(self):
        index = self.program.failed_step
        return None if index < 0 else self.step_nodes[index]

    def node_input_values(self, node):
        return [self.program.slot(self.slot_of[v]) for v in node.inputs]


def build_program(fgraph, order, linker, timings, extra_steps=None, compile=True,
                  backends=None):
    """A NativeProgram running ``order`` over ``fgraph``.

    ``backends``: the backends in the order they are asked (default the CPU's
    alone); a node belongs to the first that claims it (``Backend.claims``),
    else to the last one (the CPU's).

    ``linker`` is 'c' (every node must have native code) or 'c|py'.
    ``extra_steps(node, slot_of) -> (before, after)`` lets DebugMode and
    NanGuardMode add Python check steps around each node.  With ``compile``
    false (no compiler), kernels the cache lacks run their nodes in Python.
    """
    from symgraph.backends.native.runtime import load_runtime

    backends = list(backends or [get_backend()])
    start = time.perf_counter()
    slot_of, constants = assign_slots(fgraph, order)
    kernels = {}
    node_keys = {}
    environments = {}
    backend_of = {}
    for node in order:
        backend = next((b for b in backends[:-1] if b.claims(node)), backends[-1])
        backend_of[node] = backend
        kernel = node_kernel(node, backend) if linker in ("c", "c|py") else None
        if kernel is None:
            if linker == "c" and not is_select(node):
                raise NoNativeCodeError(
                    f"linker=c: {node.op} has no native code for {node}"
                    f"{_origin(node)}; use linker='c|py' to run such nodes in Python")
            continue
        key = _kernel_key(kernel, backend, environments)
        kernels[key] = kernel
        node_keys[node] = key
    timings["codegen"] = timings.get("codegen", 0.0) + time.perf_counter() - start
    addresses, libraries = {}, []
    for backend in backends:
        mine = {key: kernels[key] for node, key in node_keys.items()
                if backend_of[node] is backend}
        if mine:
            found, libs = resolve_kernels(mine, timings, compile, backend)
            addresses.update(found)
            libraries += libs
    if linker == "c" and len(addresses) < len(kernels):
        node = next(n for n, k in node_keys.items() if k not in addresses)
        raise NoNativeCodeError(f"linker=c: the kernel of {node}{_origin(node)} is not in "
                                "the compile cache, and no C compiler was found to build it")

    runtime = load_runtime()

    def node_step(node, ins, outs):
        key = node_keys.get(node)
        if is_select(node):
            return (2, node.op.as_view, ins, outs,
                    tuple(np.dtype(o.dtype).num for o in node.outputs)), False
        if key is None or key not in addresses:
            return (1, python_step(node), ins, outs), True
        return native_step(kernels[key], addresses[key], node, ins, outs,
                            *step_allocators(backend_of[node], node, runtime)), False

    program, step_nodes, python_nodes = assemble_program(runtime, fgraph, order, slot_of,
                                                         constants, extra_steps, node_step)
    set_branch_guards(program, fgraph, order, step_nodes, slot_of)
    return NativeProgram(program, order, slot_of, step_nodes, len(fgraph.inputs),
                         python_nodes, libraries)


def _origin(node):
    trace = getattr(node.tag, "trace", None)
    return f" (created at {trace.filename}:{trace.lineno})" if trace else ""
