"""Hang diagnosis: the flight recorder's dumps (plexus.debug_dump, SIGUSR1, an operation's
timeout), tools/hang_report naming the rank that is behind, and its timeline of every rank."""
import glob
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import numpy as np

from multiproc import run_world

REPORT = os.path.join(os.getcwd(), "tools", "hang_report.py")
sys.path.insert(0, os.path.dirname(REPORT))
import flight_timeline  # noqa: E402


def _dump_dir(name="flight"):
    path = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), name)
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
    dump_dir = os.environ["PLEXUS_FLIGHT_RECORDER_DIR"]
    for peer in (0, 1):
        _wait_for(os.path.join(dump_dir, "plexus_flight_rank%d_pid*.json" % peer), 60)
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


def _falls_behind_on_a_store_server(rank, port, dump_dir):
    """rank_two_falls_behind with ranks that meet in a TCPStore server (which has a clock), so
    the dumps carry each rank's clock offset."""
    import datetime
    import plexus as dist
    os.environ["PLEXUS_FLIGHT_RECORDER_DIR"] = dump_dir
    store = dist.TCPStore("127.0.0.1", port, timeout=60)
    dist.init_process_group("tcp", store=store, rank=rank, world_size=3,
                            timeout=datetime.timedelta(seconds=3))
    return rank_two_falls_behind(rank, 3)


