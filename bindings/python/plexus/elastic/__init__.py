"""plexus.elastic: the fault-tolerant elastic communicator, with PCCL's names and signatures.

Peers register with a MasterNode, are accepted when the peers already in call update_topology(),
and all-reduce among their peer group; a peer may crash, freeze or leave at any point and the
survivors retry. A failed all-reduce leaves its receive buffer as it was, so retrying is exact;
all_reduce_multiple_with_retry() retries by itself. See docs/elastic.md.

    from plexus.elastic import MasterNode, Communicator, ReduceOp, Attribute
"""
import enum
import logging
import time

from plexus import _plexus

__all__ = [
    "Attribute", "AsyncReduceHandle", "Communicator", "DataType", "DistributionHint",
    "ElasticError", "MasterNode", "PCCLError", "QuantizationAlgorithm", "QuantizationOptions",
    "ReduceDescriptor", "ReduceInfo", "ReduceOp", "ReduceOpDescriptor",
    "ReduceOperandDescriptor", "Result", "SharedState", "SharedStateSyncInfo",
    "SharedStateSyncStrategy", "TensorInfo", "DeviceType",
]

_log = logging.getLogger("plexus.elastic")


class Result(enum.Enum):
    """Result codes (PCCL's names)."""
    SUCCESS = 0
    NOT_INITIALIZED = 1
    INTERNAL_ERROR = 2
    INVALID_ARGUMENT = 3
    INVALID_USAGE = 4
    TOO_FEW_PEERS = 5
    MASTER_CONNECTION_FAILED = 6
    RANK_CONNECTION_FAILED = 7
    RANK_CONNECTION_LOST = 8
    NO_SHARED_STATE_AVAILABLE = 9
    PENDING_ASYNC_OPS = 10
    UPDATE_TOPOLOGY_FAILED = 11
    TOPOLOGY_OPTIMIZATION_FAILED = 12


class ElasticError(RuntimeError):
    """A failed elastic call; `result` is its Result, `message` what happened."""

    def __init__(self, result, func_name, message=""):
        self.result = result
        self.message = message
        super().__init__(f"{func_name} failed with error: {result.name}" +
                         (f": {message}" if message else ""))


PCCLError = ElasticError  # The name PCCL's users catch.


def _check(outcome, func_name):
    code, message, value = outcome
    if code != 0:
        raise ElasticError(Result(code), func_name, message)
    return value


class ReduceOp(enum.Enum):
    SUM = 0
    AVG = 1
    PROD = 2
    MAX = 3
    MIN = 4


class Attribute(enum.Enum):
    GLOBAL_WORLD_SIZE = 0
    LOCAL_WORLD_SIZE = 1
    NUM_DISTINCT_PEER_GROUPS = 2
    LARGEST_PEER_GROUP_WORLD_SIZE = 3


class DataType(enum.Enum):
    """Element types; the value is plexus's dtype name. UINT16/32/64 are not supported yet."""
    UINT8 = "uint8"
    INT8 = "int8"
    UINT16 = "uint16"
    INT16 = "int16"
    UINT32 = "uint32"
    INT32 = "int32"
    UINT64 = "uint64"
    INT64 = "int64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT = "float32"
    DOUBLE = "float64"

    @classmethod
    def from_torch_dtype(cls, dtype):
        return cls._from_name(str(dtype).replace("torch.", ""))

    @classmethod
    def from_numpy_dtype(cls, dtype):
        import numpy as np
        return cls._from_name(np.dtype(dtype).name)

    @classmethod
    def _from_name(cls, name):
        for member in cls:
            if member.value == name:
                return member
        raise ValueError(f"no elastic DataType for {name}")


class DeviceType(enum.Enum):
    CPU = 0
    CUDA = 1


class SharedStateSyncStrategy(enum.Enum):
    """How this peer takes part in sync_shared_state (docs/elastic.md has the rules).
    ENFORCE_POPULAR: vote, and adopt the popular state where this peer's differs.
    RECEIVE_ONLY: do not vote (e.g. a joiner); adopt the popular state.
    SEND_ONLY: this peer's state is the authority; never receive (an error if it would have to)."""
    ENFORCE_POPULAR = 0
    RECEIVE_ONLY = 1
    SEND_ONLY = 2


