"""DistributedDataParallel that survives a dead rank, on the "plexus" torch backend.

Four ranks train a small regression model with DDP. At step 8 one of them is SIGKILLed, as
the OOM killer or a failing node would end it. The survivors see the failed backward, shrink the group
to themselves (plexus.torch.shrink_group: no new rendezvous, no restart), rebuild DDP on the
new group and keep training; every rank prints its loss.

    python3 ddp_shrink_recovery.py            # 4 ranks on this machine, rank 3 dies
    python3 ddp_shrink_recovery.py --ranks 6 --victim 2 --steps 30
"""
import argparse
import os
import signal
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import plexus.torch

FEATURES = 16


def batch(step, rank):
    generator = torch.Generator().manual_seed(step * 100 + rank)
    x = torch.randn(64, FEATURES, generator=generator)
    return x, (x.sum(dim=1, keepdim=True) / 4).tanh()


def train(rank, world, store_path, victim, steps, die_at):
    dist.init_process_group("plexus", init_method="file://" + store_path, rank=rank,
                            world_size=world)
    torch.manual_seed(0)  # Every rank starts from the same model, as DDP requires.
    module = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(),
                                 torch.nn.Linear(32, 1))
    group = None  # torch's default group at first.
    model = DDP(module)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    step = 0
    while step < steps:
        if rank == victim and step == die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch(step, rank)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        try:
            loss.backward()  # DDP all-reduces the gradients here.
        except RuntimeError as error:
            print("rank %d: step %d failed (%s); shrinking" % (rank, step,
                  str(error).splitlines()[0][:100]), flush=True)
            group = plexus.torch.shrink_group(group=group)
            # A new DDP on the survivors' group; it re-broadcasts rank 0's parameters.
            model = DDP(module, process_group=group)
            continue  # Redo this step on the new group.
        optimizer.step()
        size = group.size() if group is not None else world
        print("rank %d: step %d loss %.4f world %d" % (rank, step, loss.item(), size), flush=True)
        step += 1
    print("rank %d: done" % rank, flush=True)
    os._exit(0)  # The old default group is aborted; skip destroying it.


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--victim", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--die-at", type=int, default=8)
    args = parser.parse_args()
    store = os.path.join(tempfile.mkdtemp(prefix="ddp-shrink-"), "store")
    context = mp.get_context("spawn")
    ranks = [context.Process(target=train, args=(rank, args.ranks, store, args.victim, args.steps,
                                                 args.die_at)) for rank in range(args.ranks)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join()
    survivors = [p.exitcode for r, p in enumerate(ranks) if r != args.victim]
    print("survivors exited with %s" % survivors, flush=True)
    raise SystemExit(0 if all(code == 0 for code in survivors) else 1)


if __name__ == "__main__":
    main()
