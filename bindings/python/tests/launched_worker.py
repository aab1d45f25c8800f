"""A rank as a launcher starts it: init_process_group(backend) with nothing but the
environment the launcher (or a test standing in for one) set, every collective check of
test_collectives, then a large all_reduce. Prints one "RESULT {json}" line; exits 1 on any
wrong answer. Usage: launched_worker.py BACKEND [BYTES]; WORKER_INIT_METHOD and
WORKER_TIMEOUT_S (default 60) set the init method and the group's timeout, WORKER_REPEAT
(default 1) how many large all_reduces are timed (after one warm-up when more than one)."""
import datetime
import json
import os
import sys
import time

import numpy as np

import plexus as dist
import test_collectives


def print_result(result):
    """The RESULT line in one write: the ranks share the launcher's stdout, and a line written
    in two pieces (unbuffered print writes the text, then the newline) can take another rank's
    line between them. A pipe keeps a write of up to 4 KiB whole."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), ("RESULT " + json.dumps(result) + "\n").encode())


def main():
    backend = sys.argv[1]
    nbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 16 << 20
    timeout = datetime.timedelta(seconds=float(os.environ.get("WORKER_TIMEOUT_S", "60")))
    dist.init_process_group(backend, init_method=os.environ.get("WORKER_INIT_METHOD"),
                            timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    failures = test_collectives.check_all(rank, world, "numpy")
    repeat = int(os.environ.get("WORKER_REPEAT", "1"))
    seconds = 0.0
    for i in range(repeat + (1 if repeat > 1 else 0)):  # With repeats, one warm-up first.
        big = np.full(nbytes // 4, rank + 1, np.float32)
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(big)
        if repeat == 1 or i > 0:
            seconds += (time.perf_counter() - start) / repeat
        if not np.all(big == world * (world + 1) / 2):
            failures.append("all_reduce of %d bytes: wrong values" % nbytes)
            break
    busbw = 2 * (world - 1) / world * nbytes / seconds / 1e9 if world > 1 else 0.0
    print_result({"rank": rank, "world": world, "backend": backend, "failures": failures,
                  "busbw_gbps": busbw, "launcher_rank": os.environ.get("RANK"),
                  "agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE")})
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
