"""The shared support library: helper code that kernels call instead of carrying it.

Every kernel library used to compile its own copy of the helpers its kernels
share (the element-wise loop driver, the reduction planner, the BLAS
wrappers, the softmax and cross-entropy rows): about half of the C of a training step, compiled
again in every library.  These helpers are compiled once instead, into one
shared library (``sg_support.c``), and kernels call them
through a table of function pointers:

* ``support/sg_support.h`` declares the helpers' types and macros and
  the table ``sg_support_table``; outside the library (kernel code) every
  helper name is a macro reading the table: ``sg_ew_loop(...)`` is
  ``(sg_sup->sg_ew_loop)(...)``.
* A kernel using them lists :data:`SUPPORT_ENTRY` in its support code: it
  includes the header and defines the library's ``sg_sup`` pointer, which the
  linker sets after loading (:func:`bind_library`).
* The hot loops stay in the kernels: an element-wise kernel keeps its
  element loop (the driver calls it through a pointer, as before), a
  reduction its fused body and its loops; only the per-call planning and the
  per-dtype helpers moved.
* It also holds the thread runtime of symgraph's BLAS calls
  (``c_src/cpu/threads/sg_threads.c``, ``backends/native/threads.py``).
* The library is compiled with OpenMP (whatever the ``openmp`` flag says):
  the element-wise driver shares a kernel's loop out between threads when the
  kernel asks it to (its ``minpar`` argument), so no kernel library needs a
  copy of the driver, which cost GCC about 0.15 s per library.

Both files are generated from the helpers' C text in the codegen modules
(:func:`generate`), so that there is one source of truth, and never checked
in: ``setup.py`` writes them into its build folder, and a process that
compiles kernels writes them once into the compile cache
(:func:`generated_dir`, a folder named by their hash, added to every
compiler command's include path).

The library is built at install time (``setup.py``: the extension
``symgraph._support``, beside ``symgraph._runtime``) and loaded with ctypes.
Where it is missing, or was built from other sources or for another CPU
(``-march=native``), it is compiled once into the compile cache instead,
like the runtime (``runtime.py``).

Every process that loads the library checks which sources its build came
from.  Generating the C text to hash it would cost each process 10-50 ms, so
the hash is recorded in the compile cache under a stamp of symgraph's files
(:func:`current_source_hash`); an edit gives another stamp and so a fresh hash.
"""

import ctypes
import functools
import hashlib
import os
import logging
import re
import threading
from pathlib import Path

__all__ = ["SUPPORT_ENTRY", "generate", "write_files", "generated_dir", "support_source_hash",
           "current_source_hash",
           "load_support", "support_table_address", "bind_library", "shared_units",
           "Unit", "split_unit"]

#: Bump when the table layout or the way the library is built changes.
SUPPORT_VERSION = 3
HEADER_NAME, SOURCE_NAME = "sg_support.h", "sg_support.c"
#: The support entry of a kernel calling the shared helpers.
SUPPORT_ENTRY = ("sg_support_table_v1", '#include "support/sg_support.h"\n'
                 "/* Set by the linker after loading (support_lib.bind_library). */\n"
                 '__attribute__((visibility("default"))) const sg_support_table *sg_sup = 0;\n')
_log = logging.getLogger("symgraph.compile.support")


class Unit:
    """One block of helper code: ``decls`` (types, macros: both sides) and
    ``defs`` (static function definitions: the library only), and the
    functions of ``defs`` as (name, return type, parameters)."""

    def __init__(self, key, decls, defs, functions):
        self.key, self.decls, self.defs, self.functions = key, decls, defs, functions


# A GCC attribute, e.g. __attribute__((optimize("Og"))): one level of nested parentheses.
_ATTRIBUTE = r'__attribute__\(\((?:[^()]|\([^()]*\))*\)\)\s*'
# A function definition at the start of a line: [ATTRIBUTES] static [ATTRIBUTES]
# [inline] TYPE NAME(PARAMS) {  -- the attributes stay in the definition and
# out of the return type that the table declares
_FUNCTION = re.compile(rf"^(?:{_ATTRIBUTE})*static\s+(?:{_ATTRIBUTE})*(?:inline\s+)?"
                       r"([A-Za-z_][\w \*]*?)\s*\b(sg_\w+)\(", re.M)


_GLOBAL = '__attribute__((visibility("default")))'
_INTRINSICS = re.compile(r"\s*#\s*include\s*<\w*intrin\.h>")


_BRACKETS = {"{": re.compile(r"[{}]"), "(": re.compile(r"[()]")}


