"""The Python API's contracts beyond results: tensor kinds (DLPack, buffer protocol), clear
errors for bad input, error classes that tell a timeout from a lost peer, Work semantics,
the GIL released while waiting, and backends written in Python."""
import array
import datetime
import os
import threading

import numpy as np
import pytest

import multiproc
import plexus as dist


@pytest.fixture
def world_of_one():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class DLPackOnly:
    """An object offering only __dlpack__ (as a JAX or CuPy array would)."""

    def __init__(self, array_):
        self._array = array_

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_tensor_kinds_are_used_in_place(world_of_one):
    backing = np.arange(4, dtype=np.float32)
    dist.all_reduce(DLPackOnly(backing))  # World of one: the sum is the input itself.
    dist.broadcast(DLPackOnly(backing), src=0)
    np.testing.assert_array_equal(backing, [0, 1, 2, 3])
    buffer = bytearray(b"\x01\x02\x03")
    dist.all_reduce(buffer, op=dist.ReduceOp.MAX)
    assert buffer == bytearray(b"\x01\x02\x03")
    floats = array.array("f", [1.5, 2.5])
    dist.all_reduce(floats)
    assert list(floats) == [1.5, 2.5]
    view = memoryview(np.zeros(3, np.int64))
    dist.all_reduce(view)
    torch = pytest.importorskip("torch")
    out = torch.zeros(1, 3)
    dist.all_gather_into_tensor(out, torch.arange(3.0))
    assert out.tolist() == [[0.0, 1.0, 2.0]]
    with pytest.raises(dist.InvalidArgumentError, match="not contiguous"):
        dist.all_reduce(torch.zeros(3, 4).t())
    # A contiguous slice is a view into its base's memory.
    base = np.zeros(6, np.float32)
    out = base[2:5]
    dist.all_gather_into_tensor(out, np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(base, [0, 0, 1, 2, 3, 0])


class AddressRecorder:
    """A world-of-one backend noting where the memory it is handed lives."""

    seen = []

    def __init__(self, store, rank, world_size, timeout):
        pass

    def all_reduce(self, tensor, op, timeout=None):
        AddressRecorder.seen.append(tensor.__array_interface__["data"][0])


def test_zero_copy():
    # The backend must receive the caller's own memory, for every kind of tensor.
    import ctypes
    dist.Backend.register_backend("addressrecorder", AddressRecorder)
    dist.init_process_group("addressrecorder", store=dist.HashStore(), rank=0, world_size=1)
    try:
        numpy_array = np.zeros(4, np.float32)
        raw = bytearray(8)
        behind_dlpack = np.zeros(3, np.int64)
        expected = [numpy_array.ctypes.data,
                    ctypes.addressof((ctypes.c_char * len(raw)).from_buffer(raw)),
                    behind_dlpack.ctypes.data]
        for tensor in (numpy_array, raw, DLPackOnly(behind_dlpack)):
            dist.all_reduce(tensor)
        torch = pytest.importorskip("torch")
        torch_tensor = torch.zeros(5)
        expected.append(torch_tensor.data_ptr())
        dist.all_reduce(torch_tensor)
        assert AddressRecorder.seen == expected
    finally:
        dist.destroy_process_group()
        dist.Backend.unregister_backend("addressrecorder")


def test_bad_input_is_a_clear_error(world_of_one):
    strided = np.zeros(8, np.float32)[::2]
    with pytest.raises(dist.InvalidArgumentError, match="all_reduce: tensor is not contiguous"):
        dist.all_reduce(strided)
    frozen = np.zeros(3, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(dist.InvalidArgumentError, match="read-only"):
        dist.all_reduce(frozen)
    dist.all_gather([np.zeros(3, np.float32)], frozen)  # Read-only is fine where only read.
    with pytest.raises(dist.InvalidArgumentError, match="format 'I'"):
        dist.all_reduce(np.zeros(3, np.uint32))
    with pytest.raises(dist.InvalidArgumentError, match="expected a torch tensor"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(dist.InvalidArgumentError, match="all_gather"):
        dist.all_gather([np.zeros(3), np.zeros(3)], np.zeros(3))  # Two outputs, world of one.
    with pytest.raises(ValueError, match="src rank 3 is not in the group"):
        dist.broadcast(np.zeros(3), src=3)
    with pytest.raises(dist.InvalidArgumentError, match="BAND"):
        dist.all_reduce(np.zeros(3, np.float32), op=dist.ReduceOp.BAND)
    with pytest.raises(ValueError, match="Invalid backend 'nosuch'"):
        dist.Backend("nosuch")
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    # An error loses nothing: the group still works.
    t = np.ones(2)
    dist.all_reduce(t)
    np.testing.assert_array_equal(t, [1, 1])


def test_queries_before_init():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="not been initialized"):
        dist.get_rank()
    assert dist.is_available() and dist.is_gloo_available()
    assert dist.Backend("GLOO") == "gloo" and dist.Backend.TCP == "tcp"


def timeout_then_lost_peer(rank, world):
    torch_free = np.ones(4, np.float32)
    if rank == 1:
        # Rank 1 skips one all_reduce (rank 0 times out), then dies (rank 0 sees it lost).
        dist.recv(np.zeros(1, np.int32), src=0)
        os._exit(0)
    kind = {}
    try:
        work = dist.all_reduce(torch_free, async_op=True)
        work.wait(datetime.timedelta(seconds=1))
    except dist.DeadlineExceededError as error:
        kind["wait"] = (type(error).__name__, error.code)
    assert not work.is_completed()  # A timed-out wait does not cancel the operation.
    dist.send(np.zeros(1, np.int32), dst=1)
    try:
        work.wait()
    except dist.PlexusError as error:
        kind["lost"] = (type(error).__name__, error.code)
        assert isinstance(work.exception(), dist.UnavailableError)
    return kind


def test_timeout_and_lost_peer_are_distinguishable():
    kind = multiproc.run_world(timeout_then_lost_peer, 2, op_timeout=30, may_exit=[1],
                               destroy=False)[0]
    assert kind["wait"] == ("DeadlineExceededError", "DEADLINE_EXCEEDED"), kind
    assert kind["lost"] == ("UnavailableError", "UNAVAILABLE"), kind


def gil_released_while_waiting(rank, world):
    if rank == 1:
        dist.recv(np.zeros(1, np.int32), src=0)  # Rank 0 sends only once its Python code ran.
        dist.send(np.full(3, 9, np.int64), dst=0)
        return None
    out = np.zeros(3, np.int64)
    work = dist.irecv(out, src=1)
    waiter = threading.Thread(target=work.wait)
    waiter.start()
    # While the waiter blocks in wait(), this thread must be able to run Python: if wait()
    # held the GIL, the send below would never happen and rank 1 would never answer.
    total = sum(i * i for i in range(100000))
    dist.send(np.zeros(1, np.int32), dst=1)
    waiter.join(60)
    assert not waiter.is_alive()
    return total, out.tolist()


def test_gil_is_released_while_waiting():
    results = multiproc.run_world(gil_released_while_waiting, 2)
    assert results[0][1] == [9, 9, 9]


class StoreBackend:
    """A backend written in Python: all_reduce/broadcast/barrier through the group's store."""

    dtypes = ["float32", "float64", "int64"]

    def __init__(self, store, rank, world_size, timeout):
        self.store, self.rank, self.size = store, rank, world_size
        self.round = 0
        assert isinstance(timeout, datetime.timedelta)

    def _exchange(self, payload):
        self.round += 1
        self.store.set("r%d/%d" % (self.round, self.rank), payload)
        return [self.store.get("r%d/%d" % (self.round, r)) for r in range(self.size)]

    def all_reduce(self, tensor, op, timeout=None):
        if op != dist.ReduceOp.SUM:
            raise NotImplementedError("StoreBackend sums only, not %r" % (op,))
        parts = self._exchange(tensor.tobytes())
        tensor[...] = sum(np.frombuffer(p, dtype=tensor.dtype).reshape(tensor.shape)
                          for p in parts)

    def broadcast(self, tensor, root, timeout=None):
        parts = self._exchange(tensor.tobytes())
        tensor[...] = np.frombuffer(parts[root], dtype=tensor.dtype).reshape(tensor.shape)

    def barrier(self, timeout=None):
        self._exchange(b"")


def register_store_backend(rank, world):
    dist.Backend.register_backend("pystore", StoreBackend)


def python_backend_body(rank, world):
    assert dist.get_backend() == "cpu:pystore"
    t = np.full(3, rank + 1.0)
    dist.all_reduce(t)
    b = np.full(2, rank, np.int64)
    dist.broadcast(b, src=world - 1)
    dist.barrier()
    errors = {}
    try:
        dist.all_reduce(np.ones(2), op=dist.ReduceOp.MAX)
    except dist.PlexusError as error:
        errors["max"] = error.code
    try:
        dist.all_reduce(np.ones(2, np.int8))
    except dist.PlexusError as error:
        errors["int8"] = error.code
    try:
        dist.all_gather([np.zeros(1)] * world, np.zeros(1))
    except dist.PlexusError as error:
        errors["all_gather"] = error.code
    return t.tolist(), b.tolist(), errors


def test_backend_written_in_python():
    results = multiproc.run_world(python_backend_body, 3, backend="pystore",
                                  before_init=register_store_backend)
    for t, b, errors in results:
        assert t == [6.0, 6.0, 6.0] and b == [2, 2]
        assert errors == {"max": "UNIMPLEMENTED", "int8": "INVALID_ARGUMENT",
                          "all_gather": "UNIMPLEMENTED"}, errors
    with pytest.raises(dist.AlreadyExistsError):
        dist.Backend.register_backend("tcp", StoreBackend)


def monitored_barrier_names_missing(rank, world):
    if rank == world - 1:
        return None  # Never arrives.
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=1), wait_all_ranks=True)
    except dist.DeadlineExceededError as error:
        return str(error)
    return "passed"


def test_monitored_barrier_names_missing_ranks():
    results = multiproc.run_world(monitored_barrier_names_missing, 3)
    assert "rank 2 failed to pass monitored_barrier" in results[0], results
    assert "was not released by rank 0" in results[1], results


def test_dropping_works_keeps_memory_alive(world_of_one):
    # Works dropped before completion keep their tensors alive until done.
    for _ in range(100):
        dist.all_reduce(np.ones(1000), async_op=True)
    dist.barrier()
