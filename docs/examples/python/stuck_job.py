"""A training job that gets stuck, and the timeline that shows why.

Four ranks run steps of all_reduce (gradients) and broadcast (a learning rate). At step 5
rank 2 stalls in its data loader for longer than the collective timeout; the others wait in
the all_reduce, time out and dump their flight recorders; rank 2 dumps when it wakes. Then
hang_report merges the dumps into a Chrome trace and a picture:

    python3 docs/examples/python/stuck_job.py OUT_DIR    # plexus importable, run from the repo

The ranks meet in a TCPStore server this script hosts on a free port, so every rank's clock is
measured against it.
"""
import datetime
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np

TIMEOUT_S = 3


def rank_main(rank, port, out_dir):
    import plexus as dist
    os.environ["PLEXUS_FLIGHT_RECORDER_DIR"] = out_dir
    store = dist.TCPStore("127.0.0.1", port, timeout=60)
    dist.init_process_group("tcp", store=store, rank=rank, world_size=4,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    gradients = np.ones(256 * 1024, np.float32)
    learning_rate = np.zeros(1, np.float64)
    for step in range(8):
        time.sleep(0.05 * (1 + rank % 2))  # The forward and backward pass.
        if rank == 2 and step == 5:
            time.sleep(TIMEOUT_S + 1)  # A data loader that hangs.
            return dist.debug_dump()
        try:
            dist.all_reduce(gradients)
            if step % 2 == 0:
                dist.broadcast(learning_rate, src=0)
        except dist.DeadlineExceededError as error:
            return "step %d: %s" % (step, str(error).splitlines()[0])
    return "finished"


def main():
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "stuck_job")
    os.makedirs(out_dir, exist_ok=True)
    import plexus
    server = plexus.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=60)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(rank_main, [(rank, server.port, out_dir) for rank in range(4)])
    for rank, result in enumerate(results):
        print("rank %d: %s" % (rank, result))
    report = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools",
                          "hang_report.py")
    subprocess.run([sys.executable, report, out_dir,
                    "--timeline", os.path.join(out_dir, "timeline.json"),
                    "--plot", os.path.join(out_dir, "timeline.png")], check=True)


if __name__ == "__main__":
    main()