def _end_of_block(text, start, open_="{", close="}"):
    """The index after the ``close`` matching the ``open_`` at ``start``."""
    # a regular expression finds the brackets: every cold compile generates
    # this library's text, and a loop over its characters took 15 ms of it
    depth = 0
    for match in _BRACKETS[open_].finditer(text, start):
        depth += 1 if match.group() == open_ else -1
        if depth == 0:
            return match.end()
    raise ValueError(f"unbalanced {open_}{close} in support code")


def split_unit(key, code):
    """A Unit from a support entry's C text: its static function definitions
    go to the library, everything else (types, macros, comments) to the header."""
    decls, defs, functions = [], [], []
    pos = 0
    for match in _FUNCTION.finditer(code):
        if match.start() < pos:
            continue            # a match inside a function already taken
        params_end = _end_of_block(code, match.end() - 1, "(", ")")
        body = re.compile(r"\s*\{").match(code, params_end)
        if body is None:
            continue            # a prototype, not a definition
        end = _end_of_block(code, body.end() - 1)
        # the comment right before a function stays with it
        head = code[pos:match.start()]
        comment = head.rfind("/*")
        if comment >= 0 and head[comment:].rstrip().endswith("*/") and \
                head[:comment].endswith("\n"):
            decls.append(head[:comment])
            defs.append(head[comment:] + code[match.start():end])
        else:
            decls.append(head)
            defs.append(code[match.start():end])
        ret, name = match.group(1).strip(), match.group(2)
        params = code[match.end():params_end - 1]
        functions.append((name, ret, " ".join(params.split())))
        pos = end
    decls.append(code[pos:])
    # global variables (the BLAS pointers the helpers call) live in the library,
    # and so do the SIMD intrinsics headers only function bodies use: in the
    # header every kernel library would parse about 1.3 MB of them for nothing
    lines = "".join(decls).split("\n")
    in_library = [line for line in lines if line.startswith(_GLOBAL) or _INTRINSICS.match(line)]
    defs = in_library + defs
    decls = [line + "\n" for line in lines if line not in in_library]
    return Unit(key, "".join(decls).strip() + "\n", "\n".join(d.strip() for d in defs) + "\n",
                functions)


def shared_units():
    """The Units of the library, in order (a unit may use the ones before it)."""
    from symgraph.backends.cpu.blas import support as blas_support
    from symgraph.backends.cpu.nnet import loss as loss_codegen
    from symgraph.backends.cpu.nnet import softmax as softmax_codegen
    from symgraph.backends.cpu.reduce import plan as reduce_plan
    from symgraph.backends.cpu.reduce import drivers as reduce_drivers
    from symgraph.backends.cpu.reduce import prebuilt as reduce_prebuilt
    from symgraph.backends.c_family.c_files import c_file
    from symgraph.backends.cpu.elemwise.loop import EW_SUPPORT

    units = [split_unit("sg_region_v1", c_file("cpu/threads/region.inc")),
             split_unit(*EW_SUPPORT),
             split_unit(reduce_plan.SUPPORT_KEY, reduce_plan.SUPPORT),
             *(split_unit(*reduce_drivers.support_text(acc)) for acc in reduce_drivers.SUFFIXES),
             *(reduce_prebuilt.support_unit(kind, dtype)
               for kind, dtype in reduce_prebuilt.PREBUILT),
             split_unit(*blas_support.common_text())]
    for T in ("float", "double"):
        units.append(split_unit(*blas_support.typed_text(T)))
    for suffix in ("f32", "f64"):
        units.append(split_unit(*softmax_codegen.core_text(suffix)))
    for dtype in ("float16", "float32", "float64"):
        units.append(split_unit(*softmax_codegen.driver_text(dtype)))
    for dtype in ("float16", "float32", "float64"):
        units.append(split_unit(*loss_codegen.driver_text(dtype)))
    return units


_BANNER = "/* GENERATED by symgraph/backends/cpu/support_lib.py from the codegen modules'\n" \
          " * support code: do not edit (python -m symgraph.backends.cpu.support_lib). */\n"


