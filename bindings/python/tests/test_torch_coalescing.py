"""torch's coalescing on "plexus" groups (torch 2.x): _coalescing_manager with and without a
device (sync and async), batch_isend_irecv (which takes the coalescing path where the backend
says supports_coalescing, torch 2.14), regions refused when nested or never opened, and the
one Work a region ends with. Each sum and each received tensor is checked."""
import pytest

from multiproc import refusal, run_world

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from plexus import _plexus_torch  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _plexus_torch.TORCH_BACKEND_API or not hasattr(dist, "_coalescing_manager"),
    reason="plexus takes coalescing regions from torch 2.x (this is torch %s)" % torch.__version__)

CPU = torch.device("cpu")


def run(fn, world, *args):
    return run_world(fn, world, *args, backend="plexus", init="torch")


def many_all_reduces(rank, world, device, async_ops):
    tensors = [torch.full((17 + i,), float(rank + i)) for i in range(12)]
    with dist._coalescing_manager(device=device, async_ops=async_ops) as cm:
        for tensor in tensors:
            dist.all_reduce(tensor)
    if async_ops:
        cm.wait()
    base = sum(range(world))
    return all(torch.equal(t, torch.full_like(t, float(base + world * i)))
               for i, t in enumerate(tensors))


@pytest.mark.parametrize("async_ops", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("device", [None, CPU], ids=["fast_path", "device"])
def test_coalescing_manager_sums_every_all_reduce(device, async_ops):
    assert run(many_all_reduces, 4, device, async_ops) == [True] * 4


def ring_exchange(rank, world):
    send = torch.full((1000,), float(rank))
    recv = torch.zeros(1000)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world),
           dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    works = dist.batch_isend_irecv(ops)
    for work in works:
        work.wait()
    backend = dist.group.WORLD._get_backend(CPU)
    return len(works), bool(getattr(backend, "supports_coalescing", False)), float(recv[0])


def test_batch_isend_irecv_runs_as_one_coalesced_work():
    for rank, (count, supported, got) in enumerate(run(ring_exchange, 4)):
        assert got == float((rank - 1) % 4)
        if supported:  # torch 2.14: one Work for the batch; 2.6 asks no backend.
            assert count == 1


def misuse(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    pg._start_coalescing(CPU)
    nested = refusal(lambda: pg._start_coalescing(CPU), "do not nest")
    x = torch.ones(5)
    dist.all_reduce(x)  # Inside the region: issued at once, and part of its Work.
    work = pg._end_coalescing(CPU)
    work.wait()
    unopened = refusal(lambda: pg._end_coalescing(CPU), "no coalescing region is open")
    pg._start_coalescing(CPU)
    pg._end_coalescing(CPU).wait()  # An empty region completes at once.
    return nested, unopened, float(x[0])


def test_regions_do_not_nest_and_an_end_needs_a_start():
    for result in run(misuse, 2):
        assert result == ("refused", "refused", 2.0), result


def test_the_coalescing_benchmark_runs_and_checks_its_sums():
    import os
    import subprocess
    import sys
    root = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    done = subprocess.run(
        [sys.executable, os.path.join(root, "bindings/python/examples/coalescing_bench.py"),
         "--ranks", "2", "--ops", "3", "--numel", "8", "--iters", "2", "--warmup", "1"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| plexus")
            or line.startswith("| gloo")]
    assert [row.split("|")[1].strip() for row in rows] == ["plexus", "gloo"], done.stdout


def abort_before_members(rank, world):
    # torch's _abort_process_group() on the world opens a coalescing region around its aborts
    # (torch 2.14, where the backend says supports_coalescing): an empty region must end at
    # once also on a group that has no members yet.
    dist.distributed_c10d._abort_process_group()
    return "aborted"


def test_abort_process_group_of_a_group_with_no_members_yet():
    if "enable_reconfigure" not in dist.init_process_group.__code__.co_varnames:
        pytest.skip("torch %s has no reconfigure regime (2.14+)" % torch.__version__)
    results = run_world(abort_before_members, 2, backend="plexus", init="torch", destroy=False,
                        init_options={"enable_reconfigure": True})
    assert results == ["aborted", "aborted"]
