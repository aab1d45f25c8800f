"""plexus as a torch.distributed backend.

    import plexus.torch  # registers "plexus"
    torch.distributed.init_process_group("plexus", ...)

Every collective torch.distributed and DistributedDataParallel issue on such a group runs on
plexus (backend string from $PLEXUS_TORCH_BACKEND; default "cpu:tcp,cuda:nccl" where the build
has NCCL, else "tcp", which stages CUDA tensors through host memory; any backend string works
except "mpi", whose groups come from mpirun rather than torch's store). It is registered for
both cpu and cuda devices, so DDP on GPUs works with backend="plexus".

The group is a C++ c10d ProcessGroup (plexus._plexus_torch, the route of torch's c10d extension
RFC): torch calls it without Python, its Work raises plexus's error from wait() and from
synchronous calls, and its future completes from plexus's completion. The extension is built
for one torch (Debian's 1.13 by Bazel); for another, tools/build_torch_extension.sh builds it.

After a rank dies, abort_process_group(), shrink_group() and split_group() here give the
survivors a working "plexus" group without restarting the job (see
examples/ddp_shrink_recovery.py and docs/fault_tolerance.md).
"""
import os

import torch
import torch.distributed as torch_dist

from plexus import _libuv, _plexus

try:
    from plexus import _plexus_torch
except ImportError as error:  # Built for another torch, or not built at all.
    raise ImportError(
        "plexus.torch: the C++ torch backend (plexus/_plexus_torch*.so) does not load with torch "
        "%s (%s); build it for this torch with tools/build_torch_extension.sh"
        % (torch.__version__, error)) from error

BACKEND_NAME = "plexus"
ProcessGroupPlexus = _plexus_torch.ProcessGroupPlexus


def _default_backend():
    """NCCL for CUDA tensors where this build has it, the in-house TCP backend for the rest."""
    return "cpu:tcp,cuda:nccl" if "nccl" in _plexus.registered_backends() else "tcp"


def _plexus_group_of(group):
    """The ProcessGroupPlexus for a `group=` argument (None: torch's default group)."""
    if group is None:
        group = torch_dist.distributed_c10d._get_default_group()
    if not isinstance(group, ProcessGroupPlexus) and hasattr(group, "_get_backend"):
        group = group._get_backend(torch.device("cpu"))  # torch 2.x: the Backend inside.
    if not isinstance(group, ProcessGroupPlexus):
        raise ValueError("plexus.torch: %r is not a group of the \"plexus\" backend" % (group,))
    return group


def abort_process_group(group=None, reason=None):
    """Fails every pending and later collective of `group` (default: torch's default group) at
    once with an error, on this rank, and releases its connections; the process goes on. DDP
    built on it must be rebuilt on a new group (shrink_group)."""
    problem = _plexus_group_of(group).abort(
        reason or "plexus.torch.abort_process_group() was called")
    if problem:
        import warnings
        warnings.warn(problem, RuntimeWarning, stacklevel=2)


def shrink_group(ranks_to_exclude=None, group=None):
    """A new "plexus" process group of `group`'s survivors (default: torch's default group):
    without `ranks_to_exclude` (ranks of `group`), or without the ranks found lost when None.
    Called by the survivors only; they agree on one membership through the store. Ranks are
    renumbered densely. Pass it to DistributedDataParallel(process_group=...) and to
    collectives (group=...); torch's default group is left as it was (aborted)."""
    old = _plexus_group_of(group)
    excluded = None if ranks_to_exclude is None else [int(r) for r in ranks_to_exclude]
    return _as_torch_group(old.shrink(excluded), group)


def split_group(parent_pg=None, split_ranks=None):
    """Subgroups of `parent_pg` (default: torch's default group), one per list of ranks in
    `split_ranks` (in the new group's order), as MPI_Comm_split; every rank calls it with the
    same lists. Returns this rank's "plexus" group, or None when it is in no list."""
    parent = _plexus_group_of(parent_pg)
    me = parent.rank()
    color, key = -1, 0
    for index, ranks in enumerate(split_ranks or []):
        if me in ranks:
            color, key = index, list(ranks).index(me)
    return _as_torch_group(parent.split(color, key), parent_pg)


def _as_torch_group(backend, like):
    """What DDP and torch's collectives take for `backend` (a ProcessGroupPlexus or None): on
    torch 1.13 the backend itself, a ProcessGroup there; on 2.x, where it is a Backend, a
    ProcessGroup around it over the store of the group `like` (None: the default group)."""
    if backend is None or not _plexus_torch.TORCH_BACKEND_API:
        return backend
    c10d = torch_dist.distributed_c10d
    entry = c10d._world.pg_map.get(like if like is not None else c10d._get_default_group())
    store = entry[1] if entry else c10d._get_default_store()
    return _plexus_torch.NamedProcessGroup(store, backend)


def _create_process_group(store, rank, world_size, timeout):
    """torch 1.13's creator: a ProcessGroup (torch names no group to its backends there)."""
    backend = os.environ.get("PLEXUS_TORCH_BACKEND", _default_backend())
    return ProcessGroupPlexus(store, rank, world_size, timeout, backend)


def _create_backend(options, _backend_options=None):
    """torch 2.x's creator (extended_api): the group under torch's name for it ("torch:1" in
    flight-recorder dumps and timeout messages), inside a ProcessGroup that says "plexus" where
    torch's own would say "custom" (DDP's logs, ProcessGroup.name())."""
    backend = os.environ.get("PLEXUS_TORCH_BACKEND", _default_backend())
    # torch 2.14's enable_reconfigure: members come with reconfigure (docs/fault_tolerance.md).
    create = (ProcessGroupPlexus.reconfigurable if getattr(options, "enable_reconfigure", False)
              else ProcessGroupPlexus)
    group = create(options.store, options.group_rank, options.group_size, options.timeout,
                   backend, "torch:%s" % options.group_id)
    return _plexus_torch.NamedProcessGroup(options.store, group)


def register():
    """Registers "plexus" with torch.distributed (done on import; harmless to repeat)."""
    if BACKEND_NAME.upper() in torch_dist.Backend._plugins:
        return
    if _plexus_torch.TORCH_BACKEND_API:  # torch 2.x: a Backend, for the devices it serves.
        torch_dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                            devices=["cpu", "cuda"])
    else:
        torch_dist.Backend.register_backend(BACKEND_NAME, _create_process_group)


register()
_libuv.stores_without_libuv()  # torch 2.x built without libuv (Debian's 2.6).