def generate():
    """(header text, source text) of the library."""
    from symgraph.backends.cpu.elemwise.loop import _mvec_code

    units = shared_units()
    functions = [f for unit in units for f in unit.functions]
    header = [_BANNER, "#ifndef SG_SUPPORT_H", "#define SG_SUPPORT_H", "",
              '#include "sg_kernel.h"', "#include <math.h>", "#include <stdlib.h>", ""]
    for unit in units:
        header += [f"/* ==== {unit.key} ==== */", unit.decls]
    header.append("/* The library's functions, by name (support_lib.py). */")
    header.append("typedef struct {")
    header += [f"    {ret} (*{name})({params});" for name, ret, params in functions]
    header.append("} sg_support_table;\n")
    header.append("#ifndef SG_SUPPORT_IMPL")
    header.append("extern const sg_support_table *sg_sup;")
    header += [f"#define {name} (sg_sup->{name})" for name, _, _ in functions]
    header.append("#endif\n\n#endif")
    source = [_BANNER, "#define SG_SUPPORT_IMPL",
              # the softmax rows call exp and log: their SIMD versions
              _mvec_code(("exp", "log")),
              f'#include "{HEADER_NAME}"', ""]
    # The thread runtime (backends/native/threads.py: BLAS wrappers, and the
    # back-off of every parallel region under load), before the helpers that
    # call it; its text here rather than included so that the source hash
    # covers it: one library built at install instead of one more compile on a
    # cold cache.
    source += ["/* ==== thread runtime (c_src/cpu/threads/sg_threads.c) ==== */",
               (_c_src() / "cpu" / "threads" / "sg_threads.c").read_text(encoding="utf-8")]
    for unit in units:
        source += [f"/* ==== {unit.key} ==== */", unit.defs]
    source.append("#ifndef SG_SUPPORT_SOURCE_HASH\n#define SG_SUPPORT_SOURCE_HASH \"\"\n#endif")
    source.append("/* What the library was built from (support_lib.load_support checks it). */")
    source.append('__attribute__((visibility("default"))) const char sg_support_build[] = '
                  "SG_SUPPORT_SOURCE_HASH;")
    source.append('__attribute__((visibility("default"))) const sg_support_table sg_support = {')
    source += [f"    {name}," for name, _, _ in functions]
    source.append("};")
    return "\n".join(header) + "\n", "\n".join(source) + "\n"


