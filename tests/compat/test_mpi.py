"""Theano's MPI ops of ``tensor.io`` (send, recv, isend, irecv, the waits and the
schedule keys): graph construction and scheduling in this process, and real
transfers between two processes started by ``mpiexec -n 2``."""

import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.tensor import io


def _mpiexec():
    beside = pathlib.Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def test_missing_mpi4py_names_the_packages(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `import mpi4py` fail
    with pytest.raises(ImportError, match=r"pip install mpi4py mpich"):
        io.recv((3,), "float64", 0, 1)
    with pytest.raises(ImportError, match=r"pip install mpi4py mpich"):
        io.send(T.dvector(), 1, 1)


# The tests below build MPI ops, which needs the mpi4py package (not MPI itself).
needs_mpi4py = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                                  reason="needs mpi4py (pip install mpi4py mpich)")


@needs_mpi4py
def test_graph_construction():
    request, data = io.irecv((2, 3), "float32", source=0, tag=5)
    assert isinstance(request.type, io.MPIRequestType)
    assert data.type.dtype == "float32" and data.type.shape == (2, 3)
    received = io.recv((4,), "int64", 0, 6)
    assert isinstance(received.owner.op, io.MPIRecvWait)
    assert received.owner.op.view_map == {0: [1]}
    assert received.type.shape == (4,) and received.type.dtype == "int64"
    x = T.dmatrix("x")
    request, sent = io.isend(x, dest=1, tag=7)
    assert sent.type == x.type and isinstance(request.type, io.MPIRequestType)
    done = io.send(x, 1, 7)
    assert isinstance(done.owner.op, io.MPISendWait) and done.type.dtype == "bool"
    assert str(request.owner.op) == "MPISend{dest: 1, tag: 7}"


@needs_mpi4py
def test_bad_arguments():
    with pytest.raises(TypeError, match="tag must be an int"):
        io.recv((3,), "float64", 0, 1.5)
    with pytest.raises(ValueError, match="negative size"):
        io.irecv((-1,), "float64", 0, 1)
    with pytest.raises(TypeError, match="request output"):
        io.MPIRecvWait(1)(T.dvector(), T.dvector())
    with pytest.raises(TypeError, match="request output"):
        io.MPISendWait(1)(T.dvector(), T.dvector())


@needs_mpi4py
def test_equal_receives_stay_two_transfers():
    a = io.recv((3,), "float64", 0, 1)
    b = io.recv((3,), "float64", 0, 1)
    f = symgraph.function([], a - b)
    receives = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, io.MPIRecv)]
    assert len(receives) == 2  # merging them would consume only one message


def _keys(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort()
            if type(n.op).__name__.startswith("MPI")]


@needs_mpi4py
def test_schedule_keys():
    x = T.dvector("x")
    request, data = io.irecv((3,), "float64", 0, 9)
    wait = io.MPIRecvWait(9)(request, data)
    send_request, sent = io.isend(x, 1, 4)
    send_wait = io.MPISendWait(4)(send_request, sent)
    y = T.exp(x)
    for node, key in ((request.owner, -1), (send_request.owner, -1), (wait.owner, 1),
                      (send_wait.owner, 1), (y.owner, 0)):
        assert io.mpi_send_wait_key(node) == key
    assert [io.mpi_tag_key(v.owner) for v in (request, wait, send_request, send_wait, y)] \
        == [9, 9, 4, 4, 0]
    assert io.mpi_keys == (io.mpi_send_wait_key, io.mpi_tag_key)


@needs_mpi4py
def test_compiled_order_starts_early_and_waits_late():
    x = T.dvector("x")
    received = io.recv((3,), "float64", 0, 2)
    f = symgraph.function([x], [io.send(x * 2, 1, 1), received.sum()])
    # The plain depth-first order would wait on the send before posting the
    # receive: two ranks doing this with large arrays deadlock.
    order = _keys(f)
    assert sorted(order[:2]) == ["MPIRecv", "MPISend"]
    assert order[2:] == ["MPISendWait", "MPIRecvWait"]  # tag 1 before tag 2


@needs_mpi4py
def test_compiled_order_keeps_data_dependences():
    received = io.recv((3,), "float64", 0, 1)
    f = symgraph.function([], io.send(received + 1, 0, 0))
    # the send needs the received data: its start comes after the receive's wait
    assert _keys(f) == ["MPIRecv", "MPIRecvWait", "MPISend", "MPISendWait"]


@needs_mpi4py
def test_lower_tags_first():
    x = T.dvector("x")
    f = symgraph.function([x], [io.send(x, 1, 8), io.send(x + 1, 1, 3)])
    tags = [n.op.tag for n in f.maker.fgraph.toposort() if isinstance(n.op, io.MPISendWait)]
    assert tags == [3, 8]


