"""torch 2.14's fault-tolerance regime (c10d's reconfigure) on plexus's own API. A default group
made with init_process_group(..., enable_reconfigure=True) has no members until
_reconfigure(uuid, handles) names them; every later call replaces the membership. Handles come
from _get_reconfigure_handle() on each process and travel out of band (a store, a coordinator).
The names are torch.distributed's, so code written against torch's API runs unchanged."""
import collections.abc

from plexus import _groups, _plexus


def _reconfigurer(group, op):
    if group is not None and group is not _groups._State.world:
        raise ValueError("%s: only the default group can be reconfigured" % op)
    reconfigurer = _groups._State.reconfigurer
    if reconfigurer is None:
        raise RuntimeError("%s: the default group was not created with "
                           "init_process_group(..., enable_reconfigure=True)" % op)
    return reconfigurer


def _supports_reconfigure(group=None):
    """True when `group` (default: the default group) was created with enable_reconfigure."""
    return _groups._State.reconfigurer is not None and (
        group is None or group is _groups._State.world)


def _get_reconfigure_handle(group=None):
    """This process's handle, "plexus:HOST:PID:NONCE": the same for the life of the process,
    different from every other process's."""
    return _reconfigurer(group, "_get_reconfigure_handle").handle


def _reconfigure(uuid, handles, group=None, timeout=None, hints=None):
    """Forms the default group of exactly the processes `handles` names, under `uuid` (an int
    no earlier reconfigure used). A list or tuple gives ranks by position; a set lets plexus
    choose (sorted handles). Collective over the new members; returns a completed Work. The
    previous group is aborted and subgroups are forgotten, as after shrink_group. hints:
    backend hints, which plexus takes none of (accepted and ignored, as torch's gloo does)."""
    reconfigurer = _reconfigurer(group, "_reconfigure")
    if hints is not None and not isinstance(hints, collections.abc.Mapping):
        raise TypeError("_reconfigure: hints must be a mapping or None, got %r" % (hints,))
    if isinstance(handles, (str, bytes)) or not isinstance(
            handles, (collections.abc.Sequence, collections.abc.Set)):
        raise TypeError("_reconfigure: handles must be a list (ranks by position) or a set "
                        "(plexus chooses) of handles, got %r" % (handles,))
    ordered = isinstance(handles, collections.abc.Sequence)
    formed = reconfigurer.reconfigure(int(uuid), [str(h) for h in handles], ordered, timeout)
    old = _groups._State.world
    _groups.set_world(formed)
    _groups._State.subgroups = []
    if old is not None:
        old.abort("replaced by _reconfigure(uuid %d)" % int(uuid))
    return _plexus.completed_work("reconfigure")


__all__ = ["_get_reconfigure_handle", "_reconfigure", "_supports_reconfigure"]
