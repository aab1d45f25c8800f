"""Hang diagnosis: the flight recorder's dumps (plexus.debug_dump, SIGUSR1, an operation's
timeout) and tools/hang_report naming the rank that is behind."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from multiproc import run_world

REPORT = os.path.join(os.getcwd(), "tools", "hang_report.py")


def _dump_dir():
    path = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "flight")
    os.makedirs(path, exist_ok=True)
    return path


def _use_dump_dir(rank, world):
    os.environ["PLEXUS_FLIGHT_RECORDER_DIR"] = _dump_dir()


def _wait_for(pattern, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = glob.glob(pattern)
        if found:
            return found
        time.sleep(0.05)  # Polling a file another process writes; bounded by the deadline.
    raise AssertionError("no file matching %s within %ss" % (pattern, seconds))


def records_operations(rank, world, path):
    import plexus as dist
    dist.all_reduce(np.ones(8, np.float32))
    dist.broadcast(np.zeros(3, np.int64), src=0)
    if rank == 0:
        dist.send(np.ones(2, np.float64), dst=1)
    elif rank == 1:
        dist.recv(np.zeros(2, np.float64), src=0)
    written = dist.debug_dump(os.path.join(path, "rank%d.json" % rank))
    with open(written) as f:
        return json.load(f)


def test_debug_dump_lists_each_operation_with_its_state(tmp_path):
    dumps = run_world(records_operations, 2, str(tmp_path))
    for rank, dump in enumerate(dumps):
        assert dump["format"] == "plexus-flight-recorder-1"
        assert dump["global_rank"] == rank and dump["reason"] == "debug_dump"
        (world,) = [g for g in dump["groups"] if g["name"] == "world"]
        assert world["rank"] == rank and world["size"] == 2
        ops = [(e["kind"], e["sequence"], e["op"], e["dtype"], e["count"], e["state"])
               for e in world["entries"]]
        assert ("collective", 0, "all_reduce", "float32", 8, "completed") in ops, ops
        assert ("collective", 1, "broadcast", "int64", 3, "completed") in ops, ops
        p2p = ("p2p", 0, "send" if rank == 0 else "recv", "float64", 2, "completed")
        assert p2p in ops, ops
        entry = [e for e in world["entries"] if e["op"] == "all_reduce"][0]
        assert entry["reduce_op"] == "SUM"
        assert entry["finished_unix_us"] >= entry["issued_unix_us"] > 0


def rank_two_falls_behind(rank, world):
    import plexus as dist
    for _ in range(3):
        dist.all_reduce(np.ones(4, np.float32))
    if rank != 2:
        try:
            dist.all_reduce(np.ones(4, np.float32))  # Rank 2 never joins: times out.
        except dist.DeadlineExceededError:
            return "timed out"
        return "completed?"
    # Stays alive (a rank that left would fail the others with Unavailable instead) until
    # the others' timeouts have dumped, then dumps itself as SIGUSR1 would make it.
    for peer in (0, 1):
        _wait_for(os.path.join(_dump_dir(), "plexus_flight_rank%d_pid*.json" % peer), 60)
    return dist.debug_dump()


def test_timeouts_dump_and_the_report_names_the_rank_behind():
    results = run_world(rank_two_falls_behind, 3, op_timeout=3, before_init=_use_dump_dir,
                        destroy=False)
    assert results[:2] == ["timed out", "timed out"], results
    report = subprocess.run([sys.executable, REPORT, "--json", _dump_dir()], check=True,
                            capture_output=True, text=True)
    findings = json.loads(report.stdout)
    behind = [f for f in findings if f["kind"] == "behind"]
    assert len(behind) == 1, findings
    assert behind[0]["rank"] == 2 and behind[0]["op"] == "all_reduce", behind
    assert behind[0]["sequence"] == 3 and behind[0]["waiting"] == [0, 1], behind
    text = subprocess.run([sys.executable, REPORT, _dump_dir()], check=True,
                          capture_output=True, text=True).stdout
    assert "rank 2 (global 2) is behind: it has not issued all_reduce #3" in text, text


def dumps_on_sigusr1(rank, world):
    import plexus as dist
    dist.all_reduce(np.ones(4, np.float32))
    os.kill(os.getpid(), signal.SIGUSR1)
    path = os.path.join(_dump_dir(), "plexus_flight_rank0_pid%d.json" % os.getpid())
    (found,) = _wait_for(path, 30)
    with open(found) as f:
        return json.load(f)


def test_sigusr1_dumps_without_stopping_the_process():
    (dump,) = run_world(dumps_on_sigusr1, 1, before_init=_use_dump_dir)
    assert dump["reason"] == "SIGUSR1"
    (world,) = dump["groups"]
    assert [e["op"] for e in world["entries"]] == ["all_reduce"]
    assert world["entries"][0]["state"] == "completed"
