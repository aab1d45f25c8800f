"""plexus with torch CUDA tensors on a real GPU; every test skips without one (CI). NCCL at one
rank per GPU (NCCL refuses two ranks on one GPU), staging through tcp with ranks sharing a GPU,
torch's stream semantics, and DDP on the GPU with backend="plexus"."""
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