class DistributionHint(enum.Enum):
    NONE = 0
    NORMAL = 1
    UNIFORM = 2


class QuantizationAlgorithm(enum.Enum):
    NONE = 0
    MIN_MAX = 1
    ZERO_POINT_SCALE = 2


class ReduceOperandDescriptor:
    def __init__(self, datatype, distribution_hint=DistributionHint.NONE):
        self.datatype = datatype
        self.distribution_hint = distribution_hint


class QuantizationOptions:
    def __init__(self, quantized_datatype=DataType.UINT8,
                 algorithm=QuantizationAlgorithm.MIN_MAX):
        self.quantized_datatype = quantized_datatype
        self.algorithm = algorithm


class ReduceDescriptor:
    def __init__(self, count, op, tag, operand_descriptor, quantization_options):
        self.count = count
        self.op = op
        self.tag = tag
        self.operand_descriptor = operand_descriptor
        self.quantization_options = quantization_options

    def _spec(self):
        quant = self.quantization_options
        return (int(self.count), self.operand_descriptor.datatype.value, self.op.value,
                int(self.tag), quant.algorithm.value, quant.quantized_datatype.value)


class ReduceOpDescriptor:
    """An all-reduce with its buffers, for Communicator.all_reduce_multiple_with_retry."""

    def __init__(self, send, recv, reduce_descriptor):
        self.send = send
        self.recv = recv
        self.reduce_descriptor = reduce_descriptor

    @staticmethod
    def from_torch(send, recv, reduce_descriptor):
        return ReduceOpDescriptor(send, recv, reduce_descriptor)

    @staticmethod
    def from_numpy(send, recv, reduce_descriptor):
        return ReduceOpDescriptor(send, recv, reduce_descriptor)


class ReduceInfo:
    def __init__(self, local_world_size, tx_bytes, rx_bytes):
        self.local_world_size = local_world_size
        self.tx_bytes = tx_bytes
        self.rx_bytes = rx_bytes

    def __repr__(self):
        return (f"ReduceInfo(local_world_size={self.local_world_size}, "
                f"tx_bytes={self.tx_bytes}, rx_bytes={self.rx_bytes})")


class TensorInfo:
    """One tensor of a SharedState, by reference: from_torch (CPU or CUDA; a CUDA tensor moves
    through pinned host memory during the sync) / from_numpy, or a raw CPU pointer with its
    numel and DataType."""

    def __init__(self, name, data_ptr, *, numel, dtype, device_type=DeviceType.CPU,
                 allow_content_inequality=False, _from_tensor=False):
        if data_ptr == 0 and numel:
            raise ValueError("Invalid data pointer: nullptr")
        if device_type != DeviceType.CPU and not _from_tensor:
            raise ValueError(f"tensor '{name}': a raw {device_type.name} pointer does not say "
                             "which device; pass the tensor (TensorInfo.from_torch)")
        self.name = name
        self.data_ptr = data_ptr
        self.numel = numel
        self.dtype = dtype
        self.device_type = device_type
        self.allow_content_inequality = allow_content_inequality
        self._tensor = None

    @classmethod
    def from_torch(cls, tensor, name, *, allow_content_inequality=False):
        if not tensor.is_contiguous():
            raise ValueError(f"tensor '{name}' must be contiguous")
        info = cls(name, tensor.data_ptr(), numel=tensor.numel(),
                   dtype=DataType.from_torch_dtype(tensor.dtype),
                   device_type=DeviceType.CUDA if tensor.is_cuda else DeviceType.CPU,
                   allow_content_inequality=allow_content_inequality, _from_tensor=True)
        info._tensor = tensor
        return info

    @classmethod
    def from_numpy(cls, array, name, *, allow_content_inequality=False):
        if not array.flags["C_CONTIGUOUS"]:
            raise ValueError(f"array '{name}' must be C-contiguous")
        info = cls(name, array.ctypes.data, numel=array.size,
                   dtype=DataType.from_numpy_dtype(array.dtype),
                   allow_content_inequality=allow_content_inequality)
        info._tensor = array
        return info

    def _spec(self):
        return (self.name, self._tensor, int(self.data_ptr), int(self.numel), self.dtype.value,
                bool(self.allow_content_inequality))


