"""A rank that all-reduces until told to stop or until a collective fails, for the network
fault tests. Usage: fault_loop_worker.py BACKEND STOP_FILE; WORKER_BYTES (default 65536) and
WORKER_TIMEOUT_S (default 10) set the tensor size and the group's timeout. Rendezvous is env://.

Each step's tensor holds rank + 1 + step in every element but the last, which carries whether
STOP_FILE exists (so every rank stops after the same step). Prints a JSON line per step
({"step", "t"}); on a wrong sum {"wrong"} and exit 2; on an error {"error": class, "message",
"started", "t", "destroyed"} (destroy_process_group's return time) and exit 3."""
import datetime
import json
import os
import sys
import time

import numpy as np

import plexus as dist


def main():
    backend, stop_file = sys.argv[1], sys.argv[2]
    elements = int(os.environ.get("WORKER_BYTES", "65536")) // 8
    timeout = datetime.timedelta(seconds=float(os.environ.get("WORKER_TIMEOUT_S", "10")))
    dist.init_process_group(backend, timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    print(json.dumps({"ready": rank, "t": time.time()}), flush=True)
    step = 0
    while True:
        x = np.full(elements, float(rank + 1 + step), np.float64)
        x[-1] = 1.0 if os.path.exists(stop_file) else 0.0
        started = time.time()
        try:
            dist.all_reduce(x)
        except dist.PlexusError as error:
            failed = time.time()
            dist.destroy_process_group()
            print(json.dumps({"error": type(error).__name__, "message": str(error)[:600],
                              "started": started, "t": failed, "destroyed": time.time(),
                              "step": step}), flush=True)
            return 3
        expected = world * (world + 1) / 2 + world * step
        if not np.all(x[:-1] == expected):
            print(json.dumps({"wrong": step, "got": float(x[0]), "expected": expected}),
                  flush=True)
            return 2
        print(json.dumps({"step": step, "t": time.time()}), flush=True)
        step += 1
        if x[-1] > 0:
            break
    dist.destroy_process_group()
    print(json.dumps({"done": step, "t": time.time()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
