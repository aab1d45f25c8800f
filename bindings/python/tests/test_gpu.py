"""plexus with torch CUDA tensors on a real GPU; every test skips without one (CI). NCCL at one
rank per GPU (NCCL refuses two ranks on one GPU), staging through tcp with ranks sharing a GPU,
torch's stream semantics, and through the C++ torch backend (torch.distributed with
backend="plexus"): stream order, DDP, FSDP and torch's reconfigure regime on the GPU, through
torch's API (torch 2.14 and later) and through plexus's own (any torch)."""
import pytest
import torch

from multiproc import run_world

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device (torch.cuda.is_available() is False)")


def _device(rank):
    return torch.device("cuda", rank % torch.cuda.device_count())


def _collectives(rank, world):
    import plexus as dist
    device = _device(rank)
    total = world * (world + 1) / 2
    t = torch.full((1 << 20,), float(rank + 1), device=device)
    dist.all_reduce(t)
    assert torch.all(t == total), t[:4]
    out = [torch.zeros(5, device=device) for _ in range(world)]
    dist.all_gather(out, torch.full((5,), float(rank), device=device))
    assert [o[0].item() for o in out] == [float(r) for r in range(world)]
    b = torch.full((7,), float(rank), device=device, dtype=torch.bfloat16)
    dist.broadcast(b, src=world - 1)
    assert torch.all(b == world - 1)
    # Ordered after the side stream's work, and later work on it sees the result, without a
    # host wait in between.
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        x = torch.ones(1 << 22, device=device) * (rank + 1)
        dist.all_reduce(x, async_op=True).wait()
        y = x * 2
    torch.cuda.synchronize(device)
    assert y[0].item() == 2 * total and y[-1].item() == 2 * total
    return True


@pytest.mark.parametrize("backend,world", [
    ("cpu:tcp,cuda:nccl", 1),
    ("cpu:tcp,cuda:nccl", max(1, torch.cuda.device_count() if torch.cuda.is_available() else 1)),
    ("tcp", 2),
])
def test_collectives_on_gpu(backend, world):
    assert run_world(_collectives, world, backend=backend) == [True] * world


def _ddp(rank, world):
    import torch.distributed as torch_dist
    from torch.nn.parallel import DistributedDataParallel
    device = _device(rank)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(16, 4).to(device), device_ids=[device])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(rank + 1)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(8, 16, device=device)).square().sum().backward()
        optimizer.step()
    assert torch_dist.get_backend() == "plexus"
    # Plain lists: a torch tensor crosses the result queue as a file descriptor that the
    # child, once it has exited, can no longer hand over.
    return [p.detach().cpu().tolist() for p in model.parameters()]


def test_ddp_on_gpu():
    world = max(1, torch.cuda.device_count())
    results = run_world(_ddp, world, init="torch", backend="plexus")
    for params in results[1:]:
        for a, b in zip(results[0], params):
            assert torch.allclose(torch.tensor(a), torch.tensor(b))


def _torch_stream_order(rank, world):
    """torch.distributed on plexus under `torch.cuda.stream(side)`: the collective runs after
    the side stream's pending work (a kernel that holds it ~0.1 s, then the fill) and later
    work on the side stream sees the result, with no host wait in between."""
    import torch.distributed as torch_dist
    device = _device(rank)
    torch.cuda.set_device(device)
    total = world * (world + 1) / 2
    side = torch.cuda.Stream(device)  # From torch's pool: it does not sync with the legacy one.
    x = torch.zeros(1 << 22, device=device)
    torch.cuda.synchronize(device)
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        x.fill_(rank + 1)
        work = torch_dist.all_reduce(x, async_op=True)
        work.wait()
        y = x * 2
    torch.cuda.synchronize(device)
    return (y[0].item(), y[-1].item()) == (2 * total, 2 * total)


@pytest.mark.parametrize("torch_backend,world", [("cpu:tcp,cuda:nccl", 1), ("tcp", 2)])
def test_torch_backend_orders_after_the_current_stream(monkeypatch, torch_backend, world):
    monkeypatch.setenv("PLEXUS_TORCH_BACKEND", torch_backend)
    assert run_world(_torch_stream_order, world, init="torch", backend="plexus") == [True] * world


def _fsdp_steps(rank, world):
    """Five SGD steps of an FSDP-wrapped model on this rank's batches; returns the full
    parameters. The batches are drawn on the CPU, as the reference draws them (CUDA's
    generator gives other numbers for the same seed)."""
    from torch.distributed.fsdp import FullyShardedDataParallel, FullStateDictConfig, StateDictType
    device = _device(rank)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = FullyShardedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device),
        device_id=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        torch.manual_seed(100 * step + rank)
        optimizer.zero_grad()
        model(torch.randn(8, 16).to(device)).square().mean().backward()
        optimizer.step()
    with FullyShardedDataParallel.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                                  FullStateDictConfig(rank0_only=False)):
        return {k: v.cpu().tolist() for k, v in model.state_dict().items()}


