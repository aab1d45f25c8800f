"""torch's completion hooks on "plexus" groups (torch 2.x: pg._register_on_completion_hook,
pg._wait_for_pending_works), with the cases torch's own tests of them take
(test_c10d_nccl.py's test_on_completion_hook_*: broadcasts, mixed ops, sequence numbers,
durations), plus what plexus promises beyond NCCL there: failed operations run the hook too,
the hook runs on a thread of its own, a raising hook harms nothing, one hook per group."""
import threading

import pytest

from multiproc import refusal, run_world

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from plexus import _plexus_torch  # noqa: E402

# torch 1.13's ProcessGroup binds the call, but plexus's backend takes it from torch 2.x.
pytestmark = pytest.mark.skipif(not _plexus_torch.TORCH_BACKEND_API,
                                reason="plexus takes completion hooks from torch 2.x (this is "
                                       "torch %s)" % torch.__version__)


def run(fn, world=2, **options):
    return run_world(fn, world, backend="plexus", init="torch", **options)


def recorder():
    """A hook that keeps what it is given: (op type name, seq, started, finished, active,
    thread)."""
    seen = []

    def hook(info):
        seen.append((str(info.op_type).split(".")[-1], info.seq, info.time_started,
                     info.time_finished, info.active_duration, threading.get_ident()))
    return seen, hook


def broadcasts(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    seen, hook = recorder()
    pg._register_on_completion_hook(hook)
    tensor = torch.ones(64) * rank
    for _ in range(5):
        dist.broadcast(tensor, src=0)
    pg._wait_for_pending_works()
    ok_times = all(started <= finished and active.total_seconds() >= 0
                   for _, _, started, finished, active, _ in seen)
    other_thread = all(thread != threading.get_ident() for *_, thread in seen)
    return [name for name, *_ in seen], [seq for _, seq, *_ in seen], ok_times, other_thread, \
        float(tensor[0])


def test_a_hook_sees_every_broadcast_in_order_on_its_own_thread():
    for names, seqs, ok_times, other_thread, value in run(broadcasts):
        assert names == ["BROADCAST"] * 5
        assert seqs == sorted(seqs) and len(set(seqs)) == 5, seqs
        assert ok_times and other_thread and value == 0.0


def mixed(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    seen, hook = recorder()
    pg._register_on_completion_hook(hook)
    x = torch.ones(8)
    dist.all_reduce(x)
    out = [torch.zeros(8) for _ in range(world)]
    dist.all_gather(out, x)
    dist.broadcast(x, src=1)
    dist.barrier()
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    pg._wait_for_pending_works()
    return [name for name, *_ in seen], float(x[0])


def test_a_hook_sees_mixed_operations_and_async_ones():
    for names, value in run(mixed):
        assert names == ["ALLREDUCE", "ALLGATHER", "BROADCAST", "BARRIER", "ALLREDUCE"], names
        assert value == 4.0


def failed(rank, world):
    import plexus.torch
    if rank == 1:
        return None  # Never joins the all_reduce; rank 0 aborts it.
    pg = dist.distributed_c10d._get_default_group()
    seen, hook = recorder()
    pg._register_on_completion_hook(hook)
    work = dist.all_reduce(torch.ones(8), async_op=True)
    plexus.torch.abort_process_group()
    try:
        work.wait()
        outcome = "completed"
    except RuntimeError:
        outcome = "failed"
    pg._wait_for_pending_works()
    return outcome, [name for name, *_ in seen]


def test_a_failed_operation_runs_the_hook_too():
    results = run(failed, destroy=False)
    assert results[0] == ("failed", ["ALLREDUCE"]), results


def raising_and_twice(rank, world):
    pg = dist.distributed_c10d._get_default_group()

    def hook(info):
        raise ValueError("a broken hook")
    pg._register_on_completion_hook(hook)
    second = refusal(lambda: pg._register_on_completion_hook(hook),
                     "has a completion hook already")
    x = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(x)
    pg._wait_for_pending_works()
    return second, float(x[0]), pg._has_hooks()


def test_a_raising_hook_harms_no_operation_and_a_second_hook_is_refused():
    for second, value, has_hooks in run(raising_and_twice):
        assert (second, value, has_hooks) == ("refused", 8.0, True)
