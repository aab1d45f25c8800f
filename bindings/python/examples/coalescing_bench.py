"""Many small all_reduces from torch, one by one and inside torch's _coalescing_manager, on
"plexus" and on "gloo" (torch 2.x). Each rank is a process; every result is checked.

    python3 coalescing_bench.py --ranks 2 4 --ops 64 --numel 256 --iters 50

Prints, per backend, world size and mode, the median time of one batch of --ops all_reduces
over --iters batches (after a warm-up), and that time per all_reduce. On plexus the coalesced
batch is one plexus collective (allreduce_coalesced: the tensors reduced as one buffer); gloo
runs its own allreduce_coalesced."""
import argparse
import datetime
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def batch(tensors, coalesced):
    if coalesced:
        with dist._coalescing_manager():
            for tensor in tensors:
                dist.all_reduce(tensor)
    else:
        for tensor in tensors:
            dist.all_reduce(tensor)


def rank_main(rank, world, backend, store_path, args, results):
    if backend == "plexus":
        import plexus.torch  # noqa: F401 - torch 2.5+ finds it installed; this works on all.
    dist.init_process_group(backend, init_method="file://" + store_path, rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    tensors = [torch.zeros(args.numel) for _ in range(args.ops)]
    timings = {}
    for mode in ("one by one", "coalesced"):
        samples = []
        for step in range(args.warmup + args.iters):
            for i, tensor in enumerate(tensors):
                tensor.fill_(float(rank + i))
            dist.barrier()
            started = time.perf_counter()
            batch(tensors, mode == "coalesced")
            elapsed = time.perf_counter() - started
            expected = [float(sum(range(world)) + world * i) for i in range(args.ops)]
            if [float(t[0]) for t in tensors] != expected or \
                    any(float(t[-1]) != e for t, e in zip(tensors, expected)):
                raise AssertionError("%s %s: wrong sums at step %d" % (backend, mode, step))
            if step >= args.warmup:
                samples.append(elapsed)
        timings[mode] = statistics.median(samples)
    dist.destroy_process_group()
    if rank == 0:
        results.put(timings)


def measure(backend, world, args):
    context = mp.get_context("spawn")
    results = context.Queue()
    store_path = os.path.join(tempfile.mkdtemp(prefix="coalescing_bench"), "store")
    processes = [context.Process(target=rank_main,
                                 args=(rank, world, backend, store_path, args, results))
                 for rank in range(world)]
    for process in processes:
        process.start()
    try:
        timings = results.get(timeout=600)
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    if any(process.exitcode != 0 for process in processes):
        raise SystemExit("%s on %d ranks: a rank failed (exit codes %s)"
                         % (backend, world, [p.exitcode for p in processes]))
    return timings


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--backends", nargs="+", default=["plexus", "gloo"])
    parser.add_argument("--ops", type=int, default=64, help="all_reduces per batch")
    parser.add_argument("--numel", type=int, default=256, help="float32 elements in each")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if not hasattr(dist, "_coalescing_manager") or torch.__version__.startswith("1."):
        raise SystemExit("coalescing_bench: torch %s has no _coalescing_manager of torch 2.x's "
                         "form" % torch.__version__)
    print("%d all_reduces of %d float32 a batch, median of %d batches (torch %s)"
          % (args.ops, args.numel, args.iters, torch.__version__))
    print("| backend | ranks | one by one (us/batch) | coalesced (us/batch) | per op, one by one "
          "| per op, coalesced |")
    print("|---|---|---|---|---|---|")
    for world in args.ranks:
        for backend in args.backends:
            timings = measure(backend, world, args)
            single, fused = timings["one by one"] * 1e6, timings["coalesced"] * 1e6
            print("| %s | %d | %.0f | %.0f | %.1f | %.1f |"
                  % (backend, world, single, fused, single / args.ops, fused / args.ops),
                  flush=True)


if __name__ == "__main__":
    main()
