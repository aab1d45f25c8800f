"""plexus as a torch.distributed backend: torch.distributed calls and DistributedDataParallel
on groups created with backend "plexus", checked against numpy references and against gloo."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import multiproc

torch = pytest.importorskip("torch")


def torch_collectives(rank, world):
    import torch.distributed as dist
    assert dist.get_backend() == "plexus"
    results = {}
    t = torch.arange(6, dtype=torch.float32) + rank
    dist.all_reduce(t)
    results["all_reduce"] = t.numpy().copy()
    t = torch.arange(4, dtype=torch.int64) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    results["all_reduce_max"] = t.numpy().copy()
    t = torch.full((3,), float(rank))
    dist.broadcast(t, src=world - 1)
    results["broadcast"] = t.numpy().copy()
    t = torch.full((2,), float(rank + 1))
    dist.reduce(t, dst=0, op=dist.ReduceOp.PRODUCT)
    if rank == 0:
        results["reduce"] = t.numpy().copy()
    outs = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank)))
    results["all_gather"] = np.stack([o.numpy() for o in outs])
    out = torch.zeros(world * 2)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank)))
    results["all_gather_into_tensor"] = out.numpy().copy()
    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.full((2,), float(rank * 10 + r)) for r in range(world)])
    results["reduce_scatter"] = out.numpy().copy()
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(world * 2, dtype=torch.float32) + rank)
    results["reduce_scatter_tensor"] = out.numpy().copy()
    out = torch.zeros(world, dtype=torch.int64)
    dist.all_to_all_single(out, torch.arange(world, dtype=torch.int64) + 100 * rank)
    results["all_to_all_single"] = out.numpy().copy()
    outs = [torch.zeros(1) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((1,), float(rank * 10 + r)) for r in range(world)])
    results["all_to_all"] = np.concatenate([o.numpy() for o in outs])
    gathered = [torch.zeros(1) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((1,), float(rank)), gathered, dst=0)
    if rank == 0:
        results["gather"] = np.concatenate([g.numpy() for g in gathered])
    out = torch.zeros(1)
    dist.scatter(out, [torch.full((1,), float(r + 7)) for r in range(world)] if rank == 0 else None,
                 src=0)
    results["scatter"] = out.numpy().copy()
    if world > 1:
        if rank == 0:
            dist.send(torch.full((2,), 42.0), dst=1)
        elif rank == 1:
            t = torch.zeros(2)
            dist.recv(t, src=0)
            results["recv"] = t.numpy().copy()
    work = dist.all_reduce(torch.ones(3), async_op=True)
    work.wait()
    results["future"] = work.get_future().wait()[0].numpy().copy()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    results["all_gather_object"] = objects
    # A torch subgroup on plexus (built by torch through the same registered creator).
    ends = dist.new_group(sorted({0, world - 1}))
    t = torch.full((2,), float(rank + 1))
    if rank in (0, world - 1):
        dist.all_reduce(t, group=ends)
        results["subgroup"] = t.numpy().copy()
    # The name torch and DDP's logs report (torch 2.x's group for a registered backend would
    # say "custom").
    results["name"] = dist.distributed_c10d._get_default_group().name()
    # What flight-recorder dumps call the plexus groups under torch's: torch 2.x names each.
    import plexus.torch
    results["group_names"] = [plexus.torch._plexus_group_of(None).plexus_group.name]
    if rank in (0, world - 1):
        results["group_names"].append(plexus.torch._plexus_group_of(ends).plexus_group.name)
    dist.barrier()
    return results


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_torch_distributed_calls_run_on_plexus(world):
    results = multiproc.run_world(torch_collectives, world, backend="plexus", init="torch")
    ranks = np.arange(world)
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got["all_reduce"],
                                      sum(np.arange(6) + r for r in ranks))
        np.testing.assert_array_equal(got["all_reduce_max"], np.arange(4) * world)
        np.testing.assert_array_equal(got["broadcast"], np.full(3, world - 1))
        if rank == 0:
            np.testing.assert_array_equal(got["reduce"], np.full(2, np.prod(ranks + 1)))
            np.testing.assert_array_equal(got["gather"], ranks)
        np.testing.assert_array_equal(got["all_gather"], np.repeat(ranks, 2).reshape(world, 2))
        np.testing.assert_array_equal(got["all_gather_into_tensor"], np.repeat(ranks, 2))
        np.testing.assert_array_equal(got["reduce_scatter"],
                                      np.full(2, sum(r * 10 + rank for r in ranks)))
        full = sum(np.arange(world * 2) + r for r in ranks)
        np.testing.assert_array_equal(got["reduce_scatter_tensor"], full[rank * 2:rank * 2 + 2])
        np.testing.assert_array_equal(got["all_to_all_single"], ranks * 100 + rank)
        np.testing.assert_array_equal(got["all_to_all"], ranks * 10 + rank)
        np.testing.assert_array_equal(got["scatter"], [rank + 7])
        if world > 1 and rank == 1:
            np.testing.assert_array_equal(got["recv"], [42.0, 42.0])
        np.testing.assert_array_equal(got["future"], np.full(3, world))
        assert got["all_gather_object"] == [{"rank": r} for r in ranks]
        assert got["name"] == "plexus"
        names = got["group_names"]
        if int(torch.__version__.split(".")[0]) >= 2:
            assert all(name.startswith("torch:") for name in names), names
            assert len(set(names)) == len(names), names
        else:
            assert set(names) == {"torch"}, names
        if rank in (0, world - 1):
            np.testing.assert_array_equal(got["subgroup"], np.full(2, sum({1, world})))


def train_ddp(rank, world, steps):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    # Ranks start from different weights: DDP must broadcast rank 0's.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(rank * 0.01)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        inputs = torch.randn(5, 8, generator=generator)
        targets = torch.randn(5, 4, generator=generator)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
    assert dist.get_backend() in ("plexus", "gloo")
    return [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_matches_gloo(world):
    plexus_params = multiproc.run_world(train_ddp, world, 20, backend="plexus", init="torch")
    gloo_params = multiproc.run_world(train_ddp, world, 20, backend="gloo", init="torch")
    for rank in range(world):
        for mine, theirs in zip(plexus_params[rank], gloo_params[rank]):
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-6)
        # DDP keeps replicas identical.
        for mine, first in zip(plexus_params[rank], plexus_params[0]):
            np.testing.assert_array_equal(mine, first)
    # The run trained: parameters moved from where rank 0 started.
    torch.manual_seed(0)
    initial = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    moved = max(float(np.abs(p.detach().numpy() - q).max())
                for p, q in zip(initial.parameters(), plexus_params[0]))
    assert moved > 1e-3


def test_ddp_bench_runs_and_compares_backends():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                          "ddp_bench.py")
    done = subprocess.run([sys.executable, script, "--ranks=2", "--widths=16,32,8", "--steps=2",
                           "--warmup=1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gloo    ddp ranks 2  rank 0 holds 808 parameters" in done.stdout, done.stdout
    assert "plexus  ddp ranks 2  rank 0 holds 808 parameters" in done.stdout, done.stdout
    assert "ranks 2  gloo/plexus step time:" in done.stdout, done.stdout


def test_ddp_bench_floor_is_the_step_without_communication():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                          "ddp_bench.py")
    done = subprocess.run([sys.executable, script, "--ranks=2", "--widths=16,32,8", "--steps=2",
                           "--warmup=1", "--backends=none,plexus", "--load=1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # The floor's ranks train on their own data and end apart; plexus's stay identical.
    assert "none    ddp ranks 2  rank 0 holds 808 parameters" in done.stdout, done.stdout
    assert re.search(r"ranks 2  plexus over the floor: [+-][0-9.]+ ms a step", done.stdout), \
        done.stdout


def collective_in_callback(rank, world, rounds, wait_on):
    """A Future callback that issues an all_reduce and waits for it there, as torch's PowerSGD
    hook does: `wait_on` "future" waits on the nested Work's future, "work" on the Work."""
    import torch.distributed as dist

    sums = []
    for i in range(rounds):
        def nested(fut, i=i):
            t = torch.full((3,), float(rank + i))
            work = dist.all_reduce(t, async_op=True)
            if wait_on == "future":
                return work.get_future().wait()[0].clone()
            work.wait()
            return t

        first = dist.all_reduce(torch.ones(2), async_op=True)
        sums.append(first.get_future().then(nested).wait().numpy().copy())
    return sums


