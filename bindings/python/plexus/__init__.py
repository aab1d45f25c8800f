"""plexus: collective communication with torch.distributed's API.

    import plexus as dist
    dist.init_process_group("tcp")          # or "gloo", "mpi", "cpu:gloo,cuda:nccl"
    dist.all_reduce(array)                  # numpy arrays, torch tensors, DLPack, buffers

See docs/python.md. plexus.torch registers plexus as a torch.distributed backend.
"""
from plexus._plexus import (  # noqa: F401 - the public C++ types
    AbortedError,
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    FileStore,
    HashStore,
    InvalidArgumentError,
    NotFoundError,
    PlexusError,
    PrefixStore,
    ProcessGroup,
    ReduceOp,
    Store,
    TCPStore,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    Work,
    WorkStats,
)
from plexus._lifecycle import (  # noqa: F401
    _abort_process_group,
    abort_process_group,
    shrink_group,
    split_group,
)
from plexus._api import (  # noqa: F401
    _all_gather_base,
    _reduce_scatter_base,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_reduce_coalesced,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    destroy_process_group,
    gather,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    new_group,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
)
from plexus._backend import Backend  # noqa: F401
from plexus._reconfigure import (  # noqa: F401
    _get_reconfigure_handle,
    _reconfigure,
    _supports_reconfigure,
)
from plexus._future import Future  # noqa: F401
from plexus._groups import GroupMember, default_pg_timeout, group  # noqa: F401
from plexus._objects import (  # noqa: F401
    all_gather_object,
    broadcast_object_list,
    gather_object,
    scatter_object_list,
)
from plexus._p2p import (  # noqa: F401
    P2POp,
    batch_isend_irecv,
    irecv,
    isend,
    monitored_barrier,
    recv,
    send,
)


def debug_dump(path=None):
    """Writes every process group's flight recorder (the last operations: sequence, op, dtype,
    count, peers, state, times) as JSON and returns the file's path. Without `path`:
    $PLEXUS_FLIGHT_RECORDER_DIR (else $TMPDIR, else /tmp)/plexus_flight_rank<R>_pid<P>.json.
    Merge the dumps of all ranks with tools/hang_report (see docs/debugging.md)."""
    return _core.debug_dump("" if path is None else str(path))


__version__ = "0.1.0"

# Before the interpreter finalizes, plexus's threads stop calling into Python (a thread that
# waits for the GIL during finalization would be ended mid-C++ and abort the process).
import atexit as _atexit  # noqa: E402

from plexus import _plexus as _core  # noqa: E402

_atexit.register(_core._close_to_plexus_threads)
