"""Network faults between two hosts (network namespaces joined by a veth pair, two ranks on
each), for tcp and gloo process groups, while the ranks all-reduce in a loop
(fault_loop_worker.py): a 3-second link flap, a long outage, a one-way drop (a blackhole route
on one side) and a link capped at 1 Mbit/s. Every case checks every step's sum, that no rank
waits past its deadline, and the error each rank gets. Skipped, with the reason, where
namespaces cannot be made (needs root)."""
import json
import os
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "fault_loop_worker.py")
sys.path.insert(0, HERE)
from test_launchers import clean_env  # noqa: E402
from test_multihost import REASON, _ip, hosts  # noqa: E402

pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

ADDRESS_A, ADDRESS_B = "10.73.0.1", "10.73.0.2"
PLACEMENT = ["a", "a", "b", "b"]
TIMEOUT_S = 15     # The group's operation timeout.
HEARTBEAT_S = 5    # PLEXUS_HEARTBEAT's default.
SLACK_S = 5        # Scheduling on a busy 2-core machine.


class Job:
    """Four looping ranks, their output lines parsed as they come."""

    def __init__(self, h, backend, tmp_path, nbytes=65536):
        self.stop_file = str(tmp_path / ("stop-" + backend))
        port = h.free_port("a")
        self.lines = [[] for _ in PLACEMENT]
        self.procs = []
        self.readers = []
        for rank, host in enumerate(PLACEMENT):
            env = clean_env(MASTER_ADDR=ADDRESS_A, MASTER_PORT=port, RANK=str(rank),
                            WORLD_SIZE=str(len(PLACEMENT)), WORKER_BYTES=str(nbytes),
                            WORKER_TIMEOUT_S=str(TIMEOUT_S))
            env.pop("PLEXUS_HEARTBEAT", None)
            proc = subprocess.Popen(["ip", "netns", "exec", h.ns(host), sys.executable, WORKER,
                                     backend, self.stop_file], env=env, cwd=HERE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.procs.append(proc)
            reader = threading.Thread(target=self._read, args=(proc, self.lines[rank]),
                                      daemon=True)
            reader.start()
            self.readers.append(reader)

    @staticmethod
    def _read(proc, lines):
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))

    def records(self, rank, key):
        out = []
        for line in list(self.lines[rank]):
            if line.startswith("{"):
                record = json.loads(line)
                if key in record:
                    out.append(record)
        return out

    def output(self):
        return "\n".join("rank %d: %s" % (r, l) for r, lines in enumerate(self.lines)
                         for l in lines[-15:])

    def wait_for_steps(self, count, since=0.0, timeout=120):
        """Until every rank has `count` steps that ended after `since`."""
        deadline = time.time() + timeout
        while not all(len([s for s in self.records(r, "step") if s["t"] > since]) >= count
                      for r in range(len(PLACEMENT))):
            assert time.time() < deadline, "ranks stalled:\n" + self.output()
            assert all(p.poll() is None for p in self.procs), "a rank ended:\n" + self.output()
            time.sleep(0.1)  # Polling the ranks' output; bounded by the deadline.

    def finish(self, timeout):
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                for p in self.procs:
                    p.kill()
                raise AssertionError("a rank did not end within %ss:\n%s"
                                     % (timeout, self.output()))
        for reader in self.readers:  # Each ends at its process's end of output.
            reader.join(timeout=30)
        return codes

    def stop(self):
        open(self.stop_file, "w").close()

    def kill(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()


def two_hosts(h, rate=None):
    h.add("a")
    h.add("b")
    h.link("a", ADDRESS_A, "b", ADDRESS_B, rate=rate)


def assert_every_rank_continued(job, backend):
    codes = job.finish(timeout=120)
    assert codes == [0] * len(PLACEMENT), job.output()
    for rank in range(len(PLACEMENT)):
        assert not job.records(rank, "error") and not job.records(rank, "wrong"), job.output()
    steps = job.records(0, "step")
    gaps = [b["t"] - a["t"] for a, b in zip(steps, steps[1:])]
    print("%s: %d steps, the longest %.2f s, the median %.3f s" % (
        backend, len(steps), max(gaps), sorted(gaps)[len(gaps) // 2]))


def assert_every_rank_failed_in_time(job, backend, fault_at):
    """Every rank ends with an error, no later than its deadline after the fault, and its
    destroy_process_group returns; returns the errors."""
    codes = job.finish(timeout=TIMEOUT_S + 60)
    assert codes == [3] * len(PLACEMENT), job.output()
    errors = []
    for rank in range(len(PLACEMENT)):
        assert not job.records(rank, "wrong"), job.output()
        (error,) = job.records(rank, "error")
        waited = error["t"] - max(error["started"], fault_at)
        # tcp finds a silent peer by its heartbeat; gloo's connections have none, so its ranks
        # wait out the operation's timeout.
        bound = HEARTBEAT_S if backend == "tcp" else TIMEOUT_S
        assert waited <= bound + SLACK_S, (rank, waited, error)
        # destroy_process_group counts a broken group's rank as departed without waiting for
        # the others; a store server behind the fault is found gone within its heartbeat.
        assert error["destroyed"] - error["t"] <= HEARTBEAT_S + SLACK_S, (rank, error)
        errors.append(error)
    print("%s: ranks failed %s s after the fault, destroy took %s s; %s" % (
        backend, [round(e["t"] - max(e["started"], fault_at), 1) for e in errors],
        [round(e["destroyed"] - e["t"], 1) for e in errors],
        "; ".join("rank %d %s: %s" % (r, e["error"], e["message"][:120])
                  for r, e in enumerate(errors))))
    return errors


@pytest.mark.parametrize("backend", ["tcp", "gloo"])
def test_a_three_second_link_flap_costs_nothing(backend, tmp_path):
    with hosts() as h:
        two_hosts(h)
        job = Job(h, backend, tmp_path)
        try:
            job.wait_for_steps(5)
            h.set_link("a", "b", up=False)
            time.sleep(3)  # The fault's length, not a synchronisation.
            h.set_link("a", "b", up=True)
            job.wait_for_steps(5, since=time.time())
            job.stop()
            assert_every_rank_continued(job, backend)
        finally:
            job.kill()


# Faults that last: the link down (kept down until every rank has ended, at most 60 s), and a
# one-way drop (host a's packets to b go to a blackhole route; b's still reach a).
LASTING_FAULTS = {
    "outage": lambda h: h.set_link("a", "b", up=False),
    "one_way_drop": lambda h: _ip("-n", h.ns("a"), "route", "add", "blackhole",
                                  ADDRESS_B + "/32"),
}


@pytest.mark.parametrize("fault", sorted(LASTING_FAULTS))
@pytest.mark.parametrize("backend", ["tcp", "gloo"])
def test_a_lasting_fault_fails_every_rank_within_its_deadline(backend, fault, tmp_path):
    with hosts() as h:
        two_hosts(h)
        job = Job(h, backend, tmp_path)
        try:
            job.wait_for_steps(5)
            fault_at = time.time()
            LASTING_FAULTS[fault](h)
            errors = assert_every_rank_failed_in_time(job, backend, fault_at)
        finally:
            job.kill()
    check_errors(backend, errors)


@pytest.mark.parametrize("backend", ["tcp", "gloo"])
def test_a_link_capped_at_one_megabit_is_slow_but_right(backend, tmp_path):
    with hosts() as h:
        two_hosts(h, rate="1mbit")
        job = Job(h, backend, tmp_path)
        try:
            job.wait_for_steps(4, timeout=180)
            job.stop()
            assert_every_rank_continued(job, backend)
        finally:
            job.kill()


def check_errors(backend, errors):
    """What each rank is told: on tcp, which rank it lost and why; on gloo, a timeout."""
    for rank, error in enumerate(errors):
        if backend == "tcp":
            assert error["error"] in ("UnavailableError", "DeadlineExceededError"), error
            assert "lost rank" in error["message"] or "timed out" in error["message"], error
        else:
            assert error["error"] in ("DeadlineExceededError", "UnavailableError"), error
        assert "all_reduce" in error["message"], error