PROGRAM = r'''
import json
import sys

import numpy as np

import symgraph
import symgraph.tensor as T
from symgraph.tensor import io

mode = symgraph.Mode(linker=sys.argv[2])
rank = io._comm().COMM_WORLD.rank
out = {}


def fn(inputs, outputs):
    return symgraph.function(inputs, outputs, mode=mode)


def error(call):
    try:
        call()
    except Exception as exc:
        return [type(exc).__name__, str(exc).splitlines()[0]]
    return None


x = T.dvector("x")
big = 2_000_000  # 16 MB: past MPI's eager limit, so a send waits for its receive
if rank == 0:
    fn([x], io.send(T.exp(x) * 2, 1, 11))(np.arange(4.0))
    request, data = io.isend(x[::-1] + 1, 1, 12)
    fn([x], io.MPISendWait(12)(request, data))(np.arange(4.0))
    fn([], io.send(T.arange(6, dtype="float64"), 1, 21))()
    fn([], io.send(T.arange(6, dtype="float64").reshape((2, 3)), 1, 22))()
    fn([], io.send(T.arange(6, dtype="int64"), 1, 23))()
    fn([], io.send(T.arange(6, dtype="float64"), 1, 24))()
    # each rank sends a large array and receives the other's, the send listed first
    y = io.recv((big,), "float64", 1, 31)
    out["exchange"] = float(fn([x], [io.send(x, 1, 30), y.sum()])(np.ones(big))[1])
else:
    z = io.recv((4,), "float64", 0, 11)
    out["blocking"] = fn([], z * 10)().tolist()
    request, data = io.irecv((4,), "float64", 0, 12)
    out["nonblocking"] = fn([], io.MPIRecvWait(12)(request, data) * 1)().tolist()
    out["larger_sent"] = error(fn([], io.recv((5,), "float64", 0, 21)))
    out["wrong_shape"] = error(fn([], io.recv((3, 2), "float64", 0, 22)))
    out["wrong_dtype"] = error(fn([], io.recv((6,), "float64", 0, 23)))
    out["smaller_sent"] = error(fn([], io.recv((7,), "float64", 0, 24)))
    y = io.recv((big,), "float64", 0, 30)
    out["exchange"] = float(fn([x], [io.send(x * 3, 0, 31), y.sum()])(np.ones(big))[1])
with open(f"{sys.argv[1]}/rank{rank}.json", "w") as fh:
    json.dump(out, fh)
'''


@needs_mpi4py
@pytest.mark.slow
@pytest.mark.parametrize("linker", ["c|py", "py"])
def test_two_processes(tmp_path, linker):
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec (pip install mpich)")
    try:
        from mpi4py import MPI  # noqa: F401
    except (ImportError, RuntimeError) as exc:
        pytest.skip(f"mpi4py cannot load an MPI library: {exc}")
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(PROGRAM))
    # HYDRA_LAUNCHER: MPICH starts the ranks by fork, needing no ssh in a container
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2]),
               HYDRA_LAUNCHER="fork")
    proc = subprocess.Popen([mpiexec, "-n", "2", sys.executable, str(script), str(tmp_path),
                             linker], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the ranks too, not only mpiexec
        output, _ = proc.communicate()
        pytest.fail("the two ranks did not finish in 180 s (a deadlock?):\n" + output[-3000:])
    assert proc.returncode == 0, output[-6000:]
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    rank1 = json.loads((tmp_path / "rank1.json").read_text())
    np.testing.assert_allclose(rank1["blocking"], np.exp(np.arange(4.0)) * 20)
    np.testing.assert_allclose(rank1["nonblocking"], [4.0, 3.0, 2.0, 1.0])
    assert rank1["larger_sent"][0] == "ValueError"
    assert "larger than the declared shape (5,)" in rank1["larger_sent"][1]
    assert rank1["wrong_shape"][0] == "ValueError"
    assert "shape (2, 3) was sent" in rank1["wrong_shape"][1]
    assert "declares shape (3, 2)" in rank1["wrong_shape"][1]
    assert rank1["wrong_dtype"][0] == "TypeError"
    assert "int64" in rank1["wrong_dtype"][1] and "declares float64" in rank1["wrong_dtype"][1]
    assert rank1["smaller_sent"][0] == "ValueError"
    assert "shape (6,) was sent" in rank1["smaller_sent"][1]
    assert rank0["exchange"] == 3 * 2_000_000 and rank1["exchange"] == 2_000_000