def write_files(folder, cache=None):
    """Write the generated header and source into ``folder``/support (each file
    through a temporary name and a rename: concurrent writers are safe).

    With ``cache`` (a ModuleCache holding ``folder``), the folders and files are
    private and checked: they are compiled into every kernel, so a file that
    another user could write there would be code injection."""
    header, source = generate()
    target = Path(folder) / "support"
    if cache is None:
        target.mkdir(parents=True, exist_ok=True)
    else:
        # imported here: setup.py loads this module by path, with the standard
        # library only
        from symgraph.backends.native.cache import write_private_atomic

        target = cache.private_folder(*target.relative_to(cache.root).parts)
    for name, text in ((HEADER_NAME, header), (SOURCE_NAME, source)):
        path = target / name
        if cache is not None:
            if cache.check_private_file(path) and path.read_text(encoding="utf-8") == text:
                continue
            write_private_atomic(path, text)
            continue
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        tmp = path.with_name(f"{name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return target


@functools.lru_cache(maxsize=1)
def _generated():
    return generate()


def _c_src():
    # imported here: setup.py loads this module by path, with the standard library only
    from symgraph.backends.native.c_sources import C_SRC

    return C_SRC


def support_source_hash():
    """sha256 of the library's sources (the generated header and source, and
    sg_kernel.h), as embedded in a build (setup.py computes the same)."""
    header, source = _generated()
    return _digest(header.encode(), source.encode())


def _digest(header, source):
    """sha256 of the generated header and source (bytes) and sg_kernel.h."""
    digest = hashlib.sha256()
    for name, text in ((HEADER_NAME, header), (SOURCE_NAME, source),
                       ("sg_kernel.h", (_c_src() / "sg_kernel.h").read_bytes())):
        digest.update(name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()


#: The source hash of this process's sources, once known (by stamp digest).
_CURRENT_HASH = {}


def _hash_record_name(stamp_digest):
    """The compile cache's index name of the hash recorded for a source stamp;
    the package's folder is part of it, so two checkouts never share one."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return f"support-source-hash v{SUPPORT_VERSION} {package} {stamp_digest}"


def current_source_hash():
    """:func:`support_source_hash` of the sources this process runs, without
    generating the library's text in every process.

    Generating it imports four codegen modules and costs 10-50 ms, paid by
    every process that loads the library (a warm start too).  The hash is
    recorded in the compile cache's index under the stamp of symgraph's files
    (``native/source_stamp.py``: names, sizes and mtimes): editing any of them
    or reinstalling gives another stamp, so a stale record is never read, and
    a stale installed library is still found out.  A stamp taken within two
    seconds of an edit is not trusted to record anything."""
    from symgraph.backends.native.source_stamp import source_stamp

    stamp = source_stamp()
    known = _CURRENT_HASH.get(stamp.digest)
    if known is not None:
        return known
    name = _hash_record_name(stamp.digest)
    cache = None
    try:
        from symgraph.backends.native.cache import get_cache

        cache = get_cache()
        record = cache.lookup(name)
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        _log.debug("the support library's recorded source hash cannot be read: %s", exc)
        record = None
    value = record.get("source_hash") if record else None
    if not (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value)):
        value = support_source_hash()
        if cache is not None and stamp.settled:
            try:
                cache.record(name, {"source_hash": value})
            except (OSError, RuntimeError, ValueError) as exc:
                _log.debug("the support library's source hash was not recorded: %s", exc)
    _CURRENT_HASH[stamp.digest] = value
    return value


_DIRS = {}


def generated_dir():
    """The compile-cache folder holding ``support/sg_support.h`` (and .c) for the
    current sources, written on first use; kernels find the header there."""
    from symgraph.backends.native.cache import get_cache

    cache = get_cache()
    key = (str(cache.root), current_source_hash())
    if key not in _DIRS:
        folder = cache.private_folder("generated", key[1][:24])
        if not _written(cache, folder, key[1]):
            write_files(folder, cache=cache)
        _DIRS[key] = folder
    return _DIRS[key]


def _written(cache, folder, source_hash):
    """True when ``folder``/support already holds the files whose hash is
    ``source_hash``: an earlier process wrote them, and this one need not
    generate their text to compare.  Their content is hashed again (a file
    edited or truncated by hand is written anew) and must be private."""
    try:
        target = cache.private_folder(*(Path(folder) / "support").relative_to(cache.root).parts)
        texts = []
        for name in (HEADER_NAME, SOURCE_NAME):
            if not cache.check_private_file(target / name):
                return False
            texts.append((target / name).read_bytes())
    except (OSError, ValueError):
        return False
    return _digest(*texts) == source_hash


def build_id(source_hash, cpu):
    """The string a build embeds: its sources' hash and the CPU it targets
    (the library is compiled with -march=native)."""
    return f"v{SUPPORT_VERSION} {source_hash} {hashlib.sha256(cpu.encode()).hexdigest()[:16]}"


_LOCK = threading.Lock()
_LIBRARY = None


def _installed_build_id(lib):
    """The build id a library carries (``sg_support_build``, set by setup.py)."""
    return ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "sg_support_build"))) \
        .value.decode()


def _expected_build_id():
    from symgraph.backends.cpu.compiler import cpu_signature

    return build_id(current_source_hash(), cpu_signature())


def _cache_key():
    from symgraph.backends.native.cache import environment_parts, make_key

    return make_key(support=current_source_hash(), version=str(SUPPORT_VERSION),
                    **environment_parts())


def _build(tmp_dir):
    from symgraph.backends.cpu.compiler import compile_library

    text = (f'#define SG_SUPPORT_SOURCE_HASH "{_expected_build_id()}"\n'
            f'#line 1 "{SOURCE_NAME}"\n' + _generated()[1])
    # with OpenMP whatever the openmp flag says, as setup.py builds it: the
    # element-wise driver shares work out only when a kernel asks it to
    compile_library(text, tmp_dir / "lib.so", extra_flags=("-fopenmp",),
                    include_dirs=(generated_dir() / "support",))


def prebuilt():
    """The library as a ``native.prebuilt.Prebuilt`` (installed, or the cache's)."""
    from symgraph.backends.native.prebuilt import Prebuilt

    return Prebuilt("the shared support library", key=_cache_key, build=_build,
                    installed="symgraph._support", open_installed=ctypes.CDLL,
                    build_id=_installed_build_id, expected_id=_expected_build_id)


def load_support():
    """The support library (a ctypes.CDLL): the installed one when it is
    current, else the one built (once) in the compile cache."""
    global _LIBRARY
    with _LOCK:
        if _LIBRARY is None:
            from symgraph.backends.cpu.compiler import prepare_openmp_environment

            # it links the OpenMP runtime, which reads its environment once, when
            # it is loaded
            prepare_openmp_environment()
            _LIBRARY = prebuilt().load()
        return _LIBRARY


def support_table_address():
    """The address of the library's ``sg_support_table``."""
    return ctypes.addressof(ctypes.c_char.in_dll(load_support(), "sg_support"))


def bind_library(lib):
    """Point a kernel library's ``sg_sup`` at the table, where it has one."""
    try:
        cell = ctypes.c_void_p.in_dll(lib, "sg_sup")
    except ValueError:
        return
    if not cell.value:
        cell.value = support_table_address()


def set_support_symbol(name, address_fn):
    """Set the library's global pointer ``name`` (a BLAS routine the helpers
    call) when it has one and it is not set yet; False when it has none."""
    try:
        cell = ctypes.c_void_p.in_dll(load_support(), name)
    except ValueError:
        return False
    if not cell.value:
        cell.value = address_fn()
    return True
