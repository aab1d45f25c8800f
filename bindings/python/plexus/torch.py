"""plexus as a torch.distributed backend.

    import plexus.torch  # registers "plexus"
    torch.distributed.init_process_group("plexus", ...)

Every collective torch.distributed and DistributedDataParallel issue on such a group runs on
plexus (backend string from $PLEXUS_TORCH_BACKEND; default "cpu:tcp,cuda:nccl" where the build
has NCCL, else "tcp", which stages CUDA tensors through host memory; any backend string works
except "mpi", whose groups come from mpirun rather than torch's store). It is registered for
both cpu and cuda devices, so DDP on GPUs works with backend="plexus". The group is a
Python subclass of torch's ProcessGroup (the custom-backend route of c10d), so it needs no
compiled torch extension; tensors are handed to plexus without copies.

After a rank dies, abort_process_group(), shrink_group() and split_group() here give the
survivors a working "plexus" group without restarting the job (see
examples/ddp_shrink_recovery.py and docs/fault_tolerance.md).

Limits: recv(src=None) cannot report the sender through torch's Work, so it is refused;
Work.wait(timeout) ignores the timeout (the group's own timeout still applies). Ranks on one
host talk through shared-memory rings, but all-reduce does not use the shared-memory arena
unless PLEXUS_SHM_ARENA_BYTES is set: with it, torch 1.13's DistributedDataParallel crashed
(SIGSEGV in Reducer::finalize_backward) in about 1 of 5 runs of a 3-rank test on 2 cores,
when bucket all-reduces completed within microseconds of being issued; see docs/python.md.
"""
import contextlib
import os

import torch
import torch.distributed as torch_dist
from torch._C._distributed_c10d import ProcessGroup as _TorchProcessGroup
from torch._C._distributed_c10d import _create_work_from_future

from plexus import _plexus
from plexus._api import _op

BACKEND_NAME = "plexus"


def _default_backend():
    """NCCL for CUDA tensors where this build has it, the in-house TCP backend for the rest."""
    return "cpu:tcp,cuda:nccl" if "nccl" in _plexus.registered_backends() else "tcp"


@contextlib.contextmanager
def _without_arena():
    """PLEXUS_SHM_ARENA_BYTES=0 while the group is built (read then), unless the user set it."""
    if "PLEXUS_SHM_ARENA_BYTES" in os.environ:
        yield
        return
    os.environ["PLEXUS_SHM_ARENA_BYTES"] = "0"
    try:
        yield
    finally:
        del os.environ["PLEXUS_SHM_ARENA_BYTES"]


def _single(tensors, what):
    if len(tensors) != 1:
        raise ValueError("plexus: %s takes one tensor per process, got %d" % (what, len(tensors)))
    return tensors[0]


