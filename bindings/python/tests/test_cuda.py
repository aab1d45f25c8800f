"""CUDA memory through the Python API, on the host-only fake CUDA runtime and NCCL
(tests/fake_cuda, named by PLEXUS_CUDART_LIBRARY / PLEXUS_NCCL_LIBRARY): a DLPack object on a
CUDA device goes to the nccl backend, or through pinned host memory on a cpu-only backend
string, and Work.wait() orders the stream after the operation; reconfigure forms a new NCCL
communicator."""
import ctypes
import os

import pytest

import plexus
from multiproc import run_world

FAKE = os.path.abspath(os.environ.get("PLEXUS_CUDART_LIBRARY", ""))
pytestmark = pytest.mark.skipif(not os.path.exists(FAKE), reason="the fake CUDA runtime is absent")
os.environ["PLEXUS_CUDART_LIBRARY"] = FAKE  # Absolute, for the spawned ranks.
os.environ["PLEXUS_NCCL_LIBRARY"] = FAKE


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DeviceFloats:
    """float32 memory on a (fake) CUDA device, offered through DLPack like any CUDA array."""

    def __init__(self, device, values):
        self._cuda = ctypes.CDLL(FAKE)
        self.device = device
        self.count = len(values)
        self._cuda.cudaSetDevice(device)
        self._pointer = ctypes.c_void_p()
        self._cuda.cudaMalloc(ctypes.byref(self._pointer), ctypes.c_size_t(4 * self.count))
        host = (ctypes.c_float * self.count)(*values)
        self._cuda.cudaMemcpy(self._pointer, host, ctypes.c_size_t(4 * self.count), 1)
        self._shape = (ctypes.c_int64 * 1)(self.count)
        self._exported = []

    def __dlpack_device__(self):
        return (2, self.device)

    def __dlpack__(self, stream=None):
        managed = _DLManagedTensor()
        managed.dl_tensor = _DLTensor(self._pointer, _DLDevice(2, self.device), 1,
                                      _DLDataType(2, 32, 1), self._shape, None, 0)
        self._exported.append(managed)  # Each capsule's struct lives as long as this object.
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(managed), b"dltensor", None)

    def read(self):
        host = (ctypes.c_float * self.count)()
        self._cuda.cudaMemcpy(host, self._pointer, ctypes.c_size_t(4 * self.count), 2)
        return list(host)


def _all_reduce(rank, world_size):
    data = DeviceFloats(rank, [rank + 1.0] * 5)
    plexus.all_reduce(data)
    first = data.read()
    work = plexus.all_reduce(data, async_op=True)
    work.wait()  # Orders the (legacy default) stream after it; the copy in read() follows it.
    return first, data.read()


@pytest.mark.parametrize("backend", ["cpu:tcp,cuda:nccl", "tcp"])
def test_cuda_all_reduce(backend):
    results = run_world(_all_reduce, 3, backend=backend)
    for first, second in results:
        assert first == [6.0] * 5
        assert second == [18.0] * 5


def _mismatch(rank, world_size):
    data = DeviceFloats(rank, [1.0] * (4 + rank))
    with pytest.raises(plexus.FailedPreconditionError, match="disagree"):
        plexus.all_reduce(data)
    return data.read()


def test_cuda_count_mismatch_is_refused_before_launch():
    results = run_world(_mismatch, 2, backend="cpu:tcp,cuda:nccl")
    assert results == [[1.0] * 4, [1.0] * 5]


def _broadcast_and_gather(rank, world_size):
    data = DeviceFloats(rank, [float(rank)] * 3)
    plexus.broadcast(data, src=1)
    out = [DeviceFloats(rank, [0.0] * 3) for _ in range(world_size)]
    mine = DeviceFloats(rank, [10.0 * rank] * 3)
    plexus.all_gather(out, mine)
    return data.read(), [o.read() for o in out]


@pytest.mark.parametrize("backend", ["cpu:tcp,cuda:nccl", "gloo"])
def test_cuda_broadcast_and_all_gather(backend):
    for broadcast, gathered in run_world(_broadcast_and_gather, 2, backend=backend):
        assert broadcast == [1.0] * 3
        assert gathered == [[0.0] * 3, [10.0] * 3]


def _reconfigure_twice(rank, world_size, path):
    """torch 2.14's reconfigure regime through plexus's API on cuda:nccl: every rank, then,
    after a revoke, every rank but the last, on a new NCCL communicator."""
    store = plexus.FileStore(path, -1)
    store.set("handle/%d" % rank, plexus._get_reconfigure_handle())
    handles = [store.get("handle/%d" % r).decode() for r in range(world_size)]
    plexus._reconfigure(1, handles).wait()
    data = DeviceFloats(rank, [rank + 1.0] * 5)
    plexus.all_reduce(data)
    sums = [data.read()[0]]
    plexus.abort_process_group()
    if rank == world_size - 1:
        return sums
    plexus._reconfigure(2, handles[:-1]).wait()
    data = DeviceFloats(rank, [rank + 1.0] * 5)
    plexus.all_reduce(data)
    return sums + [data.read(), plexus.get_world_size()]


def test_cuda_reconfigure_forms_a_new_nccl_communicator(tmp_path):
    results = run_world(_reconfigure_twice, 3, str(tmp_path / "handles"),
                        backend="cpu:tcp,cuda:nccl", destroy=False,
                        init_options={"enable_reconfigure": True})
    assert results == [[6.0, [3.0] * 5, 2]] * 2 + [[6.0]]