class SharedState:
    """The tensors peers keep identical, and the revision the application advances."""

    def __init__(self, tensor_infos):
        if not tensor_infos:
            raise ValueError("At least one tensor info must be provided")
        self.tensor_infos = list(tensor_infos)
        self.revision = 0

    def push_revision(self):
        self.revision += 1


class SharedStateSyncInfo:
    def __init__(self, tx_bytes, rx_bytes):
        self.tx_bytes = tx_bytes
        self.rx_bytes = rx_bytes

    def __repr__(self):
        return f"SharedStateSyncInfo(tx_bytes={self.tx_bytes}, rx_bytes={self.rx_bytes})"


class AsyncReduceHandle:
    """What all_reduce_async returns; wait() -> (is_success, status, ReduceInfo)."""

    def __init__(self, handle):
        self._handle = handle
        self._result = None
        self.message = ""

    def wait(self):
        if self._result is None:
            ok, code, (world, tx, rx), message = self._handle.wait()
            self.message = message
            self._result = (ok, code, ReduceInfo(world, tx, rx))
            self._handle = None  # Releases the tensors.
        return self._result


def _dtype_of(tensor):
    if hasattr(tensor, "dtype") and str(tensor.dtype).startswith("torch."):
        return DataType.from_torch_dtype(tensor.dtype)
    return DataType.from_numpy_dtype(tensor.dtype)


def _numel(tensor):
    return tensor.numel() if hasattr(tensor, "numel") else tensor.size


def _secret(secret):
    """None: PLEXUS_SECRET / PLEXUS_SECRET_FILE decide; str or bytes: this shared secret."""
    if secret is None or isinstance(secret, str):
        return secret
    return bytes(secret).decode("latin-1")


