"""One rank of tools/netns/scaling.py: joins the group from the launcher's environment (tcp
backend), times all_reduce per size (median of --iters after a warm-up, each after a barrier),
checks every result, and rank 0 prints one "RESULT {json}" line with the medians in seconds."""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import plexus as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", required=True)  # Bytes, comma-separated.
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    dist.init_process_group("tcp")
    rank, world = dist.get_rank(), dist.get_world_size()
    want = world * (world + 1) / 2
    medians = {}
    for nbytes in (int(s) for s in args.sizes.split(",")):
        data = np.empty(nbytes // 4, np.float32)
        times = []
        for i in range(args.iters + 1):
            data.fill(rank + 1)
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(data)
            if i > 0:
                times.append(time.perf_counter() - start)
            if not np.all(data == want):
                print("rank %d: all_reduce of %d bytes gave wrong values" % (rank, nbytes))
                return 1
        medians[nbytes] = statistics.median(times)
    if rank == 0:
        print("RESULT " + json.dumps({"world": world, "medians": medians}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
