"""Warm start's half of linking: what a function's native program is made of,
as records, and the program rebuilt from them without generating code.

A record says, for one node of the schedule, which kernel library of the
compile cache holds its kernel (the library's key), under which prefix, the
kernel's key, kind and aliasing, whether its library uses OpenMP, and the
global pointers the linker sets after loading (``CKernel.symbols``).  That is
all the runtime needs: the kernel's C source is not needed again.

:func:`restore_program` assembles the runtime Program with the linker's own
``assign_slots`` and ``assemble_program``, from those records instead of
freshly lowered kernels.
"""

__all__ = ["native_records", "restore_program"]


def native_records(order, native, backends):
    """One record per node of ``order`` (None for a node run by its Python
    ``perform``) for the NativeProgram ``native`` just built.

    The kernels are lowered again to learn their keys (in-process, after the
    first lowering, this is cheap: the generators are imported and their
    environment known); each must be in one of the program's libraries."""
    from symgraph.backends.native.linker import _kernel_key, node_kernel

    python_nodes = set(native.python_nodes)
    where = {}
    for lib in native.libraries:
        for key, prefix in lib.manifest.items():
            where.setdefault(key, (lib.key, prefix))
    environments, records = {}, []
    for node in order:
        if node in python_nodes:
            records.append(None)
            continue
        backend = next((b for b in backends[:-1] if b.claims(node)), backends[-1])
        kernel = node_kernel(node, backend)
        if kernel is None:
            raise RuntimeError(f"{node} runs natively but has no kernel now")
        key = _kernel_key(kernel, backend, environments)
        if key not in where:
            raise RuntimeError(f"the kernel of {node} is in none of the program's libraries")
        lib_key, prefix = where[key]
        records.append({"backend": backend.name, "key": key, "lib": lib_key,
                        "prefix": prefix, "kind": kernel.kind, "view_of": kernel.view_of,
                        "inplace_of": kernel.inplace_of, "openmp": kernel.openmp,
                        "symbols": kernel.symbols})
    return records


def _stub(record):
    """A CKernel without source: what linking needs of a kernel already built."""
    from symgraph.backends.native.kernel import CKernel

    return CKernel(source="", kind=record["kind"], view_of=tuple(record["view_of"]),
                   inplace_of=tuple(record["inplace_of"]), symbols=tuple(record["symbols"]),
                   openmp=bool(record["openmp"]))


def _addresses(records, backends):
    """{node index: (stub kernel, addresses, backend)} and the libraries, or None
    when the kernel index records another library for a kernel, or a library
    is missing, damaged or does not hold the kernel it should."""
    from symgraph.backends.native.cache import get_cache
    from symgraph.backends.native.linker import LOADED, _index_ref, kernel_addresses

    by_name = {b.name: b for b in backends}
    cache = get_cache()
    libs, found = {}, {}
    for index, record in enumerate(records):
        if record is None:
            continue
        backend = by_name.get(record["backend"])
        # The kernel index says which library holds a kernel: an entry that
        # disagrees with it (the index rebuilt or repaired since) is stale.
        if backend is None or _index_ref(cache, record["key"]) != (record["lib"],
                                                                   record["prefix"]):
            return None
        lib = libs.get(record["lib"])
        if lib is None:
            lib = LOADED.open(cache, record["lib"], openmp=bool(record["openmp"]),
                              backend=backend)
            if lib is None:
                return None
            libs[record["lib"]] = lib
        if not lib.holds(record["key"], record["prefix"]):
            return None
        kernel = _stub(record)
        backend.prepare_library(lib, kernel)
        found[index] = (kernel, kernel_addresses(lib, record["prefix"], kernel.kind), backend)
    return found, list(libs.values())


def restore_program(fgraph, order, records, extra_steps=None, backends=None):
    """A NativeProgram running ``order`` over ``fgraph`` with the kernels that
    ``records`` name (see :func:`native_records`), or None when one of them
    cannot be loaded.  ``extra_steps`` as for ``build_program``."""
    from symgraph.backends.native.linker import NativeProgram, python_step
    from symgraph.backends.native.program import (assemble_program, assign_slots, native_step,
                                                  step_allocators)
    from symgraph.backends.native.runtime import load_runtime
    from symgraph.backends.protocol import get_backend

    if len(records) != len(order):
        return None
    loaded = _addresses(records, list(backends or [get_backend()]))
    if loaded is None:
        return None
    found, libraries = loaded
    slot_of, constants = assign_slots(fgraph, order)
    runtime = load_runtime()
    position = {node: index for index, node in enumerate(order)}

    def node_step(node, ins, outs):
        index = position[node]
        if index not in found:
            return (1, python_step(node), ins, outs), True
        kernel, addresses, backend = found[index]
        return native_step(kernel, addresses, node, ins, outs,
                            *step_allocators(backend, node, runtime)), False

    program, step_nodes, python_nodes = assemble_program(runtime, fgraph, order, slot_of,
                                                         constants, extra_steps, node_step)
    return NativeProgram(program, order, slot_of, step_nodes, len(fgraph.inputs),
                         python_nodes, libraries)