class Communicator:
    """A peer. `address` is the master's "host:port"; peers all-reduce within `peer_group`.

    `operation_timeout` bounds every call (seconds); None: PLEXUS_ELASTIC_TIMEOUT, else 600.
    `accept_timeout` bounds how long connect() waits to be accepted; None: the same default.
    """

    def __init__(self, address, peer_group=0, p2p_connection_pool_size=0, *,
                 operation_timeout=None, accept_timeout=None,
                 bandwidth_probe_bytes=4 << 20, secret=None):
        unset = -1.0
        self._comm = _check(_plexus._ElasticCommunicator.create(
            address, int(peer_group),
            unset if operation_timeout is None else float(operation_timeout),
            unset if accept_timeout is None else float(accept_timeout),
            int(bandwidth_probe_bytes), _secret(secret)), "Communicator")

    def connect(self, n_attempts=5):
        """Registers with the master and waits to be accepted; tries n_attempts times, 1 s apart."""
        last = None
        for attempt in range(1, n_attempts + 1):
            try:
                _check(self._comm.connect(-1.0), "connect")
                return
            except ElasticError as error:
                last = error
                _log.warning("connecting to the master failed (attempt %d/%d): %s", attempt,
                             n_attempts, error)
                if attempt < n_attempts:
                    time.sleep(1)
        raise last

    def update_topology(self):
        _check(self._comm.update_topology(), "update_topology")

    def optimize_topology(self):
        """Collective within the peer group: measures the bandwidth between every pair of peers
        and reorders the ring to maximise its slowest link. Returns whether the ring changed."""
        return bool(_check(self._comm.optimize_topology(), "optimize_topology"))

    @property
    def peer_id(self):
        """This peer's id at the master (plexus addition; 0 before connect)."""
        return self._comm.peer_id()

    @property
    def ring(self):
        """The peer ids of this peer's group in ring order (plexus addition)."""
        return list(self._comm.ring())

    @property
    def shared_memory_peers(self):
        """Peers of the current epoch on this host, reached through shared memory (plexus's)."""
        return self._comm.shared_memory_peers()

    def are_peers_pending(self):
        return bool(_check(self._comm.are_peers_pending(), "are_peers_pending"))

    def get_attribute(self, attribute):
        """The attribute in this peer's current epoch: as in PCCL, it changes only inside this
        peer's own calls (update_topology, an all-reduce that failed because peers changed, ...)."""
        return _check(self._comm.get_attribute(attribute.value, False), "get_attribute")

    def announced_attribute(self, attribute):
        """The attribute as the master last announced it (plexus's; for monitoring): the value
        get_attribute() takes at this peer's next elastic call."""
        return _check(self._comm.get_attribute(attribute.value, True), "announced_attribute")

    def _spec(self, send, recv, op, tag, operand_descriptor, quantization_options):
        dtype = _dtype_of(send)
        if operand_descriptor is None:
            operand_descriptor = ReduceOperandDescriptor(dtype, DistributionHint.NONE)
        if quantization_options is None:
            quantization_options = QuantizationOptions(dtype, QuantizationAlgorithm.NONE)
        return ReduceDescriptor(_numel(recv), op, tag, operand_descriptor,
                                quantization_options)._spec()

    def all_reduce_async(self, send, recv, *, op, tag=0, operand_descriptor=None,
                         quantization_options=None):
        spec = self._spec(send, recv, op, tag, operand_descriptor, quantization_options)
        return AsyncReduceHandle(_check(self._comm.all_reduce_async(send, recv, spec),
                                        "all_reduce_async"))

    def all_reduce(self, send, recv, *, op, tag=0, operand_descriptor=None,
                   quantization_options=None):
        handle = self.all_reduce_async(send, recv, op=op, tag=tag,
                                       operand_descriptor=operand_descriptor,
                                       quantization_options=quantization_options)
        ok, code, info = handle.wait()
        if not ok:
            raise ElasticError(Result(code), "all_reduce", handle.message)
        return info

    def sync_shared_state(self, shared_state,
                          strategy=SharedStateSyncStrategy.ENFORCE_POPULAR):
        """Collective within the peer group: afterwards every peer holds the group's revision
        (written to shared_state.revision) and its popular tensor contents."""
        revision, tx, rx = _check(self._comm.sync_shared_state(
            [info._spec() for info in shared_state.tensor_infos], int(shared_state.revision),
            strategy.value), "sync_shared_state")
        shared_state.revision = revision
        return SharedStateSyncInfo(tx, rx)

    def all_reduce_multiple_with_retry(self, descriptors, *, max_in_flight=4):
        ops = [(d.send, d.recv, d.reduce_descriptor._spec()) for d in descriptors]
        world, tx, rx = _check(self._comm.all_reduce_multiple_with_retry(ops, int(max_in_flight)),
                               "all_reduce_multiple_with_retry")
        return ReduceInfo(world, tx, rx)


class MasterNode:
    """The coordinator. run() starts serving and returns; interrupt() stops it. Like PCCL's,
    the object's destructor waits until it was interrupted, so `MasterNode(...).run()` serves
    for the life of the process."""

    def __init__(self, listen_address="0.0.0.0:48148", *, heartbeat_timeout=5.0, secret=None):
        self._master = _check(_plexus._ElasticMaster.create(listen_address,
                                                            float(heartbeat_timeout),
                                                            _secret(secret)),
                              "MasterNode")
        self._running = False

    @property
    def port(self):
        return self._master.port

    def run(self):
        _check(self._master.run(), "run")
        self._running = True

    def interrupt(self):
        self._master.interrupt()

    def await_termination(self, timeout=None):
        _check(self._master.await_termination(-1.0 if timeout is None else float(timeout)),
               "await_termination")

    def __del__(self):
        master = getattr(self, "_master", None)
        if master is not None and self._running:
            master.await_termination(-1.0)
