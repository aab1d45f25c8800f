"""The torch.distributed-shaped functions: init_process_group, queries, new_group and every
collective. Arguments, defaults and return values follow torch.distributed: ranks passed as
src=/dst= are global ranks, async_op=True returns a Work, async_op=False waits and returns None
(recv returns the sender's rank), and calls on a group this rank is not in return None."""
import os

from plexus import _groups, _plexus
from plexus._backend import Backend
from plexus._groups import GroupMember, default_pg_timeout, group  # noqa: F401 - re-exported

ReduceOp = _plexus.ReduceOp


def _op(op, where):
    """A plexus ReduceOp from a plexus op, a name ("sum"), or a torch.distributed ReduceOp."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        return ReduceOp.from_name(op)
    # torch.distributed.ReduceOp.SUM: a ReduceOp whose .op is a RedOpType enum, or the enum.
    name = getattr(getattr(op, "op", op), "name", None)
    if isinstance(name, str):
        if name == "PREMUL_SUM":
            raise ValueError("%s: pass plexus.ReduceOp.premul_sum(scale) for PREMUL_SUM" % where)
        return ReduceOp.from_name(name)
    raise ValueError("%s: op must be a plexus.ReduceOp, got %r" % (where, op))


def _finish(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


# --- setup and queries ------------------------------------------------------------------


def init_process_group(backend=None, init_method=None, timeout=default_pg_timeout,
                       world_size=-1, rank=-1, store=None, group_name="", pg_options=None,
                       secret=None, device_id=None, enable_reconfigure=False):
    """Forms the default group. backend: a name ("tcp", "gloo", "mpi") or a backend string
    ("cpu:gloo,cuda:nccl"); default "tcp". init_method: "env://" (default; MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE), "tcp://host:port", "file:///path", or give `store`.
    secret: a shared secret (str, at least 16 bytes) every rank proves on every store and
    data connection plexus makes; default PLEXUS_SECRET / PLEXUS_SECRET_FILE (docs/security.md).
    device_id: a device (torch.device, "cuda:1", or a CUDA index): every backend connects for it
    before this returns (NCCL's communicator included, otherwise made on first use), and a rank
    that never arrives fails everyone's call naming it.
    enable_reconfigure: as torch 2.14's, the default group gets no members until
    _reconfigure(uuid, handles) names them (plexus/_reconfigure.py; docs/fault_tolerance.md);
    the store is still made here (rank 0 of env:// and tcp:// hosts it)."""
    if _groups._State.world is not None or _groups._State.reconfigurer is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if pg_options is not None:
        raise ValueError("init_process_group: pg_options are not supported by plexus")
    if store is not None and init_method is not None:
        raise ValueError("Cannot specify both init_method and store.")
    backend = Backend(backend if backend is not None else os.environ.get("PLEXUS_BACKEND", "tcp"))
    if device_id is not None:
        device_id = "cuda:%d" % device_id if isinstance(device_id, int) else str(device_id)
    if enable_reconfigure:
        if device_id is not None:
            raise ValueError("init_process_group: device_id connects the group's backends "
                             "eagerly; with enable_reconfigure=True there is no group yet")
        _groups._State.reconfigurer = _plexus.make_reconfigurer(
            str(backend), init_method or "env://", rank, world_size, timeout, store, secret)
        return
    pg = _plexus.init_process_group(str(backend), init_method or "env://", rank, world_size,
                                    timeout, store, "world", secret, device_id)
    _groups.set_world(pg)


def destroy_process_group(group=None):
    """Leaves `group` (default: every group, after which init_process_group may run again).
    Destroying the default group is collective: every rank calls it, as in torch."""
    if group is None and _groups._State.world is None and _groups._State.reconfigurer:
        _groups.forget_all()  # Reconfigurable, never reconfigured: no group to leave.
        return
    if group is None or group is _groups._State.world:
        pg = _groups.world()
        _groups.forget_all()
        pg.shutdown()
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group in _groups._State.subgroups:
        _groups._State.subgroups.remove(group)


def is_available():
    return True


def is_initialized():
    return _groups._State.world is not None or _groups._State.reconfigurer is not None


def is_mpi_available():
    return "mpi" in _plexus.registered_backends()


def is_gloo_available():
    return "gloo" in _plexus.registered_backends()


def is_nccl_available():
    return "nccl" in _plexus.registered_backends()


def is_torchelastic_launched():
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def get_rank(group=None):
    """This process's rank in `group` (default: the world); -1 when not a member."""
    pg = _groups.resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    """The number of ranks in `group`; -1 when this rank is not a member."""
    pg = _groups.resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    """The backend string the group runs on, e.g. "cpu:tcp"."""
    pg = _groups.resolve(group)
    if pg is None:
        raise RuntimeError("Invalid process group specified")
    return pg.backend


def get_global_rank(group, group_rank):
    """The global rank of `group_rank` in `group`."""
    pg = _groups.resolve(group)
    if pg is None:
        raise RuntimeError("get_global_rank: this rank is not in the group")
    return pg.global_ranks[group_rank]


def get_group_rank(group, global_rank):
    """The rank in `group` of global rank `global_rank`."""
    pg = _groups.resolve(group)
    if pg is None:
        raise RuntimeError("get_group_rank: this rank is not in the group")
    return _groups.group_rank(pg, global_rank, "global", "get_group_rank")


def get_process_group_ranks(group):
    """The global ranks in `group`, in group-rank order."""
    pg = _groups.resolve(group)
    if pg is None:
        raise RuntimeError("get_process_group_ranks: this rank is not in the group")
    return list(pg.global_ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A group of the given global ranks (default: all). Every rank of the world calls it with
    the same ranks, members or not; non-members get GroupMember.NON_GROUP_MEMBER."""
    world = _groups.world()
    if pg_options is not None:
        raise ValueError("new_group: pg_options are not supported by plexus")
    if timeout is not None and timeout != world.timeout:
        raise ValueError("new_group: a timeout different from the default group's is not "
                         "supported; give it to init_process_group")
    ranks = list(range(world.size())) if ranks is None else sorted(int(r) for r in ranks)
    pg = world.new_group(ranks, "" if backend is None else str(Backend(backend)))
    if pg is None:
        return GroupMember.NON_GROUP_MEMBER
    _groups._State.subgroups.append(pg)
    return pg


# --- collectives -------------------------------------------------------------------------


def broadcast(tensor, src, group=None, async_op=False):
    """Copies global rank `src`'s tensor into every rank's tensor."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, src, "src", "broadcast")
    return _finish(pg.broadcast(tensor, root), async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces `tensor` across ranks in place."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.all_reduce(tensor, _op(op, "all_reduce")), async_op)


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """As all_reduce on each tensor, fused into one operation (same dtype and device)."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.all_reduce_coalesced(list(tensors), _op(op, "all_reduce_coalesced")),
                   async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces every rank's tensor into global rank `dst`'s tensor."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, dst, "dst", "reduce")
    return _finish(pg.reduce(tensor, root, _op(op, "reduce")), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] receives group rank r's tensor."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.all_gather(tensor_list, tensor), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world_size x input elements) receives every rank's input in rank order."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.all_gather_into_tensor(output_tensor, input_tensor), async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """At global rank `dst`, gather_list[r] receives group rank r's tensor."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, dst, "dst", "gather")
    if pg.rank() != root and gather_list:
        raise ValueError("gather: gather_list must not be given on rank %d, which is not the "
                         "destination %d" % (get_rank(), dst))
    outputs = gather_list if pg.rank() == root else None
    if outputs is None and pg.rank() == root:
        raise ValueError("gather: the destination rank %d must pass gather_list" % dst)
    return _finish(pg.gather(outputs, tensor, root), async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Group rank r's tensor receives scatter_list[r] from global rank `src`."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, src, "src", "scatter")
    if pg.rank() != root and scatter_list:
        raise ValueError("scatter: scatter_list must not be given on rank %d, which is not the "
                         "source %d" % (get_rank(), src))
    inputs = scatter_list if pg.rank() == root else None
    if inputs is None and pg.rank() == root:
        raise ValueError("scatter: the source rank %d must pass scatter_list" % src)
    return _finish(pg.scatter(tensor, inputs, root), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Group rank r's output is the reduction over ranks of their input_list[r]."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.reduce_scatter(output, input_list, _op(op, "reduce_scatter")), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """As reduce_scatter with the inputs concatenated in one tensor (world_size x output)."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.reduce_scatter_tensor(output, input, _op(op, "reduce_scatter_tensor")),
                   async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[r] receives group rank r's input_tensor_list[this rank]."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.all_to_all(output_tensor_list, input_tensor_list), async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Splits `input` along its first dimension (equally, or by input_split_sizes rows), sends
    split r to group rank r, and concatenates what arrives into `output`."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    out_splits = None if output_split_sizes is None else [int(s) for s in output_split_sizes]
    in_splits = None if input_split_sizes is None else [int(s) for s in input_split_sizes]
    return _finish(pg.all_to_all_single(output, input, out_splits, in_splits), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Returns once every rank of the group has called it."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return _finish(pg.barrier(), async_op)


# torch.distributed's older names.
_all_gather_base = all_gather_into_tensor
_reduce_scatter_base = reduce_scatter_tensor
