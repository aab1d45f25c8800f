"""torch.distributed on plexus behaves as on gloo, call by call: every failure raises (from
synchronous calls, work.wait() and the future), coalesced layouts, every ProcessGroup call shape
with torch's defaults, timeouts that are zero or given to wait(), the sender of an any-source
receive, DDP communication hooks. Each scenario runs on "plexus" and on "gloo" and the outcomes
are compared, so gloo is the reference for what torch users expect."""
import datetime
import time

import numpy as np
import pytest

import multiproc

torch = pytest.importorskip("torch")

BACKENDS = ("plexus", "gloo")


# What torch's backends raise for a failed collective: RuntimeError, or from torch 2.1 its
# subclass DistBackendError (torch_types.h).
RUNTIME_ERRORS = ("RuntimeError", "DistBackendError")


def outcome(call):
    """("ok", value) or ("raised", exception class name, message)."""
    try:
        return ("ok", call())
    except Exception as error:  # noqa: BLE001 - the outcome is what is compared.
        return ("raised", type(error).__name__, str(error))


def meet(rank, name, world=2):
    """Every rank reaches `name` (through torch's store, with a timeout of its own)."""
    import torch.distributed as dist
    store = dist.distributed_c10d._get_default_store()
    store.set("%s/%d" % (name, rank), "1")
    store.wait(["%s/%d" % (name, r) for r in range(world)], datetime.timedelta(seconds=60))


def run_both(fn, world, *args, **options):
    """fn's results on plexus and on gloo. gloo's ranks leave without destroy_process_group: on
    torch 2.6 it hangs there now and then at 3 ranks (a rank killed after the deadline), and
    the reference's teardown is not what is compared."""
    reference = dict(options, destroy=False)
    return {backend: multiproc.run_world(fn, world, *args, backend=backend, init="torch",
                                         **(options if backend == "plexus" else reference))
            for backend in BACKENDS}


# --- failures raise ----------------------------------------------------------------------------

def absent_peer(rank, world):
    """Rank 1 skips every collective; rank 0's must all fail, however they are waited for."""
    import torch.distributed as dist
    report = {}
    if rank == 0:
        x = torch.ones(3)
        start = time.monotonic()
        report["sync_all_reduce"] = outcome(lambda: dist.all_reduce(x))
        report["sync_seconds"] = time.monotonic() - start
        report["input_kept"] = x.tolist()
        work = dist.all_reduce(torch.ones(3), async_op=True)
        report["work_wait"] = outcome(work.wait)
        report["is_success"] = work.is_success()
        report["is_completed"] = work.is_completed()
        report["future_wait"] = outcome(lambda: work.get_future().wait())
        start = time.monotonic()
        report["barrier"] = outcome(dist.barrier)
        report["barrier_seconds"] = time.monotonic() - start
    # Rank 1 outlives rank 0's failures (so they are timeouts, not lost peers), then leaves.
    meet(rank, "done")
    return report


def test_a_collective_that_fails_raises_everywhere_as_on_gloo():
    reports = run_both(absent_peer, 2, op_timeout=2, destroy=False)
    for backend, (report, _) in reports.items():
        for call in ("sync_all_reduce", "work_wait", "future_wait", "barrier"):
            assert report[call][0] == "raised", (backend, call, report[call])
            assert report[call][1] in RUNTIME_ERRORS, (backend, call, report[call])
        assert report["is_completed"] and not report["is_success"], backend
    # plexus names the group the error came from (torch 2.x's group name, "torch:0").
    for call in ("sync_all_reduce", "work_wait", "future_wait", "barrier"):
        assert "[plexus, group 'torch" in reports["plexus"][0][call][2], reports["plexus"][0][call]
        assert report["input_kept"] == [1.0, 1.0, 1.0], backend
        # torch's own barrier-timeout test matches this on gloo.
        assert any(word in report["barrier"][2] for word in (" Timed out ", " timeout ")), \
            (backend, report["barrier"])
        # Not before the group's 2 s timeout, and not much after.
        assert 1.9 <= report["sync_seconds"] < 10, (backend, report["sync_seconds"])
        # gloo fails at once here (its connection is broken by the earlier timeouts); plexus's
        # barrier waits out its own deadline.
        assert report["barrier_seconds"] < 10, (backend, report["barrier_seconds"])
    assert reports["plexus"][0]["barrier_seconds"] >= 1.9, reports["plexus"][0]
    assert "DEADLINE_EXCEEDED" in reports["plexus"][0]["sync_all_reduce"][2]


