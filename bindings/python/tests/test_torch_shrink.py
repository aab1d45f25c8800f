"""torch's own shrink_group (torch 2.10+; plexus overrides c10d::Backend's shrink from 2.14) on
"plexus" groups, with the cases torch's tests of it take (test_c10d_nccl.py's
test_shrink_group_*: the backend's properties, one and several ranks excluded, SHRINK_ABORT,
shrinking again, a subgroup), and survivors of a rank SIGKILLed or SIGSTOPped inside an
all_reduce shrinking past it, on plexus's tcp backend and on gloo underneath. Every sum is
checked against the ranks that remain."""
import functools
import os
import signal

import numpy as np
import pytest

from multiproc import run_world

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(dist, "shrink_group"),
                                reason="torch %s has no shrink_group (2.10+)" % torch.__version__)

BACKENDS = ["tcp", "cpu:gloo"]
CPU = torch.device("cpu")


def choose_backend(name, rank, world):
    """before_init for run_world: the plexus backend string the "plexus" groups run on."""
    os.environ["PLEXUS_TORCH_BACKEND"] = name


def run(fn, *args, backend="tcp", may_exit=(), op_timeout=30):
    return run_world(fn, 4, *args, backend="plexus", init="torch",
                     before_init=functools.partial(choose_backend, backend), may_exit=may_exit,
                     destroy=False, op_timeout=op_timeout)


def summed(value, group=None):
    x = torch.full((1024,), float(value))
    dist.all_reduce(x, group=group)
    return float(x[0])


def gathered(value, group=None):
    size = dist.get_world_size(group)
    out = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(out, torch.tensor([value]), group=group)
    return [int(t[0]) for t in out]


def leave():
    """An excluded rank: it must not call shrink_group, and goes (torch's contract)."""
    os._exit(0)


def shrink_one(rank, world, excluded):
    backend = dist.group.WORLD._get_backend(CPU)
    supported = bool(backend.supports_shrinking)
    if rank == excluded:
        leave()
    new = dist.shrink_group([excluded])
    answer = (supported, dist.get_rank(), dist.get_world_size(), new.size(),
              dist.get_backend(new), summed(rank), gathered(rank))
    dist.destroy_process_group()
    return answer


@pytest.mark.parametrize("backend", BACKENDS)
def test_shrink_group_basic(backend):
    results = run(shrink_one, 1, backend=backend, may_exit=(1,))
    for old_rank, new_rank in ((0, 0), (2, 1), (3, 2)):
        assert results[old_rank] == (True, new_rank, 3, 3, "plexus", 5.0, [0, 2, 3]), results


def shrink_twice(rank, world):
    if rank == 3:
        leave()
    dist.shrink_group([3])
    first = (dist.get_world_size(), summed(rank))
    if rank == 0:  # Old rank 0 is new rank 0: the second shrink excludes it.
        leave()
    dist.shrink_group([0])
    second = (dist.get_rank(), dist.get_world_size(), summed(rank), gathered(rank))
    dist.destroy_process_group()
    return first, second


def test_shrink_group_multiple_iterations():
    results = run(shrink_twice, may_exit=(0, 3))
    for old_rank, new_rank in ((1, 0), (2, 1)):
        assert results[old_rank] == ((3, 3.0), (new_rank, 2, 3.0, [1, 2])), results


def shrink_two_at_once(rank, world):
    if rank in (0, 2):
        leave()
    dist.shrink_group([2, 0])
    answer = (dist.get_rank(), dist.get_world_size(), summed(rank), gathered(rank))
    dist.destroy_process_group()
    return answer


def test_shrink_group_multiple_exclusions():
    results = run(shrink_two_at_once, may_exit=(0, 2))
    assert results[1] == (0, 2, 4.0, [1, 3]) and results[3] == (1, 2, 4.0, [1, 3]), results


def shrink_with_abort(rank, world):
    store = dist.distributed_c10d._get_default_store()
    if rank == 2:  # Alive, so nothing fails by itself, until the others have shrunk.
        store.wait(["shrunk"])
        leave()
    # Rank 2 never joins this one: it stays pending until SHRINK_ABORT ends it.
    pending = dist.all_reduce(torch.ones(16), async_op=True)
    dist.shrink_group([2], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    try:
        pending.wait()
        ended = "completed"
    except RuntimeError as error:
        ended = "aborted" if "shrunk to exclude rank(s) 2" in str(error) else str(error)
    answer = (ended, dist.get_world_size(), summed(rank))
    if dist.get_rank() == 0:
        store.set("shrunk", "1")
    dist.destroy_process_group()
    return answer


def test_shrink_group_abort_flag_ends_what_the_parent_had_pending():
    results = run(shrink_with_abort, may_exit=(2,))
    for old_rank in (0, 1, 3):
        assert results[old_rank] == ("aborted", 3, 4.0), results


def shrink_subgroup(rank, world):
    sub = dist.new_group([0, 1, 2])
    if rank == 3:
        answer = ("outside", summed(rank))
    elif rank == 1:
        answer = ("excluded", summed(rank))
    else:
        shrunk = dist.shrink_group([1], group=sub)
        answer = (shrunk.size(), summed(rank, group=shrunk), summed(rank))
    # The default group is untouched: every rank sums over it again.
    answer += (summed(1),)
    dist.barrier()
    return answer


def test_shrink_group_of_a_subgroup_leaves_the_default_group():
    results = run(shrink_subgroup)
    assert results[0] == (2, 2.0, 6.0, 4.0) and results[2] == (2, 2.0, 6.0, 4.0), results
    assert results[1] == ("excluded", 6.0, 4.0) and results[3] == ("outside", 6.0, 4.0), results


def lose_a_rank_inside_an_all_reduce(rank, world, how):
    x = torch.ones(1 << 22)  # 16 MiB: rank 3 goes while it is under way.
    if rank == 3:
        dist.all_reduce(x, async_op=True)
        os.kill(os.getpid(), how)
        return None  # SIGSTOP: never reached before the test ends (run_world kills it).
    try:
        dist.all_reduce(x)
        failure = None
    except RuntimeError as error:
        failure = type(error).__name__
    lost = list(dist.group.WORLD._get_backend(CPU).lost_ranks)
    dist.shrink_group([3])
    answer = (failure is not None, lost, dist.get_world_size(), summed(rank), gathered(rank))
    dist.destroy_process_group()
    return answer


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["SIGKILL", "SIGSTOP"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_survivors_shrink_past_a_rank_lost_inside_a_collective(backend, how):
    # A frozen peer: plexus's heartbeat finds it on tcp; gloo's survivors wait out the timeout.
    results = run(lose_a_rank_inside_an_all_reduce, how, backend=backend, may_exit=(3,),
                  op_timeout=6)
    for old_rank in (0, 1, 2):
        failed, lost, size, total, ranks = results[old_rank]
        assert failed, results[old_rank]
        assert (size, total, ranks) == (3, 3.0, [0, 1, 2]), results[old_rank]
        if how == signal.SIGKILL and backend == "tcp":
            assert lost == [3], results[old_rank]
