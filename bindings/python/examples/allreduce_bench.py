"""float32 SUM all_reduce timed from Python: plexus (numpy arrays) on its tcp and gloo backends,
torch.distributed with gloo, and torch.distributed on plexus (plexus.torch). Local ranks meet
through a FileStore; each size runs `--iters` times after a warm-up, every result checked.

    /usr/bin/python3 bindings/python/examples/allreduce_bench.py --ranks=2 --sizes=1K,1M,16M

Prints per mode and size the median time per call (us) and bus bandwidth (GB/s, as
nccl-tests count it: 2 (n - 1) / n x bytes / time).
"""
import argparse
import datetime
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid

import numpy as np

MODES = ["plexus:tcp", "plexus:gloo", "torch:gloo", "torch:plexus"]
# Also available: "plexus-future:tcp" - async_op=True and get_future().result(), the path a
# completion callback takes (the operation runs on plexus's worker, not in the waiter).


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def rank_main(rank, ranks, mode, sizes, iters, store, results):
    api, backend = mode.split(":")
    if api.startswith("plexus"):
        import plexus as dist
        make = lambda n: np.full(n, rank + 1.0, np.float32)  # noqa: E731
        view = lambda t: t  # noqa: E731
    else:
        import torch
        import torch.distributed as dist
        if backend == "plexus":
            import plexus.torch  # noqa: F401
        make = lambda n: torch.full((n,), rank + 1.0)  # noqa: E731
        view = lambda t: t.numpy()  # noqa: E731
    dist.init_process_group(backend, init_method="file://" + store, rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=120))
    expected = ranks * (ranks + 1) / 2
    rows = []
    for size in sizes:
        tensor = make(size // 4)
        samples = []
        for i in range(iters + max(2, iters // 10)):
            view(tensor)[:] = rank + 1.0
            dist.barrier()
            start = time.perf_counter()
            if api == "plexus-future":
                dist.all_reduce(tensor, async_op=True).get_future().result()
            else:
                dist.all_reduce(tensor)
            elapsed = time.perf_counter() - start
            if i >= max(2, iters // 10):
                samples.append(elapsed)
        wrong = int(np.count_nonzero(view(tensor) != expected))
        rows.append((size, statistics.median(samples), wrong))
    dist.destroy_process_group()
    if rank == 0:
        results.put(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--sizes", default="1K,64K,1M,16M")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    context = multiprocessing.get_context("spawn")
    directory = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    print("%-17s %10s %12s %10s %6s" % ("mode", "bytes", "time_us", "busbw", "wrong"))
    for mode in args.modes.split(","):
        store = os.path.join(directory, "bench-store-" + uuid.uuid4().hex)
        results = context.Queue()
        processes = [context.Process(target=rank_main, args=(r, args.ranks, mode, sizes,
                                                             args.iters, store, results))
                     for r in range(args.ranks)]
        for process in processes:
            process.start()
        rows = results.get(timeout=600)
        for process in processes:
            process.join(60)
            if process.exitcode != 0:
                sys.exit("%s: a rank exited with %s" % (mode, process.exitcode))
        for size, seconds, wrong in rows:
            busbw = 2.0 * (args.ranks - 1) / args.ranks * size / seconds / 1e9
            print("%-17s %10d %12.1f %10.3f %6d" % (mode, size, seconds * 1e6, busbw, wrong))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