def lost_peer(rank, world):
    import os
    import torch.distributed as dist
    dist.barrier()
    if rank == 1:
        os._exit(0)  # Gone without a word: its connections close.
    start = time.monotonic()
    result = outcome(lambda: dist.all_reduce(torch.ones(3)))
    return result, time.monotonic() - start


def test_a_lost_peer_raises_promptly_as_on_gloo():
    for backend in BACKENDS:
        (result, seconds), _ = multiproc.run_world(lost_peer, 2, backend=backend, init="torch",
                                                   op_timeout=60, may_exit=(1,), destroy=False)
        assert result[0] == "raised" and result[1] in RUNTIME_ERRORS, (backend, result)
        assert seconds < 30, (backend, seconds)


# --- layouts and call shapes -------------------------------------------------------------------

def coalesced_and_shapes(rank, world):
    import torch.distributed as dist
    report = {}
    outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(world)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(rank)), torch.full((3,), 10.0 + rank)])
    report["all_gather_coalesced"] = [[t.tolist() for t in row] for row in outs]
    pg = dist.distributed_c10d._get_default_group()
    t = torch.full((2,), float(rank + 1))
    shapes = {
        "allreduce([t])": lambda: pg.allreduce([t]),
        "allreduce([t], op)": lambda: pg.allreduce([t], dist.ReduceOp.MAX),
        "allreduce(t)": lambda: pg.allreduce(t),
        "allreduce(t, op)": lambda: pg.allreduce(t, dist.ReduceOp.MIN),
        "allreduce_coalesced([t])": lambda: pg.allreduce_coalesced([t]),
        "broadcast([t])": lambda: pg.broadcast([t]),
        "broadcast(t, 0)": lambda: pg.broadcast(t, 0),
        "reduce([t])": lambda: pg.reduce([t]),
        "reduce(t, 0)": lambda: pg.reduce(t, 0),
        "reduce(t, 0, op)": lambda: pg.reduce(t, 0, dist.ReduceOp.MAX),
        "barrier()": lambda: pg.barrier(),
    }
    for name, call in shapes.items():
        t.fill_(float(rank + 1))
        report[name] = outcome(lambda: (call().wait(), t.tolist())[1])
        if name.startswith("reduce") and rank != 0 and report[name][0] == "ok":
            report[name] = ("ok", "(not the root: contents unspecified)")
    report["size"] = pg.size()
    report["rank"] = pg.rank()
    return report


def test_coalesced_layouts_and_every_call_shape_match_gloo():
    # No destroy_process_group: on torch 2.6 gloo's 3 ranks sometimes hang in it (seen in 3 of 4
    # runs on 2026-11-29), after the report is made.
    reports = run_both(coalesced_and_shapes, 3, destroy=False)
    assert reports["plexus"] == reports["gloo"]
    # [rank][input], as torch documents it.
    assert reports["plexus"][0]["all_gather_coalesced"] == [
        [[float(r)] * 2, [10.0 + r] * 3] for r in range(3)]
    assert all(value[0] == "ok" for key, value in reports["plexus"][0].items()
               if key not in ("all_gather_coalesced", "size", "rank"))


# --- timeouts ----------------------------------------------------------------------------------

def timeouts(rank, world):
    import torch.distributed as dist
    report = {}
    pg = dist.distributed_c10d._get_default_group()
    if rank == 0:
        # A timeout given to wait() is honoured (the operation goes on, and is completed later).
        x = torch.ones(2)
        work = pg.allreduce([x])
        start = time.monotonic()
        report["wait_timeout"] = outcome(lambda: work.wait(datetime.timedelta(milliseconds=300)))
        report["wait_seconds"] = time.monotonic() - start
        meet(rank, "late")
        report["late_wait"] = outcome(lambda: (work.wait(), x.tolist())[1])
        # A zero timeout is expired, not "forever" (rank 1 never comes to this barrier).
        start = time.monotonic()
        report["zero_monitored"] = outcome(
            lambda: pg.monitored_barrier(datetime.timedelta(seconds=0)))
        report["zero_seconds"] = time.monotonic() - start
        start = time.monotonic()
        report["missing_monitored"] = outcome(
            lambda: pg.monitored_barrier(datetime.timedelta(milliseconds=500)))
        report["missing_seconds"] = time.monotonic() - start
    else:
        meet(rank, "late")
        dist.all_reduce(torch.ones(2))
    meet(rank, "done")
    return report


