"""torch 2.14's reconfigure regime on plexus's own API (`import plexus as dist`, numpy arrays):
init_process_group(..., enable_reconfigure=True) forms no group until _reconfigure names its
members by handle; ranks by position or chosen by plexus; a reused uuid and malformed requests
refused; survivors of a SIGKILL reconfigure without it and a process that starts only after
the kill joins them, receiving their state by broadcast."""
import os
import signal
import uuid as uuidlib

import numpy as np
import pytest

from multiproc import run_world


def _handle_store(path):
    import plexus as dist
    return dist.FileStore(path, -1)


def _exchange(store, me, others):
    """Publishes this process's handle as handle/<me>; the handles of `others`, in order."""
    import plexus as dist
    store.set("handle/%d" % me, dist._get_reconfigure_handle())
    return [store.get("handle/%d" % other).decode() for other in others]


def _sum_of_ranks_plus_one():
    import plexus as dist
    x = np.full(1000, dist.get_rank() + 1.0)
    dist.all_reduce(x)
    return float(x[0]) if (x == x[0]).all() else None


def ranks_by_position_then_by_handle(rank, world, path):
    import plexus as dist
    assert dist.is_initialized() and dist._supports_reconfigure()
    with pytest.raises(RuntimeError, match="no members yet"):
        dist.get_rank()
    handles = _exchange(_handle_store(path), rank, [2, 1, 0])
    dist._reconfigure(1, handles).wait()
    by_position = (dist.get_rank(), dist.get_world_size(), _sum_of_ranks_plus_one())
    assert dist._get_reconfigure_handle() == handles[2 - rank]  # Constant for the process.
    dist._reconfigure(2, set(handles), hints={"unused": "1"}).wait()
    by_plexus = (dist.get_rank(), sorted(handles).index(handles[2 - rank]),
                 _sum_of_ranks_plus_one())
    with pytest.raises(dist.FailedPreconditionError, match="uuid 2 was already used"):
        dist._reconfigure(2, handles)
    with pytest.raises(TypeError, match="a list .* or a set"):
        dist._reconfigure(3, handles[0])
    with pytest.raises(dist.InvalidArgumentError, match="is given twice"):
        dist._reconfigure(3, [handles[0], handles[0]])
    # Refusals leave the group as it was.
    return by_position, by_plexus, _sum_of_ranks_plus_one()


def test_members_take_ranks_by_position_or_by_sorted_handle():
    path = os.path.join(os.environ["TEST_TMPDIR"], "handles-" + uuidlib.uuid4().hex)
    results = run_world(ranks_by_position_then_by_handle, 3, path,
                        init_options={"enable_reconfigure": True})
    for rank, (by_position, by_plexus, after) in enumerate(results):
        assert by_position == (2 - rank, 3, 6.0), results
        assert by_plexus[0] == by_plexus[1] and by_plexus[2] == 6.0, results
        assert after == 6.0


def lose_one_and_take_a_newcomer(rank, world, path):
    import plexus as dist
    store = _handle_store(path)
    if rank == 3:  # Starts forming only once member 2 is gone, as a replacement would.
        store.wait(["lost"])
        handles = _exchange(store, 3, [0, 1, 3])
        dist._reconfigure(3, handles).wait()
        state = np.zeros(64)
    else:
        handles = _exchange(store, rank, [0, 1, 2])
        dist._reconfigure(1, handles).wait()
        x = np.ones(1 << 16, np.float32)
        dist.all_reduce(x)
        if rank == 2:
            store.set("lost", "2")
            os.kill(os.getpid(), signal.SIGKILL)
        with pytest.raises(dist.PlexusError):
            dist.all_reduce(x)  # Member 2 is gone.
        dist._reconfigure(2, handles[:2]).wait()
        assert _sum_of_ranks_plus_one() == 3.0  # The two survivors alone.
        dist._reconfigure(3, handles[:2] + [store.get("handle/3").decode()]).wait()
        state = np.full(64, 2.5)
    dist.broadcast(state, src=0)
    return dist.get_rank(), float(state.min()), float(state.max()), _sum_of_ranks_plus_one()


def test_survivors_reconfigure_without_a_killed_member_and_a_newcomer_joins():
    path = os.path.join(os.environ["TEST_TMPDIR"], "handles-" + uuidlib.uuid4().hex)
    results = run_world(lose_one_and_take_a_newcomer, 4, path, may_exit=(2,), op_timeout=30,
                        init_options={"enable_reconfigure": True})
    assert results[2] is None
    assert [results[r] for r in (0, 1, 3)] == [(r, 2.5, 2.5, 6.0) for r in (0, 1, 2)], results


def not_reconfigurable(rank, world):
    import plexus as dist
    assert not dist._supports_reconfigure()
    with pytest.raises(RuntimeError, match="not created with"):
        dist._get_reconfigure_handle()
    with pytest.raises(RuntimeError, match="not created with"):
        dist._reconfigure(1, ["plexus:h:1:0000000000000000"])
    return dist.get_rank()


def test_a_group_made_without_it_refuses_reconfigure():
    assert run_world(not_reconfigurable, 2) == [0, 1]
