"""Per-call time of all_reduce at world size 1 on a CUDA tensor, from Python: torch.distributed
over NCCL ("torch-nccl"), torch.distributed over plexus ("torch-plexus", plexus.torch),
plexus's own API over its nccl backend ("plexus"), or plexus staged through host memory on its
tcp backend ("plexus-staged"). At one rank nothing moves, so this is what each layer costs per
call. --cpu: CPU tensors instead, torch.distributed over gloo ("torch-gloo"), plexus on "tcp"
(runs without a GPU).

    python3 per_call.py MODE [ITERS] [--host-wait] [--cpu]

Default ("stream"): ITERS calls back to back on the current stream, then one
torch.cuda.synchronize(), as nccl-tests and `bench --device=cuda` time. --host-wait: every
call waited for on the host (torch: torch.cuda.synchronize() after each; plexus:
wait(timeout=...), the host wait). Prints the best of 5 rounds per size."""
import datetime
import sys
import tempfile
import time

import torch


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    host_wait = "--host-wait" in sys.argv
    on_cpu = "--cpu" in sys.argv
    mode = args[0]
    iters = int(args[1]) if len(args) > 1 else 2000
    init = "file://" + tempfile.mktemp()
    if mode in ("torch-nccl", "torch-gloo"):
        import torch.distributed as dist
        dist.init_process_group(mode[len("torch-"):], init_method=init, rank=0, world_size=1)
    elif mode == "torch-plexus":
        import torch.distributed as dist
        import plexus.torch  # noqa: F401 - registers "plexus"
        dist.init_process_group("plexus", init_method=init, rank=0, world_size=1)
    elif mode in ("plexus", "plexus-staged"):
        import plexus as dist
        backend = "tcp" if on_cpu or mode == "plexus-staged" else "cpu:tcp,cuda:nccl"
        dist.init_process_group(backend, init_method=init, rank=0, world_size=1)
    else:
        sys.exit("per_call.py: MODE is torch-nccl, torch-gloo, torch-plexus, plexus or "
                 "plexus-staged, not %r" % mode)
    device = "cpu" if on_cpu else "cuda"
    drain = (lambda: None) if on_cpu else torch.cuda.synchronize
    limit = datetime.timedelta(seconds=10)

    def call(tensor):
        if not host_wait:
            dist.all_reduce(tensor)
        elif mode.startswith("plexus"):
            dist.all_reduce(tensor, async_op=True).wait(timeout=limit)
        else:
            dist.all_reduce(tensor)
            drain()

    for nbytes in (1024, 1 << 20):
        tensor = torch.ones(nbytes // 4, device=device)
        for _ in range(200):
            call(tensor)
        drain()
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(iters):
                call(tensor)
            drain()
            best = min(best, (time.perf_counter() - start) / iters * 1e6)
        assert tensor[0].item() == 1.0, "a one-rank SUM changed the tensor"
        print("%-12s %-9s world 1 all_reduce %8d B on %s: %6.2f us per call (best of 5 x %d)"
              % (mode, "host-wait" if host_wait else "stream", nbytes, device, best, iters))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