def test_zero_and_wait_timeouts_as_on_gloo():
    reports = run_both(timeouts, 2, op_timeout=30, destroy=False)
    for backend, (report, _) in reports.items():
        assert report["wait_timeout"][0] == "raised", (backend, report["wait_timeout"])
        assert report["wait_seconds"] < 5, (backend, report["wait_seconds"])
        assert report["late_wait"] == ("ok", [2.0, 2.0]), (backend, report["late_wait"])
        assert report["zero_monitored"][0] == "raised", (backend, report)
        assert "Rank 0 timed out in monitoredBarrier" in report["zero_monitored"][2], backend
        assert report["zero_seconds"] < 5, (backend, report["zero_seconds"])
        assert "Rank 1 failed to pass monitoredBarrier" in report["missing_monitored"][2], backend
        assert 0.4 < report["missing_seconds"] < 5, (backend, report["missing_seconds"])


# --- point-to-point ----------------------------------------------------------------------------

def any_source(rank, world):
    import torch.distributed as dist
    if rank == 0:
        senders = []
        for _ in range(world - 1):
            t = torch.zeros(2)
            sender = dist.recv(t)
            senders.append((sender, t.tolist()))
        return sorted(senders)
    dist.send(torch.full((2,), float(rank)), dst=0)
    return None


def test_a_receive_from_any_source_reports_the_sender():
    reports = run_both(any_source, 3)
    expected = [(r, [float(r)] * 2) for r in (1, 2)]
    assert reports["plexus"][0] == expected
    assert reports["gloo"][0] == expected


# --- sparse all_reduce -------------------------------------------------------------------------

def sparse_sums(rank, world):
    import torch.distributed as dist
    report = {}
    # Rank r holds entries at rows 0..r (overlapping) and one row of its own, values 2-wide.
    rows = list(range(rank + 1)) + [world + rank]
    indices = torch.tensor([rows], dtype=torch.int64)
    values = torch.arange(len(rows) * 2, dtype=torch.float64).reshape(len(rows), 2) + rank
    tensor = torch.sparse_coo_tensor(indices, values, (2 * world, 2))
    work = dist.all_reduce(tensor, async_op=True)
    work.wait()
    report["sum"] = tensor.to_dense().tolist()
    report["result"] = [t.to_dense().tolist() for t in work.result()]
    empty = torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.int64), torch.zeros(0), (3,))
    if rank == 0:
        empty = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.tensor([5.0]), (3,))
    dist.all_reduce(empty)
    report["one_holder"] = empty.to_dense().tolist()
    report["max"] = outcome(lambda: dist.all_reduce(tensor.clone(), op=dist.ReduceOp.MAX))[0]
    return report


def test_sparse_all_reduce_sums_as_gloo():
    reports = run_both(sparse_sums, 3)
    assert reports["plexus"] == reports["gloo"]
    dense = np.zeros((6, 2))
    for rank in range(3):
        rows = list(range(rank + 1)) + [3 + rank]
        dense[rows] += np.arange(len(rows) * 2).reshape(len(rows), 2) + rank
    for report in reports["plexus"]:
        np.testing.assert_array_equal(report["sum"], dense)
        assert report["result"] == [report["sum"]]
        assert report["one_holder"] == [0.0, 5.0, 0.0]
        assert report["max"] == "raised"  # SUM only, as on gloo.


def sparse_async(rank, world):
    """async_op=True returns before the other ranks have issued theirs, the call counts once in
    the group's sequence, and dense collectives issued meanwhile are not confused with it."""
    import torch.distributed as dist
    store = dist.distributed_c10d._get_default_store()
    group = dist.distributed_c10d._get_default_group()
    report = {}
    before = group._get_sequence_number_for_group()
    tensor = torch.sparse_coo_tensor(torch.tensor([[rank, 2]]), torch.tensor([1.0, rank + 1.0]),
                                     (4,))
    if rank == 1:
        # Only once rank 0's call has returned (60 s: a blocking call would never let it).
        store.wait(["issued"], datetime.timedelta(seconds=60))
    work = dist.all_reduce(tensor, async_op=True)
    if rank == 0:
        store.set("issued", "1")
    dense = torch.full((3,), rank + 1.0)
    dist.all_reduce(dense)  # Issued while the sparse one is still running on rank 0.
    work.wait()
    report["sparse"] = tensor.to_dense().tolist()
    report["dense"] = dense.tolist()
    report["counted"] = group._get_sequence_number_for_group() - before
    # A callback that issues another sparse all_reduce and waits for it (PowerSGD's pattern).
    def nested(_):
        inner = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([2.0]), (2,))
        dist.all_reduce(inner, async_op=True).wait()
        return inner.to_dense().tolist()
    outer = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.tensor([1.0]), (2,))
    report["nested"] = dist.all_reduce(outer, async_op=True).get_future().then(nested).wait()
    return report