# Not compared with gloo: on torch 2.6 gloo's ranks hang in the "future" case (killed at the
# 100 s limit, 2026-11-29); the reference is computed here instead.
@pytest.mark.parametrize("wait_on", ["future", "work"])
def test_a_callback_that_waits_for_a_collective_it_issued_completes(wait_on):
    world, rounds = 2, 20
    # Each op's timeout is 20 s: a callback stuck on its own thread fails, it does not hang.
    results = multiproc.run_world(collective_in_callback, world, rounds, wait_on, backend="plexus",
                                  init="torch", timeout=100, op_timeout=20)
    for got in results:
        for i, value in enumerate(got):
            np.testing.assert_array_equal(value, np.full(3, sum(r + i for r in range(world))))


def train_ddp_powersgd(rank, world, steps):
    """DDP with torch's own PowerSGD communication hook (its Future callbacks issue and wait for
    collectives), one gradient bucket."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    # One bucket: with several, their callbacks may issue their collectives in a different order
    # on each rank (gloo mismatches them too).
    ddp = DistributedDataParallel(model, bucket_cap_mb=64)
    state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                        start_powerSGD_iter=2, min_compression_rate=0.5,
                                        use_error_feedback=True, warm_start=True)
    ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        inputs = torch.randn(8, 16, generator=generator)
        targets = torch.randn(8, 8, generator=generator)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(inputs), targets).backward()
        optimizer.step()
    assert dist.get_backend() in ("plexus", "gloo")
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_ddp_with_powersgd_matches_gloo():
    world, steps = 2, 8
    plexus_params = multiproc.run_world(train_ddp_powersgd, world, steps, backend="plexus",
                                        init="torch", timeout=200, op_timeout=30)
    # The reference: gloo on torch 1.13 sometimes aborts a rank here ("terminate called after
    # throwing std::system_error: Resource deadlock avoided", 1 run in 3 on a quiet machine, 3
    # in a row once beside the rest of the suite), so it gets up to six tries; plexus gets one.
    tries = 6
    for attempt in range(tries):
        try:
            gloo_params = multiproc.run_world(train_ddp_powersgd, world, steps, backend="gloo",
                                              init="torch", timeout=200, op_timeout=30)
            break
        except AssertionError as error:
            if attempt == tries - 1 or "no result" not in str(error):
                raise
    for rank in range(world):
        for mine, theirs in zip(plexus_params[rank], gloo_params[rank]):
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-5)
        for mine, first in zip(plexus_params[rank], plexus_params[0]):
            np.testing.assert_array_equal(mine, first)
    torch.manual_seed(0)
    initial = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    moved = max(float(np.abs(p.detach().numpy() - q).max())
                for p, q in zip(initial.parameters(), plexus_params[0]))
    assert moved > 1e-3


def test_env_init_works_where_torch_has_no_libuv():
    """Debian's torch 2.6 has no libuv, which torch 2.4+ wants for env:// stores unless
    USE_LIBUV=0: importing plexus.torch sets that where it is needed."""
    code = ("import os, torch, plexus.torch, torch.distributed as dist\n"
            "dist.init_process_group('plexus', init_method='env://', rank=0, world_size=1)\n"
            "t = torch.ones(3)\n"
            "dist.all_reduce(t)\n"
            "print('sum', t.tolist(), os.environ.get('USE_LIBUV'))\n"
            "dist.destroy_process_group()\n")
    env = {k: v for k, v in os.environ.items() if k != "USE_LIBUV"}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="0")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sum [1.0, 1.0, 1.0]" in done.stdout, done.stdout


def coalesced_tensor_calls(rank, world):
    """torch 2.x's _coalescing_manager turns grouped all_gather_into_tensor and
    reduce_scatter_tensor calls into one allgather_into_tensor_coalesced or
    reduce_scatter_tensor_coalesced on the backend."""
    import torch.distributed as dist
    gathered = [torch.zeros(world * 2), torch.zeros(world * 3, dtype=torch.float64)]
    mine = [torch.full((2,), float(rank)), torch.arange(3, dtype=torch.float64) + 10 * rank]
    with dist._coalescing_manager():
        for output, item in zip(gathered, mine):
            dist.all_gather_into_tensor(output, item)
    scattered = [torch.zeros(2), torch.zeros(1, dtype=torch.int64)]
    whole = [torch.arange(world * 2, dtype=torch.float32) + rank,
             torch.full((world,), rank + 1, dtype=torch.int64)]
    with dist._coalescing_manager():
        for output, item in zip(scattered, whole):
            dist.reduce_scatter_tensor(output, item)
    return [t.numpy().copy() for t in gathered + scattered]


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                    reason="torch 1.13 has no coalesced tensor collectives on a backend")
@pytest.mark.parametrize("world", [2, 3])
def test_coalesced_tensor_collectives(world):
    results = multiproc.run_world(coalesced_tensor_calls, world, backend="plexus", init="torch")
    ranks = np.arange(world)
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got[0], np.repeat(ranks, 2))
        np.testing.assert_array_equal(got[1], np.concatenate([np.arange(3) + 10 * r
                                                               for r in ranks]))
        full = sum(np.arange(world * 2) + r for r in ranks)
        np.testing.assert_array_equal(got[2], full[rank * 2:rank * 2 + 2])
        np.testing.assert_array_equal(got[3], [sum(ranks + 1)])
