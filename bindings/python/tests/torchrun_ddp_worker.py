"""A rank started by torchrun: torch.distributed on BACKEND (argv[1]) with env:// as torchrun
sets it, DDP trains a small model 3 steps, and the rank prints "RESULT {json}" with its losses
and parameters (test_torch_stacks.py compares plexus's with gloo's)."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import plexus.torch  # noqa: F401 - registers "plexus"; mends torch's store on a torch without libuv


def main():
    dist.init_process_group(sys.argv[1])
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = model(torch.randn(4, 6, generator=generator)).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    result = {"rank": rank, "world": dist.get_world_size(), "backend": dist.get_backend(),
              "local_rank": int(os.environ["LOCAL_RANK"]), "losses": losses,
              "parameters": {k: v.tolist() for k, v in model.module.state_dict().items()}}
    dist.destroy_process_group()
    # One write, as launched_worker.print_result: the two ranks share torchrun's stdout.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), ("RESULT " + json.dumps(result) + "\n").encode())


if __name__ == "__main__":
    main()