def test_async_sparse_all_reduce_returns_at_once_and_counts_once():
    reports = run_both(sparse_async, 2)
    for backend, per_rank in reports.items():
        for report in per_rank:
            assert report["sparse"] == [1.0, 1.0, 3.0, 0.0], backend
            assert report["dense"] == [3.0, 3.0, 3.0], backend
            assert report["nested"] == [4.0, 0.0], backend
    # The sparse all_reduce and the dense one: as many calls as gloo counts.
    assert [r["counted"] for r in reports["plexus"]] == [r["counted"] for r in reports["gloo"]]


def sparse_aborted(rank, world):
    """plexus.torch.abort_process_group() ends a pending sparse all_reduce at once."""
    import torch.distributed as dist
    import plexus.torch
    report = {}
    if rank == 0:  # Rank 1 never joins in: only the abort can end it before the timeout.
        tensor = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (2,))
        work = dist.all_reduce(tensor, async_op=True)
        start = time.monotonic()
        plexus.torch.abort_process_group(reason="gave up on sparse")
        report["wait"] = outcome(work.wait)
        report["seconds"] = time.monotonic() - start
        report["kept"] = tensor.to_dense().tolist()
    meet(rank, "done")
    return report


def test_abort_ends_a_pending_sparse_all_reduce():
    report = multiproc.run_world(sparse_aborted, 2, backend="plexus", init="torch", op_timeout=60,
                                 destroy=False)[0]
    assert report["wait"][0] == "raised" and "gave up on sparse" in report["wait"][2], report
    assert report["seconds"] < 30, report
    assert report["kept"] == [1.0, 0.0], report


# --- DDP communication hooks -------------------------------------------------------------------

def fp16_compress_over_float32(process_group, bucket):
    """fp16_compress_hook's arithmetic with float32 on the wire, for gloo: Debian's torch 2.14
    builds gloo without half precision ("Invalid scalar type"). Two float16 values add exactly
    in float32, so at 2 ranks the sum rounded to float16 is float16's own rounded sum."""
    import torch.distributed as dist
    buffer = bucket.buffer()
    compressed = buffer.to(torch.float16).div_(dist.get_world_size()).float()
    fut = dist.all_reduce(compressed, async_op=True).get_future()
    return fut.then(lambda done: buffer.copy_(done.value()[0].half()))


def ddp_with_hooks(rank, world):
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel
    assert world == 2, "fp16_compress_over_float32 is exact at 2 ranks only"
    fp16_hook = (fp16_compress_over_float32 if dist.get_backend() == "gloo"
                 else default_hooks.fp16_compress_hook)
    results = {}
    for name, hook in (("allreduce", default_hooks.allreduce_hook), ("fp16", fp16_hook)):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        ddp = DistributedDataParallel(model)
        ddp.register_comm_hook(state=None, hook=hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        generator = torch.Generator().manual_seed(rank)
        for _ in range(5):
            optimizer.zero_grad()
            ddp(torch.randn(4, 6, generator=generator)).sum().backward()
            optimizer.step()
        results[name] = [p.detach().numpy().copy() for p in model.parameters()]
    return results


def test_ddp_communication_hooks_match_gloo():
    reports = run_both(ddp_with_hooks, 2)
    for rank in range(2):
        for hook in ("allreduce", "fp16"):
            for mine, theirs in zip(reports["plexus"][rank][hook], reports["gloo"][rank][hook]):
                np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-6)


# --- registration ------------------------------------------------------------------------------

def test_register_twice_is_harmless():
    import plexus.torch
    plexus.torch.register()
    plexus.torch.register()
    import torch.distributed as dist
    assert "PLEXUS" in dist.Backend._plugins
