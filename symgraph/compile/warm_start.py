"""Warm start: restore a function compiled before without rewriting or generating code.

After a function is compiled, its optimized graph, its schedule (the order of
its nodes) and, per node, where its native kernel lives (the library's cache
key and the kernel's prefix in it, its kind and aliasing) are written to the
compile cache, under ``functions/``, keyed by :func:`warm_key.warm_key` (the
user's graph, the mode, the flags and the versions).  A later process that
builds the same graph finds the entry and takes the optimized graph as it is:
no rewrite runs, no kernel is lowered to C, nothing is compiled; the kernel
libraries are loaded from the cache (each checked as every cache load is)
and the runtime program is assembled from the records.

Rules, and why:

- An entry is ``MAGIC``, the sha256 of its payload, then the payload (a
  pickle).  It is written to a temporary file and renamed into place, so a
  reader sees a whole entry or none and takes no lock; two processes storing
  the same key write the same content, and the last rename wins.
- An entry that does not read back (truncated, hash mismatch, unpickling
  fails, another key inside, a library it names was pruned or is damaged) is
  a miss: it is removed and the function compiled as usual, which stores it
  anew.  Warm start never makes a compile fail: anything unexpected while
  storing or restoring is logged and the cold path runs.
- Device functions (``device=cuda``) are stored too: their device constants
  pickle as host copies and come back on the device, their CUDA libraries
  load through the CUDA backend (which sets their global pointers); the key
  holds the device flags (``device``, ``gpu.emulate``, ``gpu.cublas``...).
- The graph is stored flat (a table of variables and a table of nodes that
  refer to each other by number), so that a deep graph does not recurse in
  ``pickle``; the graph's inputs are stored as their positions and bound to
  this process's variables (and so to its shared variables' storage).
- Not stored (compiled as usual each time): graphs whose ops hold something
  that has no value form (a Python function, an inner graph: ``as_op``,
  ``OpFromGraph``, ``scan``), DebugMode and NanGuardMode (they check every
  node), and graphs whose ops do not pickle; nor with ``optimizer_verbose`` (which asks to
  see the rewrites run).  ``compile_warm_start=False`` turns it off.
"""

import contextlib
import hashlib
import logging
import os
import pickle
import time

from symgraph.compile.warm_key import WARM_FORMAT, Uncacheable, warm_key
from symgraph.graph.fg import Feature

__all__ = ["WarmStart", "stats", "MAGIC"]

MAGIC = b"symgraph-warm-start " + WARM_FORMAT.encode() + b"\n"
_log = logging.getLogger("symgraph.compile.warm_start")

#: Counts of this process: entries restored, stored, looked up and missed,
#: graphs that cannot be stored, damaged entries removed.
stats = {"restored": 0, "stored": 0, "missed": 0, "uncacheable": 0, "damaged": 0}


class _Damaged(Exception):
    """An entry that does not read back as a whole."""


def _folder(cache):
    from symgraph.backends.native.cache_files import FUNCTIONS

    return cache.private_folder(FUNCTIONS)


def _entry_path(cache, key):
    return os.path.join(str(_folder(cache)), f"{key}.pkl")


