"""Process-group lifecycle after a failure, shaped like torch.distributed 2.x: abort a group
from user code, shrink it to the survivors without a new rendezvous, split it into subgroups."""
from plexus import _groups
from plexus._groups import GroupMember


def abort_process_group(group=None, reason=None):
    """Fails every pending and later operation of `group` (default: the default group) with
    AbortedError on this rank, at once, and releases its connections. The process goes on; the
    group cannot be used again (shrink_group builds a working one)."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    problem = pg.abort(reason or "abort_process_group() was called")
    if problem:
        import warnings
        warnings.warn(problem, RuntimeWarning, stacklevel=2)
    return None


# torch.distributed.distributed_c10d's private name for the same thing.
_abort_process_group = abort_process_group


def shrink_group(ranks_to_exclude=None, group=None):
    """A new group of `group`'s ranks (default: the default group) without `ranks_to_exclude`
    (global ranks), or without the ranks found lost when it is None. Called by the survivors
    only; the first proposal any survivor stores is the one every survivor adopts. Ranks are
    renumbered densely in the old order; the backend string stays. `group` is aborted.

    Shrinking the default group makes the new group the default: get_rank() and
    get_world_size() then describe it, and its global ranks are its own ranks. Subgroups of the
    old default group are forgotten; create them again from the new one. A rank that the
    agreed record excludes gets FailedPreconditionError."""
    pg = _groups.resolve(group)
    if pg is None:
        raise ValueError("shrink_group: this rank is not in the group")
    excluded = None
    if ranks_to_exclude is not None:
        excluded = [_groups.group_rank(pg, int(r), "ranks_to_exclude", "shrink_group")
                    for r in ranks_to_exclude]
    shrunk = pg.shrink(excluded)
    if pg is _groups._State.world:
        _groups.set_world(shrunk)
        _groups._State.subgroups = []
    elif pg in _groups._State.subgroups:
        _groups._State.subgroups[_groups._State.subgroups.index(pg)] = shrunk
    return shrunk


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None,
                group_desc=None):
    """Splits `parent_pg` (default: the default group) into disjoint subgroups, one per list in
    `split_ranks` (global ranks; each list's order is the new group's rank order), like
    MPI_Comm_split. Every rank of the parent calls it with the same lists; a rank in none of
    them gets None."""
    pg = _groups.resolve(parent_pg)
    if pg is None:
        return None
    if pg_options is not None:
        raise ValueError("split_group: pg_options are not supported by plexus")
    if timeout is not None and timeout != pg.timeout:
        raise ValueError("split_group: a timeout different from the parent group's is not "
                         "supported")
    if not split_ranks:
        raise ValueError("split_group: split_ranks must be a non-empty list of rank lists")
    me = pg.global_ranks[pg.rank()]
    seen = set()
    color, key = -1, 0
    for index, ranks in enumerate(split_ranks):
        for position, rank in enumerate(ranks):
            rank = int(rank)
            if rank in seen:
                raise ValueError("split_group: rank %d is in more than one split" % rank)
            seen.add(rank)
            _groups.group_rank(pg, rank, "split_ranks", "split_group")
            if rank == me:
                color, key = index, position
    child = pg.split(color, key)
    if child is None:
        return None
    _groups._State.subgroups.append(child)
    return child


__all__ = ["GroupMember", "abort_process_group", "shrink_group", "split_group"]
