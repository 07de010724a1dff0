"""Theano's ``tensor.io``: ``load`` and ``LoadFromDisk`` (``symgraph.ops.io``), and
the MPI transfers between processes started by ``mpiexec``.

    # on rank 0 (mpiexec -n 2 python program.py)
    x = T.dvector("x")
    f = function([x], send(x * 2, dest=1, tag=11))
    f(numpy.arange(3.0))
    # on rank 1
    z = recv((3,), "float64", source=0, tag=11)
    g = function([], z.sum())
    g()  # 6.0

``isend(var, dest, tag)`` and ``irecv(shape, dtype, source, tag)`` start a
transfer and return ``[request, data]``; ``MPISendWait`` / ``MPIRecvWait`` wait
on the request (``send`` and ``recv`` are a start and its wait).  The data that
``irecv`` returns is only valid after its wait: compute with ``recv``'s result
or with the output of ``MPIRecvWait``.  The wait of a send must be one of the
function's outputs (or feed one), else the send is dead code and is removed.

Transfers use ``mpi4py`` on ``MPI.COMM_WORLD``; it is imported when an MPI op is
built (the package only) and when one runs (``mpi4py.MPI``, which starts MPI),
never by ``import symgraph``.  Each message carries a small header (the
array's dtype and shape) before the data, so that a receive whose declared shape
or dtype differs from what was sent raises an error naming both instead of
returning reinterpreted bytes; both ends must therefore be these ops.

Scheduling: when a graph holds MPI ops, compiling it (with any optimizer but
``None``) attaches ``MPISchedule``, which orders the nodes as Theano's
``sort_schedule_fn(*mpi_cmps)`` did: among the nodes ready to run, transfers
start first and waits come last (``mpi_send_wait_key``), lower tags first
(``mpi_tag_key``).  Two processes that each send and then receive a large array
therefore both post their receive before waiting on their send.

The ops run their Python ``perform`` (they call MPI), so they need linker
``c|py`` (the default) or ``py``; linker ``c`` refuses them.
"""

import heapq
import itertools

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Type, Variable
from symgraph.graph.fg import Feature
from symgraph.ops.io import LoadFromDisk, PathType, generic_string, load  # noqa: F401
from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter
from symgraph.tensor.type import TensorType

__all__ = ["LoadFromDisk", "PathType", "generic_string", "load",
           "MPIRequestType", "MPIRecv", "MPIRecvWait", "MPISend", "MPISendWait",
           "isend", "send", "irecv", "recv", "mpi_send_wait_key", "mpi_tag_key",
           "mpi_keys", "MPISchedule"]

_INSTALL_HINT = "pip install mpi4py mpich"
_MAGIC = b"SGMPI\x01\x00\x00"
# magic (8 bytes), dtype string (16), ndim (8), then one int64 per dimension;
# the header is padded to 64 bytes so that the data after it stays aligned.
_PREFIX = 32


def _require_mpi4py():
    # Building a graph needs only the package (no MPI start-up); a clear error
    # here beats one from deep inside a compiled function.
    try:
        import mpi4py  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"symgraph's MPI ops (tensor.io.send, recv, ...) need mpi4py and an "
                          f"MPI library: {_INSTALL_HINT}") from exc


def _comm():
    """``MPI.COMM_WORLD``, importing mpi4py.MPI (which initializes MPI) on first use."""
    _require_mpi4py()
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as exc:  # mpi4py without a loadable libmpi
        raise ImportError(f"mpi4py is installed but could not load an MPI library "
                          f"({exc}); {_INSTALL_HINT}") from exc
    return MPI