class ProcessGroupPlexus(_TorchProcessGroup):
    """A torch.distributed process group whose collectives run on a plexus ProcessGroup."""

    def __init__(self, store, rank, size, timeout, backend=None):
        super().__init__(rank, size)
        self._backend = backend or os.environ.get("PLEXUS_TORCH_BACKEND", _default_backend())
        with _without_arena():
            self._pg = _plexus.init_process_group(self._backend, "env://", rank, size,
                                                  timeout, store, "torch")

    @classmethod
    def _wrapping(cls, pg):
        """A torch process group over an existing plexus.ProcessGroup (from shrink or split)."""
        group = cls.__new__(cls)
        _TorchProcessGroup.__init__(group, pg.rank(), pg.size())
        group._backend = pg.backend
        group._pg = pg
        return group

    @property
    def plexus_group(self):
        """The underlying plexus.ProcessGroup."""
        return self._pg

    def getBackendName(self):  # noqa: N802 - the C++ method torch calls.
        return BACKEND_NAME

    def _get_backend_name(self):
        return BACKEND_NAME

    def name(self):
        return BACKEND_NAME

    @staticmethod
    def _wrap(work, result):
        # The error reaches torch through a then() callback, which torch turns into a C++
        # exception: one set with set_exception stays a Python object, and DDP's reducer,
        # running without the GIL, crashed (SIGSEGV in Reducer::finalize_backward, torch 1.13)
        # when it rethrew that.
        outcome = torch.futures.Future()

        def settle(_):
            error = outcome.value()
            if error is not None:
                raise RuntimeError(error)
            return result

        future = outcome.then(settle)

        def done(error):
            outcome.set_result(None if error is None else str(error))

        work.add_done_callback(done)
        return _create_work_from_future(future)

    def broadcast(self, tensors, opts):
        tensor = _single(tensors, "broadcast")
        return self._wrap(self._pg.broadcast(tensor, opts.rootRank), tensors)

    def allreduce(self, tensors, opts):
        tensor = _single(tensors, "allreduce")
        return self._wrap(self._pg.all_reduce(tensor, _op(opts.reduceOp, "allreduce")), tensors)

    def allreduce_coalesced(self, tensors, opts):
        return self._wrap(
            self._pg.all_reduce_coalesced(tensors, _op(opts.reduceOp, "allreduce_coalesced")),
            tensors)

    def reduce(self, tensors, opts):
        tensor = _single(tensors, "reduce")
        return self._wrap(self._pg.reduce(tensor, opts.rootRank, _op(opts.reduceOp, "reduce")),
                          tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        outputs = _single(output_tensors, "allgather")
        tensor = _single(input_tensors, "allgather")
        return self._wrap(self._pg.all_gather(outputs, tensor), outputs)

    def _allgather_base(self, output, input, opts=None):
        return self._wrap(self._pg.all_gather_into_tensor(output, input), [output])

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        works = [self._pg.all_gather(outputs, tensor)
                 for outputs, tensor in zip(output_lists, input_list)]
        flat = [tensor for outputs in output_lists for tensor in outputs]
        return self._wrap(_AllOf(works), flat)

    def gather(self, output_tensors, input_tensors, opts):
        tensor = _single(input_tensors, "gather")
        outputs = _single(output_tensors, "gather") if output_tensors else None
        return self._wrap(self._pg.gather(outputs, tensor, opts.rootRank), outputs or [])

    def scatter(self, output_tensors, input_tensors, opts):
        tensor = _single(output_tensors, "scatter")
        inputs = _single(input_tensors, "scatter") if input_tensors else None
        return self._wrap(self._pg.scatter(tensor, inputs, opts.rootRank), output_tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        output = _single(output_tensors, "reduce_scatter")
        inputs = _single(input_tensors, "reduce_scatter")
        return self._wrap(
            self._pg.reduce_scatter(output, inputs, _op(opts.reduceOp, "reduce_scatter")),
            output_tensors)

    def _reduce_scatter_base(self, output, input, opts):
        return self._wrap(
            self._pg.reduce_scatter_tensor(output, input, _op(opts.reduceOp, "reduce_scatter")),
            [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self._wrap(
            self._pg.all_to_all_single(output, input, list(output_split_sizes) or None,
                                       list(input_split_sizes) or None), [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return self._wrap(self._pg.all_to_all(output_tensors, input_tensors), output_tensors)

    def send(self, tensors, dst_rank, tag=0):
        return self._wrap(self._pg.send(_single(tensors, "send"), dst_rank, tag), tensors)

    def recv(self, tensors, src_rank, tag=0):
        return self._wrap(self._pg.recv(_single(tensors, "recv"), src_rank, tag), tensors)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("plexus: recv without src is not supported through torch.distributed "
                           "(torch's Work cannot report the sender); name the source rank, or "
                           "use plexus.recv directly")

    def barrier(self, opts=None):
        return self._wrap(self._pg.barrier(), [])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        from plexus import _p2p
        _p2p.monitored_barrier(self._pg, timeout, wait_all_ranks)


class _AllOf:
    """Completes when every Work in `works` has; reports the first error."""

    def __init__(self, works):
        self._works = works

    def add_done_callback(self, callback):
        remaining = [len(self._works)]
        errors = []

        def one_done(error):
            if error is not None:
                errors.append(error)
            remaining[0] -= 1
            if remaining[0] == 0:
                callback(errors[0] if errors else None)

        if not self._works:
            callback(None)
        for work in self._works:
            work.add_done_callback(one_done)


def _plexus_group_of(group):
    """The ProcessGroupPlexus for a `group=` argument (None: torch's default group)."""
    if group is None:
        group = torch_dist.distributed_c10d._get_default_group()
    if not isinstance(group, ProcessGroupPlexus):
        raise ValueError("plexus.torch: %r is not a group of the \"plexus\" backend" % (group,))
    return group


def abort_process_group(group=None, reason=None):
    """Fails every pending and later collective of `group` (default: torch's default group) at
    once with an error, on this rank, and releases its connections; the process goes on. DDP
    built on it must be rebuilt on a new group (shrink_group)."""
    problem = _plexus_group_of(group).plexus_group.abort(
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
    return ProcessGroupPlexus._wrapping(old.plexus_group.shrink(excluded))


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
    child = parent.plexus_group.split(color, key)
    return None if child is None else ProcessGroupPlexus._wrapping(child)


def _create_process_group(store, rank, world_size, timeout):
    return ProcessGroupPlexus(store, rank, world_size, timeout)


def register():
    """Registers "plexus" with torch.distributed (done on import; harmless to repeat)."""
    if getattr(torch_dist.Backend, BACKEND_NAME.upper(), None) != BACKEND_NAME:
        try:  # torch 2.x takes the devices a backend serves; 1.13 has no such argument.
            torch_dist.Backend.register_backend(BACKEND_NAME, _create_process_group,
                                                devices=["cpu", "cuda"])
        except TypeError:
            torch_dist.Backend.register_backend(BACKEND_NAME, _create_process_group)


register()