class WarmStart:
    """A FunctionMaker's link to the warm-start cache.

    ``WarmStart(maker, fgraph)`` computes the key of ``fgraph`` (the graph
    before rewriting) and reads its entry; ``restored`` is then true when the
    optimized graph was found, and :meth:`optimized_graph`, ``order`` and
    :meth:`program` rebuild the function from it.  Otherwise :meth:`store`
    writes the entry once the function is built.
    """

    def __init__(self, maker, fgraph):
        self.key = None
        self._read = None          # (inode, mtime) of the entry file read
        self.restored = False
        self.order = None
        self._natives = None
        self._outputs = None
        from symgraph.config import config

        # optimizer_verbose asks to see the rewrites run: a restored graph runs none
        if not config.compile_warm_start or config.optimizer_verbose or \
                [b.name for b in maker.backends] not in (["cpu"], ["cuda", "cpu"]):
            return
        try:
            self.key = warm_key(maker, fgraph)
        except Uncacheable as exc:
            stats["uncacheable"] += 1
            _log.debug("warm start: this function is not stored: %s", exc)
            return
        try:
            self._load(fgraph)
        except Exception as exc:  # noqa: BLE001  (never fail a compile over the cache)
            _log.warning("warm start: reading the entry of %s failed (%s); compiling",
                         self.key, exc)
            self._discard()

    # -- reading

    def _load(self, fgraph):
        from symgraph.backends.native.cache import get_cache

        cache = get_cache()
        path = _entry_path(cache, self.key)
        if not cache.check_private_file(path):
            stats["missed"] += 1
            return
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                self._read = (st.st_ino, st.st_mtime_ns)
                data = handle.read()
            payload = _verified_payload(data)
            record = pickle.loads(payload)
            if record.get("key") != self.key or record.get("format") != WARM_FORMAT:
                raise _Damaged("the entry holds another key")
            self._outputs, self.order = _rebuild(record["graph"], fgraph.inputs)
            self._natives = record["natives"]
        except Exception as exc:  # noqa: BLE001  (a damaged entry is a miss)
            stats["damaged"] += 1
            _log.warning("warm start: the entry %s is damaged (%s): compiling again",
                         path, exc)
            self._discard()
            return
        self.restored = True
        if self._natives is None:
            stats["restored"] += 1      # the Python VM's: nothing more to load
        with contextlib.suppress(OSError):
            os.utime(path)   # its last use, as for the libraries

    def _discard(self):
        """Forget what was read, and remove the entry (it is stored again) unless
        another process has replaced it since it was read."""
        self.restored, self.order, self._natives, self._outputs = False, None, None, None
        if self.key is None or self._read is None:
            return
        from symgraph.backends.native.cache import get_cache

        with contextlib.suppress(Exception):
            path = _entry_path(get_cache(), self.key)
            st = os.stat(path)
            if (st.st_ino, st.st_mtime_ns) == self._read:
                os.unlink(path)

    def optimized_graph(self, fgraph, destroyable_positions):
        """The restored optimized FunctionGraph over ``fgraph``'s inputs, with
        the features a freshly compiled one has (History, DestroyHandler)."""
        from symgraph.graph.destroy import DestroyHandler
        from symgraph.graph.fg import FunctionGraph, History

        restored = FunctionGraph(fgraph.inputs, self._outputs, clone=False,
                                 update_mapping=fgraph.update_mapping)
        restored.attach_feature(History())
        restored.attach_feature(DestroyHandler(
            [fgraph.inputs[i] for i in destroyable_positions]))
        restored.attach_feature(KeptSchedule(self.order))
        return restored

    def program(self, fgraph, order, timings, extra_steps, backends):
        """The NativeProgram rebuilt from the entry's records, or None when a
        library it names is gone or damaged (the entry is then removed)."""
        if self._natives is None:
            return None
        from symgraph.compile.warm_link import restore_program

        start = time.perf_counter()
        try:
            native = restore_program(fgraph, order, self._natives, extra_steps, backends)
        except Exception as exc:  # noqa: BLE001  (relink as usual)
            _log.warning("warm start: the libraries of entry %s could not be loaded (%s); "
                         "linking again", self.key, exc)
            native = None
        timings["load"] = timings.get("load", 0.0) + time.perf_counter() - start
        if native is None:
            stats["damaged"] += 1
            self._discard()
            return None
        stats["restored"] += 1
        return native

    # -- writing

    def store(self, fgraph, order, native, backends):
        """Write the entry of a function just compiled (``native``: its
        NativeProgram, None for the Python VM)."""
        if self.key is None or self.restored:
            return
        try:
            from symgraph.backends.native.cache import get_cache
            from symgraph.backends.native.cache_files import write_private_atomic
            from symgraph.compile.warm_link import native_records

            natives = None if native is None else native_records(order, native, backends)
            record = {"format": WARM_FORMAT, "key": self.key,
                      "graph": _flatten(fgraph, order), "natives": natives}
            payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
            cache = get_cache()
            text = MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
            write_private_atomic(_entry_path(cache, self.key), text)
            cache.note_added(len(text))     # it counts towards the size cap
        except Exception as exc:  # noqa: BLE001  (an op that does not pickle, a full disk)
            stats["uncacheable"] += 1
            _log.debug("warm start: the function was not stored: %s", exc)
            return
        stats["stored"] += 1


class KeptSchedule(Feature):
    """Keeps a restored graph's ``toposort()`` the stored schedule: the
    features that ordered the nodes when it was compiled (in-place updates
    last) belong to the rewrite phase, which a restored graph skips."""

    def __init__(self, order):
        self.order = list(order)

    def orderings(self, fgraph):
        kept = [node for node in self.order if node in fgraph.apply_nodes]
        return {node: [before] for before, node in zip(kept, kept[1:])}


def _verified_payload(data):
    if not data.startswith(MAGIC):
        raise _Damaged("not a warm-start entry of this format")
    head, sep, payload = data[len(MAGIC):].partition(b"\n")
    if not sep or hashlib.sha256(payload).hexdigest().encode() != head:
        raise _Damaged("its content does not match its hash (truncated or altered)")
    return payload


# -- the graph, flat

def _flatten(fgraph, order):
    """``fgraph`` (scheduled as ``order``) as tables that refer by number:
    {"vars": [(class, state)], "nodes": [(class, state, inputs, outputs)],
    "outputs": [ref]}; a ref is ("in", position) or ("var", number)."""
    ref = {var: ("in", pos) for pos, var in enumerate(fgraph.inputs)}
    variables, nodes = [], []

    def use(var):
        if var not in ref:
            if var.owner is not None:
                raise Uncacheable(f"{var} is computed by a node outside the schedule")
            _add(var)
        return ref[var]

    def _add(var):
        state = dict(var.__dict__)
        state.pop("_eval_cache", None)
        state["owner"] = None
        ref[var] = ("var", len(variables))
        variables.append((type(var), state))

    for node in order:
        inputs = [use(v) for v in node.inputs]
        for out in node.outputs:
            _add(out)
        state = {k: v for k, v in node.__dict__.items() if k not in ("inputs", "outputs")}
        nodes.append((type(node), state, inputs, [ref[o] for o in node.outputs]))
    return {"vars": variables, "nodes": nodes, "outputs": [use(v) for v in fgraph.outputs]}


def _rebuild(flat, inputs):
    """(outputs, order) of a graph flattened by :func:`_flatten`, over ``inputs``."""
    variables = []
    for cls, state in flat["vars"]:
        var = cls.__new__(cls)
        var.__dict__.update(state)
        variables.append(var)

    def get(ref):
        kind, number = ref
        return inputs[number] if kind == "in" else variables[number]

    order = []
    for cls, state, ins, outs in flat["nodes"]:
        node = cls.__new__(cls)
        node.__dict__.update(state)
        node.inputs = [get(r) for r in ins]
        node.outputs = [get(r) for r in outs]
        for index, out in enumerate(node.outputs):
            out.owner, out.index = node, index
        order.append(node)
    return [get(r) for r in flat["outputs"]], order