def _exchange(rank, world_size):
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    out = DeviceFloats(rank, [rank * 1.5] * 1000)
    got = DeviceFloats(rank, [0.0] * 1000)
    # The receive first: only a batch keeps this from deadlocking on nccl's stream order.
    works = plexus.batch_isend_irecv([plexus.P2POp(plexus.irecv, got, left),
                                      plexus.P2POp(plexus.isend, out, right)])
    for work in works:
        work.wait()
    return got.read()


@pytest.mark.parametrize("backend", ["cpu:tcp,cuda:nccl", "tcp"])
def test_cuda_batch_isend_irecv(backend):
    for rank, got in enumerate(run_world(_exchange, 3, backend=backend)):
        assert got == [((rank - 1) % 3) * 1.5] * 1000


class TorchLikeDeviceFloats(DeviceFloats):
    """The face of a CUDA torch tensor that PCCL's TensorInfo.from_torch and ReduceOpDescriptor
    read (dtype, numel, data_ptr, is_cuda); the memory goes to plexus through DLPack."""

    def __init__(self, device, values):
        import torch
        super().__init__(device, values)
        self.dtype = torch.float32
        self.is_cuda = True

    def numel(self):
        return self.count

    def data_ptr(self):
        return self._pointer.value

    def is_contiguous(self):
        return True


def _elastic_peers(count):
    import threading
    from plexus.elastic import Attribute, Communicator, MasterNode
    master = MasterNode("127.0.0.1:0")
    master.run()
    address = "127.0.0.1:%d" % master.port
    comms = [Communicator(address, operation_timeout=30) for _ in range(count)]
    comms[0].connect()
    joiners = [threading.Thread(target=c.connect) for c in comms[1:]]
    for j in joiners:
        j.start()
    while comms[0].get_attribute(Attribute.GLOBAL_WORLD_SIZE) < count:
        comms[0].update_topology()
    for j in joiners:
        j.join()
    return master, comms


def _on_threads(comms, call):
    import threading
    results = [None] * len(comms)

    def run(i):
        try:
            results[i] = call(i, comms[i])
        except Exception as error:  # Reported below, on the test's thread.
            results[i] = error
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def test_elastic_all_reduce_and_shared_state_take_cuda_tensors():
    from plexus.elastic import (PCCLError, ReduceDescriptor, ReduceOp, ReduceOpDescriptor,
                                ReduceOperandDescriptor, QuantizationOptions,
                                QuantizationAlgorithm, DataType, DistributionHint, SharedState,
                                TensorInfo)
    master, comms = _elastic_peers(2)
    try:
        # all_reduce_async in place and into another tensor, on two devices.
        def reduce(i, comm):
            data = TorchLikeDeviceFloats(i, [i + 1.0] * 7)
            out = TorchLikeDeviceFloats(i, [0.0] * 7)
            ok, _, info = comm.all_reduce_async(data, data, op=ReduceOp.SUM, tag=1).wait()
            assert ok and info.local_world_size == 2
            comm.all_reduce(data, out, op=ReduceOp.SUM, tag=2)
            return data.read(), out.read()
        assert _on_threads(comms, reduce) == [([3.0] * 7, [6.0] * 7)] * 2

        # A failed all-reduce (the peers disagree on the count) leaves the device tensor alone.
        def mismatch(i, comm):
            data = TorchLikeDeviceFloats(i, [5.0] * (3 + i))
            with pytest.raises(PCCLError):
                comm.all_reduce(data, data, op=ReduceOp.SUM, tag=3)
            return data.read()
        assert _on_threads(comms, mismatch) == [[5.0] * 3, [5.0] * 4]

        # all_reduce_multiple_with_retry as PCCL's documented example builds it.
        def retry(i, comm):
            tensors = [TorchLikeDeviceFloats(i, [float(t + i)] * 4) for t in range(3)]
            descriptors = [ReduceOpDescriptor.from_torch(x, x, ReduceDescriptor(
                count=4, op=ReduceOp.SUM, tag=10 + t,
                operand_descriptor=ReduceOperandDescriptor(DataType.FLOAT,
                                                           DistributionHint.NORMAL),
                quantization_options=QuantizationOptions(DataType.FLOAT,
                                                         QuantizationAlgorithm.NONE)))
                for t, x in enumerate(tensors)]
            comm.all_reduce_multiple_with_retry(descriptors, max_in_flight=2)
            return [x.read() for x in tensors]
        assert _on_threads(comms, retry) == [[[1.0] * 4, [3.0] * 4, [5.0] * 4]] * 2

        # Shared state: peer 0 is ahead; peer 1's CUDA tensor receives its content.
        def sync(i, comm):
            weights = TorchLikeDeviceFloats(i, [1.5 if i == 0 else -1.0] * 9)
            state = SharedState([TensorInfo.from_torch(weights, "weights")])
            state.revision = 4 if i == 0 else 0
            info = comm.sync_shared_state(state)
            return weights.read(), state.revision, info.rx_bytes
        (w0, r0, rx0), (w1, r1, rx1) = _on_threads(comms, sync)
        assert w0 == w1 == [1.5] * 9 and r0 == r1 == 4
        assert rx0 == 0 and rx1 == 36
    finally:
        master.interrupt()
        master.await_termination(10)
