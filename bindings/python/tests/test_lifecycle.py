"""Process-group lifecycle from Python, torch.distributed-shaped: a rank dies mid-run and the
survivors shrink_group() and keep computing right answers; split_group() makes subgroups;
abort_process_group() ends a pending collective at once."""
import os

import numpy as np

from multiproc import run_world


def survive_a_crash(rank, world):
    import plexus as dist
    x = np.zeros(1 << 16, np.float32)
    failure = None
    for step in range(1000):
        if rank == 2 and step == 5:
            os._exit(1)  # A crash: no goodbye, sockets closed by the kernel.
        x[:] = rank + 1
        try:
            dist.all_reduce(x)
        except dist.PlexusError as error:
            failure = error
            break
        assert x[0] == 10, (step, x[0])
    assert failure is not None and step == 5, (step, failure)
    dist.shrink_group()  # Without the ranks found lost.
    new_rank, size = dist.get_rank(), dist.get_world_size()
    sums = []
    for step in range(20):
        x[:] = new_rank + step
        dist.all_reduce(x)
        sums.append(float(x[-1]))
    gathered = [np.zeros(2, np.int64) for _ in range(size)]
    dist.all_gather(gathered, np.full(2, rank, np.int64))
    token = np.array([new_rank * 10 if new_rank == 1 else -1], np.int64)
    dist.broadcast(token, src=1)
    return new_rank, size, sums, [int(g[0]) for g in gathered], int(token[0]), type(failure).__name__


def test_survivors_of_a_crash_shrink_and_keep_computing():
    results = run_world(survive_a_crash, 4, may_exit=(2,), op_timeout=30)
    assert results[2] is None
    expected_sums = [float(3 * step + 3) for step in range(20)]  # New ranks 0, 1, 2.
    for old_rank, new_rank in ((0, 0), (1, 1), (3, 2)):
        got_rank, size, sums, gathered, token, error = results[old_rank]
        assert (got_rank, size) == (new_rank, 3), results[old_rank]
        assert sums == expected_sums
        assert gathered == [0, 1, 3]  # Old ranks, in the new order.
        assert token == 10
        assert error in ("UnavailableError", "AbortedError"), error


def split(rank, world):
    import plexus as dist
    group = dist.split_group(split_ranks=[[3, 1], [0, 2]])
    x = np.full(4, rank, np.float64)
    dist.all_reduce(x, group=group)
    return dist.get_rank(group), dist.get_world_size(group), float(x[0])


def test_split_group_orders_ranks_as_listed():
    assert run_world(split, 4) == [(0, 2, 2.0), (1, 2, 4.0), (1, 2, 2.0), (0, 2, 4.0)]


def abort_pending(rank, world):
    import time
    import plexus as dist
    from plexus import _groups
    store = _groups.world().store
    if rank == 1:
        store.wait(["rank0_done"])
        return None
    x = np.ones(1000, np.float32)
    work = dist.all_reduce(x, async_op=True)  # Rank 1 never joins.
    dist.abort_process_group(reason="the loop gave up")
    start = time.monotonic()
    try:
        work.wait()
        outcome = "completed"
    except dist.AbortedError as error:
        outcome = "aborted" if "the loop gave up" in str(error) else str(error)
    took = time.monotonic() - start
    try:
        dist.all_reduce(x)
        later = "ran"
    except dist.AbortedError:
        later = "aborted"
    store.set("rank0_done", "1")
    return outcome, later, took < 2.0


def test_abort_process_group_ends_a_pending_collective():
    results = run_world(abort_pending, 2, destroy=False)
    assert results[0] == ("aborted", "aborted", True), results


def abort_idle(rank, world):
    import warnings
    import plexus as dist
    dist.all_reduce(np.ones(4, np.float32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.abort_process_group()
    try:
        dist.all_reduce(np.ones(4, np.float32))
        later = "ran"
    except dist.AbortedError:
        later = "aborted"
    return [str(w.message) for w in caught], later


def test_aborting_an_idle_group_warns_of_nothing():
    # Every backend of the group (tcp, and the CUDA staging it serves where CUDA was built)
    # aborts what it runs: nothing is left that "could not be aborted".
    assert run_world(abort_idle, 2, destroy=False) == [([], "aborted")] * 2


def test_the_ddp_recovery_example_keeps_training_after_a_rank_dies():
    import re
    import subprocess
    import sys
    example = os.path.join(os.getcwd(), "bindings", "python", "examples",
                           "ddp_shrink_recovery.py")
    done = subprocess.run([sys.executable, example, "--ranks", "4", "--victim", "3", "--steps",
                           "12", "--die-at", "5"], capture_output=True, text=True, timeout=240)
    output = done.stdout
    assert done.returncode == 0, output + done.stderr
    assert "survivors exited with [0, 0, 0]" in output, output
    for rank in range(3):
        after = re.findall(r"rank %d: step (\d+) loss ([0-9.]+) world 3" % rank, output)
        assert [int(step) for step, _ in after][-1] == 11, output
        assert all(float(loss) < 1.0 for _, loss in after), output
        assert "rank %d: step 5 failed" % rank in output, output
        assert "rank %d: done" % rank in output
    assert "rank 3: step 5" not in output


def test_device_id_connects_eagerly_and_refuses_a_device_that_does_not_parse(tmp_path):
    import plexus as dist
    import pytest
    import torch
    url = "file://" + str(tmp_path / "store")
    dist.init_process_group("tcp", init_method=url, rank=0, world_size=1,
                            device_id=torch.device("cpu"))
    x = np.ones(3, np.float32)
    dist.all_reduce(x)
    dist.destroy_process_group()
    with pytest.raises(dist.InvalidArgumentError) as refused:
        dist.init_process_group("tcp", init_method=url + "2", rank=0, world_size=1,
                                device_id="tpu:0")
    assert "tpu" in str(refused.value), refused.value
    assert not dist.is_initialized()