def test_timeline_puts_every_rank_on_one_clock_and_names_the_missing_rank():
    import plexus
    dump_dir = _dump_dir("timeline")
    server = plexus.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=60)
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.starmap_async(_falls_behind_on_a_store_server,
                                     [(rank, server.port, dump_dir) for rank in range(3)]
                                     ).get(timeout=120)
    assert results[:2] == ["timed out", "timed out"], results
    trace_path = os.path.join(dump_dir, "trace.json")
    picture = os.path.join(dump_dir, "trace.png")
    subprocess.run([sys.executable, REPORT, dump_dir, "--timeline", trace_path,
                    "--plot", picture], check=True, capture_output=True, text=True)
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert sorted(names) == [0, 1, 2], names
    assert all(names[r].startswith("rank %d (" % r) for r in names), names
    # Every rank's clock was measured against the store server, over loopback.
    for rank in ("0", "1", "2"):
        clock = trace["otherData"]["clocks"][rank]
        assert clock is not None and clock["reference"] == "store server on 127.0.0.1", clock
        assert 0 < clock["error_us"] < 50000 and abs(clock["offset_us"]) <= clock["error_us"] + 1000
    slices = [e for e in events if e.get("ph") == "X"]
    for rank in range(3):
        mine = sorted((e for e in slices if e["pid"] == rank), key=lambda e: e["ts"])
        sequences = [e["args"]["sequence"] for e in mine]
        assert sequences == ([0, 1, 2, 3] if rank != 2 else [0, 1, 2]), (rank, sequences)
        for before, after in zip(mine, mine[1:]):
            assert after["ts"] >= before["ts"] + before["dur"] - 1, (before, after)
        assert all(e["args"]["state"] == "completed" for e in mine[:3]), mine
    # The timed-out all_reduce names the rank that never issued it, on both ranks that waited.
    for rank in (0, 1):
        (stuck,) = [e for e in slices if e["pid"] == rank and e["args"]["sequence"] == 3]
        assert stuck["args"]["state"] == "failed" and stuck["args"]["missing"] == [2], stuck
        assert "missing rank 2" in stuck["name"] and "DEADLINE_EXCEEDED" in stuck["args"]["error"]
        assert stuck["dur"] >= 2.5e6, stuck  # It waited out its 3 s timeout.
    # An all_reduce ends at about the same moment everywhere: the clocks line up.
    for sequence in range(3):
        ends = [e["ts"] + e["dur"] for e in slices if e["args"]["sequence"] == sequence]
        assert len(ends) == 3 and max(ends) - min(ends) < 200000, (sequence, ends)
    timeouts = [e for e in events if e.get("ph") == "i" and e["name"] == "timeout"]
    assert sorted(e["pid"] for e in timeouts) == [0, 1], timeouts
    dumps = [e for e in events if e.get("ph") == "i" and e["name"] == "dump"]
    assert sorted(e["pid"] for e in dumps) == [0, 1, 2], dumps
    with open(picture, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _dump(rank, clock_offset_us, entries, dumped_us, events=()):
    return {"format": "plexus-flight-recorder-1", "pid": 100 + rank, "host": "host%d" % rank,
            "global_rank": rank, "dumped_unix_us": dumped_us, "reason": "test",
            "clock": {"offset_us": clock_offset_us, "error_us": 10, "reference": "test"},
            "events": [{"unix_us": t, "kind": k, "detail": d} for t, k, d in events],
            "groups": [{"name": "world", "rank": rank, "size": 2, "global_ranks": [0, 1],
                        "backend": "cpu:tcp", "entries": entries}]}


def _entry(sequence, issued, finished, state="completed", kind="collective", op="all_reduce"):
    return {"sequence": sequence, "kind": kind, "op": op, "dtype": "float32", "count": 4,
            "root": -1, "peer": 1 if kind == "p2p" else -1, "reduce_op": "SUM", "timeout_s": 60,
            "state": state, "issued_unix_us": issued, "finished_unix_us": finished, "error": ""}


def test_timeline_subtracts_each_clock_offset_and_derives_queueing():
    # Rank 1's clock runs 5 s ahead; both ran all_reduce #0 over the same true interval.
    # Rank 0 issued #1 and #2 at once, so #2 queued behind #1; rank 1 never issued #2.
    rank0 = _dump(0, 0, [_entry(0, 1000, 2000), _entry(1, 3000, 4000),
                         _entry(2, 3000, None, state="issued"),
                         _entry(0, 3500, 3600, kind="p2p", op="send")], 9000,
                  events=[(8000, "peer_lost", "tcp transport rank 0: lost rank 1")])
    rank1 = _dump(1, 5000000, [_entry(0, 5001500, 5002000), _entry(1, 5003000, 5004000)],
                  5006000)
    trace = flight_timeline.chrome_trace([rank0, rank1])
    slices = {(e["pid"], e["args"]["sequence"]): e for e in trace["traceEvents"]
              if e.get("ph") == "X"}
    assert slices[(0, 0)]["ts"] == 0 and slices[(0, 0)]["dur"] == 1000
    assert slices[(1, 0)]["ts"] == 500 and slices[(1, 0)]["ts"] + slices[(1, 0)]["dur"] == 1000
    # #2 started when #1 ended, ran to the dump, and names the rank that never issued it.
    assert slices[(0, 2)]["ts"] == 3000 and slices[(0, 2)]["dur"] == 5000
    assert slices[(0, 2)]["args"]["missing"] == [1] and slices[(0, 2)]["args"]["state"] == "issued"
    assert "missing" not in slices[(0, 1)]["args"]
    queued = [e for e in trace["traceEvents"] if e.get("cat") == "queued"]
    assert [(e["ph"], e["ts"]) for e in queued] == [("b", 2000), ("e", 3000)], queued
    sends = [e for e in trace["traceEvents"] if e.get("cat") == "p2p"]
    assert [(e["ph"], e["ts"]) for e in sends] == [("b", 2500), ("e", 2600)], sends
    assert sends[0]["name"] == "send #0 to 1"
    (lost,) = [e for e in trace["traceEvents"] if e.get("name") == "peer_lost"]
    assert lost["pid"] == 0 and lost["ts"] == 7000
    dumped = sorted((e["pid"], e["ts"]) for e in trace["traceEvents"] if e.get("name") == "dump")
    assert dumped == [(0, 8000), (1, 5000)]
