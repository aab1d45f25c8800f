"""Process-group state: the default (world) group, subgroups, and rank translation, as
torch.distributed keeps them. Collectives take global ranks (src=, dst=, peer=) and
translate them to group ranks here."""
import datetime

from plexus import _plexus

default_pg_timeout = datetime.timedelta(minutes=30)


class GroupMember:
    """torch.distributed's sentinels: GroupMember.WORLD (the default group) and
    GroupMember.NON_GROUP_MEMBER (what new_group returns on ranks left out)."""

    class _NonMember:
        def __repr__(self):
            return "GroupMember.NON_GROUP_MEMBER"

    WORLD = None
    NON_GROUP_MEMBER = _NonMember()


class group:  # noqa: N801 - named as torch.distributed names it.
    WORLD = None


class _State:
    world = None  # The default _plexus.ProcessGroup.
    reconfigurer = None  # With enable_reconfigure=True: forms the default group (_reconfigure).
    subgroups = []  # Subgroups this rank belongs to, in creation order.


def world():
    if _State.world is None and _State.reconfigurer is not None:
        raise RuntimeError("The default process group has no members yet: it was created with "
                           "enable_reconfigure=True; call _reconfigure(uuid, handles) first.")
    if _State.world is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    return _State.world


def resolve(group_arg):
    """The _plexus.ProcessGroup for a `group=` argument, or None when this rank is not in it."""
    if group_arg is None:
        return world()
    if group_arg is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group_arg, _plexus.ProcessGroup):
        raise ValueError("group must be a process group from new_group(), GroupMember.WORLD or "
                         "None, got %r" % (group_arg,))
    return group_arg


def group_rank(pg, global_rank, what, op):
    """Translates a global rank (src=, dst=, peer=) into `pg`'s rank; ValueError when absent."""
    if not isinstance(global_rank, int) or isinstance(global_rank, bool):
        raise ValueError("%s: %s must be an int rank, got %r" % (op, what, global_rank))
    ranks = pg.global_ranks
    try:
        return ranks.index(global_rank)
    except ValueError:
        raise ValueError("%s: %s rank %d is not in the group (its global ranks: %s)"
                         % (op, what, global_rank, ranks)) from None


def set_world(pg):
    _State.world = pg
    group.WORLD = pg
    GroupMember.WORLD = pg


def forget_all():
    _State.world = None
    _State.reconfigurer = None
    _State.subgroups = []
    group.WORLD = None
    GroupMember.WORLD = None