def _header_size(ndim):
    return -(-(_PREFIX + 8 * ndim) // 64) * 64


def _pack(array):
    """One contiguous byte buffer: the header describing ``array``, then its data."""
    array = np.ascontiguousarray(array)
    dtype = array.dtype.str.encode()
    size = _header_size(array.ndim)
    buf = np.empty(size + array.nbytes, dtype=np.uint8)
    buf[:size] = 0
    buf[:8] = np.frombuffer(_MAGIC, np.uint8)
    buf[8:8 + len(dtype)] = np.frombuffer(dtype, np.uint8)
    buf[24:32].view(np.int64)[0] = array.ndim
    buf[_PREFIX:_PREFIX + 8 * array.ndim].view(np.int64)[:] = array.shape
    buf[size:] = array.reshape(-1).view(np.uint8)
    return buf


def _described(buf, count):
    """``(dtype, shape)`` that the header in ``buf`` (``count`` bytes received)
    announces, or None when it is not a header written by ``_pack``."""
    if count < _PREFIX or bytes(buf[:8]) != _MAGIC:
        return None
    ndim = int(buf[24:32].view(np.int64)[0])
    if ndim < 0 or count < _PREFIX + 8 * ndim or len(buf) < _PREFIX + 8 * ndim:
        return None
    dtype = np.dtype(bytes(buf[8:24]).rstrip(b"\x00").decode())
    return dtype, tuple(int(d) for d in buf[_PREFIX:_PREFIX + 8 * ndim].view(np.int64))


class _Transfer:
    """A started transfer: the mpi4py request, the buffer it reads or fills
    (kept alive until the wait) and what the op expects, for error messages."""

    def __init__(self, op, request, buf):
        self.op = op
        self.request = request
        self.buf = buf
        self.done = False

    def wait(self):
        """Block until the transfer completes; for a receive, check the header."""
        if self.done:
            raise RuntimeError(f"{self.op}: this transfer was already waited on (a "
                               f"request may be waited on once per call)")
        MPI = _comm()
        status = MPI.Status()
        try:
            self.request.Wait(status)
        except MPI.Exception as exc:
            if isinstance(self.op, MPIRecv) and exc.Get_error_class() == MPI.ERR_TRUNCATE:
                raise ValueError(f"{self.op}: the message from rank {self.op.source} (tag "
                                 f"{self.op.tag}) is larger than the declared shape "
                                 f"{self.op.shape} of {self.op.dtype}") from exc
            raise
        finally:
            self.done = True
        if isinstance(self.op, MPIRecv):
            self.op._check(self.buf, status.Get_count(MPI.BYTE))


class MPIRequestType(Type):
    """The type of a started transfer (Theano used ``Generic``): the value an
    ``MPISend``/``MPIRecv`` gives its wait."""

    __props__ = ()
    variable_class = Variable
    constant_class = Constant

    def filter(self, value, strict=False, allow_downcast=None):
        if isinstance(value, _Transfer):
            return value
        raise TypeError(f"{self}: expected a started MPI transfer, got "
                        f"{type(value).__name__}")

    def values_eq(self, a, b):
        return a is b

    def __str__(self):
        return "MPIRequestType"

    __repr__ = __str__


_serials = itertools.count()


def _as_int(value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"MPI {what} must be an int, got {value!r}")
    return int(value)


class MPIRecv(Op):
    """Starts receiving an array of ``shape`` and ``dtype`` from rank
    ``source`` with ``tag``; outputs ``[request, data]``.  ``data`` holds the
    message only after ``MPIRecvWait`` ran on ``request``.

    ``serial`` tells transfers apart: two ``irecv`` calls with equal arguments
    are two messages, never merged into one node (Theano merged them).
    """

    __props__ = ("source", "tag", "shape", "dtype", "serial")

    def __init__(self, source, tag, shape, dtype, serial=None):
        self.source = _as_int(source, "source")
        self.tag = _as_int(tag, "tag")
        self.shape = tuple(_as_int(d, "shape entries") for d in shape)
        if any(d < 0 for d in self.shape):
            raise ValueError(f"MPIRecv: negative size in shape {self.shape}")
        self.dtype = str(np.dtype(dtype))
        if np.dtype(self.dtype).hasobject:
            raise TypeError("MPIRecv: object arrays cannot be sent through MPI")
        self.serial = next(_serials) if serial is None else serial

    def __str__(self):
        return (f"MPIRecv{{source: {self.source}, tag: {self.tag}, shape: {self.shape}, "
                f"dtype: {self.dtype}}}")

    __repr__ = __str__

    def make_node(self):
        _require_mpi4py()
        return Apply(self, [], [MPIRequestType()(),
                                TensorType(self.dtype, shape=self.shape)()])

    def perform(self, node, inputs, output_storage):
        MPI = _comm()
        dtype = np.dtype(self.dtype)
        size = _header_size(len(self.shape))
        nbytes = int(np.prod(self.shape, dtype=np.int64)) * dtype.itemsize
        buf = np.empty(size + nbytes, dtype=np.uint8)
        request = MPI.COMM_WORLD.Irecv([buf, MPI.BYTE], source=self.source, tag=self.tag)
        output_storage[0][0] = _Transfer(self, request, buf)
        output_storage[1][0] = buf[size:].view(dtype).reshape(self.shape)

    def _check(self, buf, count):
        expected = (np.dtype(self.dtype), self.shape)
        sent = _described(buf, count)
        where = f"{self} (message from rank {self.source}, tag {self.tag})"
        if sent is None:
            raise ValueError(f"{where}: the message has no symgraph header; send it with "
                             f"tensor.io.send or isend")
        if sent[0] != expected[0]:
            raise TypeError(f"{where}: a {sent[0]} array of shape {sent[1]} was sent; this "
                            f"receive declares {expected[0]}")
        if sent[1] != expected[1]:
            raise ValueError(f"{where}: an array of shape {sent[1]} was sent; this receive "
                             f"declares shape {expected[1]}")
        if count != len(buf):
            raise ValueError(f"{where}: received {count} bytes, expected {len(buf)}")

    def infer_shape(self, fgraph, node, input_shapes):
        return [None, self.shape]

    def do_constant_folding(self, fgraph, node):
        return False  # a receive must run in every call


class MPIRecvWait(Op):
    """Waits for an ``MPIRecv``: inputs ``(request, data)``, output ``data``
    (a view of it, complete once this node ran)."""

    __props__ = ("tag",)
    view_map = {0: [1]}

    def __init__(self, tag):
        self.tag = _as_int(tag, "tag")

    def make_node(self, request, data):
        _check_request(self, request)
        if not isinstance(data, Variable) or not isinstance(data.type, TensorType):
            raise TypeError(f"{self}: data must be the tensor output of MPIRecv, got "
                            f"{data!r}")
        return Apply(self, [request, data], [data.type()])

    def perform(self, node, inputs, output_storage):
        request, data = inputs
        request.wait()
        output_storage[0][0] = data

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def do_constant_folding(self, fgraph, node):
        return False


class MPISend(Op):
    """Starts sending an array to rank ``dest`` with ``tag``; outputs
    ``[request, data]`` (``data`` a view of the input, for ``MPISendWait``).
    The array is copied into the message when the node runs, so later
    in-place ops on it cannot change what is sent.

    ``serial`` tells transfers apart, as for ``MPIRecv``.
    """

    __props__ = ("dest", "tag", "serial")
    view_map = {1: [0]}

    def __init__(self, dest, tag, serial=None):
        self.dest = _as_int(dest, "dest")
        self.tag = _as_int(tag, "tag")
        self.serial = next(_serials) if serial is None else serial

    def __str__(self):
        return f"MPISend{{dest: {self.dest}, tag: {self.tag}}}"

    __repr__ = __str__

    def make_node(self, data):
        from symgraph.tensor.basic import as_tensor_variable

        _require_mpi4py()
        data = as_tensor_variable(data)
        if np.dtype(data.type.dtype).hasobject:
            raise TypeError(f"{self}: object arrays cannot be sent through MPI")
        return Apply(self, [data], [MPIRequestType()(), data.type()])

    def perform(self, node, inputs, output_storage):
        MPI = _comm()
        (data,) = inputs
        buf = _pack(data)
        request = MPI.COMM_WORLD.Isend([buf, MPI.BYTE], dest=self.dest, tag=self.tag)
        output_storage[0][0] = _Transfer(self, request, buf)
        output_storage[1][0] = data

    def infer_shape(self, fgraph, node, input_shapes):
        return [None, input_shapes[0]]

    def do_constant_folding(self, fgraph, node):
        return False  # a send must run in every call


class MPISendWait(Op):
    """Waits for an ``MPISend``: inputs ``(request, data)``; its output, a
    boolean scalar (True), is what a function returns to make the send happen
    (Theano returned ``True`` through a ``Generic`` output)."""

    __props__ = ("tag",)

    def __init__(self, tag):
        self.tag = _as_int(tag, "tag")

    def make_node(self, request, data):
        _check_request(self, request)
        return Apply(self, [request, data], [TensorType("bool", shape=())()])

    def perform(self, node, inputs, output_storage):
        inputs[0].wait()
        output_storage[0][0] = np.array(True)

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def do_constant_folding(self, fgraph, node):
        return False


def _check_request(op, request):
    if not isinstance(request, Variable) or not isinstance(request.type, MPIRequestType):
        raise TypeError(f"{op}: the first input must be the request output of an MPI "
                        f"start op (isend or irecv), got {request!r}")


def isend(var, dest, tag):
    """Non-blocking send of ``var`` to rank ``dest``: ``[request, data]``; pass
    both to ``MPISendWait(tag)``, whose output the function must compute."""
    return MPISend(dest, tag)(var)


def send(var, dest, tag):
    """Blocking send of ``var`` to rank ``dest`` with ``tag``: a boolean scalar
    to list among the function's outputs (the send completes when it is computed)."""
    request, data = isend(var, dest, tag)
    return MPISendWait(tag)(request, data)


def irecv(shape, dtype, source, tag):
    """Non-blocking receive of a ``shape`` array of ``dtype`` from rank
    ``source``: ``[request, data]``; ``data`` is valid only after
    ``MPIRecvWait(tag)(request, data)``, whose output to compute with."""
    return MPIRecv(source, tag, shape, dtype)()


def recv(shape, dtype, source, tag):
    """Blocking receive: the ``shape`` array of ``dtype`` that rank ``source``
    sent with ``tag``."""
    request, data = irecv(shape, dtype, source, tag)
    return MPIRecvWait(tag)(request, data)


_STARTS = (MPIRecv, MPISend)
_WAITS = (MPIRecvWait, MPISendWait)


def mpi_send_wait_key(node):
    """Schedule key of an Apply node: -1 for the ops that start a transfer (run
    them as early as possible), 1 for waits (as late as possible), 0 otherwise."""
    if isinstance(node.op, _WAITS):
        return 1
    if isinstance(node.op, _STARTS):
        return -1
    return 0


def mpi_tag_key(node):
    """Schedule key breaking ties between MPI nodes: their tag (lower first);
    0 for other nodes."""
    if isinstance(node.op, _STARTS + _WAITS):
        return node.op.tag
    return 0


#: The keys MPISchedule sorts ready nodes by, most significant first.
mpi_keys = (mpi_send_wait_key, mpi_tag_key)


class MPISchedule(Feature):
    """Orders a graph's nodes by ``keys`` (default ``mpi_keys``): a topological
    sort that, among the nodes whose inputs are ready, runs the one with the
    smallest keys first (ties: the order symgraph would have used).

    It returns the whole order as orderings, so ``fgraph.toposort()`` follows
    it; the other features' orderings (in-place ops after their readers) are
    respected, since they are part of what makes a node ready.
    """

    def __init__(self, keys=mpi_keys):
        self.keys = tuple(keys)

    def orderings(self, fgraph):
        order = self.schedule(fgraph)
        return {node: {prev} for prev, node in zip(order, order[1:])}

    def schedule(self, fgraph):
        """The nodes of ``fgraph`` in key order, dependencies first."""
        from symgraph.graph.basic import io_toposort

        extra = {}
        for feature in fgraph.features:
            if feature is not self:
                for node, before in feature.orderings(fgraph).items():
                    extra.setdefault(node, set()).update(before)
        base = io_toposort(fgraph.inputs, fgraph.outputs, extra)
        position = {node: i for i, node in enumerate(base)}
        waiting, users = {}, {node: [] for node in base}
        for node in base:
            deps = {i.owner for i in node.inputs if i.owner in position}
            deps |= {d for d in extra.get(node, ()) if d in position}
            waiting[node] = len(deps)
            for dep in deps:
                users[dep].append(node)

        def entry(node):
            return tuple(key(node) for key in self.keys) + (position[node],)

        ready = [(entry(n), position[n], n) for n in base if waiting[n] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, _, node = heapq.heappop(ready)
            order.append(node)
            for user in users[node]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, (entry(user), position[user], user))
        return order


@graph_rewriter(name="mpi_schedule")
def mpi_schedule(fgraph, verbose=False):
    """Attach MPISchedule to graphs that hold MPI ops (changes no node)."""
    if fgraph.get_feature(MPISchedule) is None and any(
            isinstance(node.op, _STARTS + _WAITS) for node in fgraph.apply_nodes):
        fgraph.attach_feature(MPISchedule())
    return 0


# In the first phase (merge, which every optimizer but None runs), so that
# every later toposort already follows the MPI order.
register(mpi_schedule, "fast_run", "fast_compile", "merge", phase="merge")
