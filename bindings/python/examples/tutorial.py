"""torch.distributed tutorial-style programs, written against `dist`: they run unchanged with
`import torch.distributed as dist` or, as here, `import plexus as dist`.

    /usr/bin/python3 bindings/python/examples/tutorial.py      # 4 local ranks, every example

Each example takes (rank, size) after init_process_group and returns what it computed.
"""
import datetime
import multiprocessing
import os
import sys
import tempfile

import torch

import plexus as dist


def point_to_point(rank, size):
    """Rank 0 sends a tensor to rank 1 with the blocking calls."""
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        dist.send(tensor=tensor, dst=1)
    elif rank == 1:
        dist.recv(tensor=tensor, src=0)
    return tensor.tolist()


def point_to_point_async(rank, size):
    """The same with isend/irecv and an explicit wait."""
    tensor = torch.zeros(1)
    request = None
    if rank == 0:
        tensor += 1
        request = dist.isend(tensor=tensor, dst=1)
    elif rank == 1:
        request = dist.irecv(tensor=tensor, src=0)
    if request is not None:
        request.wait()
    return tensor.tolist()


def group_all_reduce(rank, size):
    """all_reduce within new_group([0, 1]); the other ranks keep their tensor."""
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    if rank in (0, 1):
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor.tolist()


def ring_all_reduce(send, recv):
    """A ring all-reduce from isend and recv: size - 1 steps, each passing a buffer right."""
    rank, size = dist.get_rank(), dist.get_world_size()
    left, right = (rank - 1) % size, (rank + 1) % size
    outgoing, incoming, total = send.clone(), send.clone(), send.clone()
    for _ in range(size - 1):
        request = dist.isend(outgoing, right)
        dist.recv(incoming, left)
        total += incoming
        request.wait()
        outgoing, incoming = incoming, outgoing
    recv[:] = total


def ring(rank, size):
    result = torch.zeros(3)
    ring_all_reduce(torch.arange(3, dtype=torch.float32) * (rank + 1), result)
    return result.tolist()


def average_gradients(model):
    """Data parallelism by hand: average every gradient over the ranks."""
    size = float(dist.get_world_size())
    for parameter in model.parameters():
        dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
        parameter.grad /= size


def train_by_hand(rank, size):
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(8, 4, generator=torch.Generator().manual_seed(rank))
    for _ in range(5):
        optimizer.zero_grad()
        loss = model(inputs).pow(2).mean()
        loss.backward()
        average_gradients(model)
        optimizer.step()
    return [p.detach().flatten().tolist() for p in model.parameters()]


def collectives(rank, size):
    """scatter, gather and broadcast in one go."""
    piece = torch.zeros(2)
    dist.scatter(piece, [torch.full((2,), float(r)) for r in range(size)] if rank == 0 else None,
                 src=0)
    gathered = [torch.zeros(2) for _ in range(size)] if rank == 0 else None
    dist.gather(piece * 10, gathered, dst=0)
    total = torch.zeros(size * 2)
    if rank == 0:
        total = torch.cat(gathered)
    dist.broadcast(total, src=0)
    return total.tolist()


EXAMPLES = [point_to_point, point_to_point_async, group_all_reduce, ring, train_by_hand,
            collectives]


def _run_rank(rank, size, init_file, backend):
    dist.init_process_group(backend, init_method="file://" + init_file, rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=60))
    for example in EXAMPLES:
        print("rank %d %s: %s" % (rank, example.__name__, example(rank, size)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = 4
    backend = sys.argv[1] if len(sys.argv) > 1 else "tcp"
    init_file = os.path.join(os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp(), "tutorial-store")
    processes = [multiprocessing.get_context("spawn").Process(
        target=_run_rank, args=(rank, size, init_file, backend)) for rank in range(size)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    sys.exit(max(abs(process.exitcode or 0) for process in processes))