def _fsdp_reference(world):
    """The same steps in one process: the gradient is the mean of every rank's gradient."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        optimizer.zero_grad()
        for rank in range(world):
            torch.manual_seed(100 * step + rank)
            (model(torch.randn(8, 16)).square().mean() / world).backward()
        optimizer.step()
    return {k: v.tolist() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("torch_backend,world", [("cpu:tcp,cuda:nccl", 1), ("tcp", 2)])
def test_fsdp_on_gpu_trains_as_one_process(monkeypatch, torch_backend, world):
    monkeypatch.setenv("PLEXUS_TORCH_BACKEND", torch_backend)
    results = run_world(_fsdp_steps, world, init="torch", backend="plexus")
    reference = _fsdp_reference(world)
    for state in results:
        assert sorted(state) == sorted(reference)
        for key, value in reference.items():
            assert torch.allclose(torch.tensor(state[key]), torch.tensor(value), atol=1e-4, rtol=1e-4), key


def test_elastic_with_cuda_tensors_on_gpu():
    """plexus.elastic with torch CUDA tensors (staged through pinned host memory): two peers
    in this process share the GPU; a side stream's pending work is read, shared state lands."""
    import threading
    from plexus.elastic import (Attribute, Communicator, MasterNode, ReduceOp, SharedState,
                                TensorInfo)
    master = MasterNode("127.0.0.1:0")
    master.run()
    address = "127.0.0.1:%d" % master.port
    comms = [Communicator(address, operation_timeout=60) for _ in range(2)]
    comms[0].connect()
    joiner = threading.Thread(target=comms[1].connect)
    joiner.start()
    while comms[0].get_attribute(Attribute.GLOBAL_WORLD_SIZE) < 2:
        comms[0].update_topology()
    joiner.join()
    results = [None, None]

    def peer(i):
        device = torch.device("cuda", 0)
        side = torch.cuda.Stream(device)
        with torch.cuda.stream(side):
            x = torch.ones(1 << 20, device=device) * (i + 1)  # Queued on the side stream.
            comms[i].all_reduce(x, x, op=ReduceOp.SUM, tag=0)
        weights = torch.full((1000,), 7.0 if i == 0 else 0.0, device=device)
        state = SharedState([TensorInfo.from_torch(weights, "w")])
        state.revision = 3 if i == 0 else 0
        comms[i].sync_shared_state(state)
        torch.cuda.synchronize(device)
        results[i] = (x[0].item(), x[-1].item(), weights.sum().item(), state.revision)

    threads = [threading.Thread(target=peer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    master.interrupt()
    master.await_termination(10)
    assert results == [(3.0, 3.0, 7000.0, 3)] * 2, results


def _reconfigure_on_the_gpu(rank, world, api, path):
    """The reconfigure regime on cuda:nccl through `api` ("torch": torch.distributed, whose c10d
    reconfigure needs torch 2.14; "plexus": plexus's own API, any torch): a configuration of
    every rank, an all_reduce on the GPU, a revoke (abort), then a configuration without the
    last rank (a new NCCL communicator; with one GPU the same rank again) and another
    all_reduce. Returns the sums."""
    if api == "torch":
        import torch.distributed as dist
        store = dist.distributed_c10d._get_default_store()
    else:
        import plexus as dist
        store = dist.FileStore(path, -1)
    device = _device(rank)
    torch.cuda.set_device(device)
    store.set("handle/%d" % rank, dist._get_reconfigure_handle())
    handles = [store.get("handle/%d" % r).decode() for r in range(world)]
    dist._reconfigure(1, handles).wait()
    x = torch.full((1 << 20,), float(rank + 1), device=device)
    dist.all_reduce(x)
    sums = [x[0].item()]
    if api == "torch":
        dist.group.WORLD._get_backend(device).abort()
    else:
        dist.abort_process_group()
    members = handles[:-1] if world > 1 else handles
    if rank >= len(members):
        return sums
    dist._reconfigure(2, members).wait()
    x = torch.full((1 << 20,), float(rank + 1), device=device)
    dist.all_reduce(x)
    torch.cuda.synchronize(device)
    return sums + [x[0].item(), x[-1].item(), dist.get_world_size()]


def _check_reconfigured_sums(results, world):
    first = world * (world + 1) / 2
    survivors = max(1, world - 1)
    second = survivors * (survivors + 1) / 2
    expected = [[first, second, second, survivors]] * survivors + [[first]] * (world - survivors)
    assert results == expected


@pytest.mark.skipif(not hasattr(torch.distributed, "_reconfigure"),
                    reason="this torch has no reconfigure API (c10d's, torch 2.14 and later)")
def test_reconfigure_on_cuda_nccl(monkeypatch):
    monkeypatch.setenv("PLEXUS_TORCH_BACKEND", "cpu:tcp,cuda:nccl")
    world = max(1, torch.cuda.device_count())
    _check_reconfigured_sums(
        run_world(_reconfigure_on_the_gpu, world, "torch", None, init="torch", backend="plexus",
                  init_options={"enable_reconfigure": True}), world)


def test_reconfigure_on_cuda_nccl_through_plexus(tmp_path):
    world = max(1, torch.cuda.device_count())
    _check_reconfigured_sums(
        run_world(_reconfigure_on_the_gpu, world, "plexus", str(tmp_path / "handles"),
                  backend="cpu:tcp,cuda:nccl", destroy=False,
                  init_options={"enable_reconfigure": True}), world)
