"""plexus.elastic running the loop shapes PCCL users write (elastic_loop_peer.py), with peers
joining, leaving, crashing and freezing at awkward moments. Every run must end, and the results
are checked against what the sums themselves say: each peer adds a distinct power of two, so
an all-reduce's sum names exactly the peers that took part."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from plexus.elastic import Attribute, Communicator, PCCLError, ReduceOp, Result

HERE = os.path.dirname(os.path.realpath(__file__))
PEER = os.path.join(HERE, "elastic_loop_peer.py")
sys.path.insert(0, HERE)
from test_elastic import master  # noqa: E402,F401  (the fixture: a master process, 2 s heartbeat)


class Peer:
    """One peer process; its JSON lines are collected by a thread as they come."""

    def __init__(self, master, shape, index, steps, target, state_elements=64, extra=(),
                 wait_for_go=False):
        self.index = index
        self.value = 1 << index
        self.lines = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, PEER, "--master", master, "--shape", shape, "--steps", str(steps),
             "--target", str(target), "--value", str(self.value), "--seed", str(index),
             "--state-elements", str(state_elements)] + list(extra)
            + (["--wait-for-go"] if wait_for_go else []),
            stdin=subprocess.PIPE if wait_for_go else None, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)  # End of output.
            self.cond.notify_all()

    def wait_for(self, predicate, timeout=90):
        """Blocks until a line satisfies `predicate`; returns it."""
        deadline = time.time() + timeout
        seen = 0
        with self.cond:
            while True:
                while seen < len(self.lines):
                    line = self.lines[seen]
                    seen += 1
                    assert line is not None, "peer %d ended first:\n%s" % (self.index,
                                                                           self.output())
                    if predicate(line):
                        return line
                left = deadline - time.time()
                assert left > 0, "peer %d: timed out:\n%s" % (self.index, self.output())
                self.cond.wait(left)

    def go(self):
        """Lets a peer started with wait_for_go connect, once it is ready."""
        self.wait_for(lambda l: l == "ready")
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=120):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("peer %d did not finish in %d s:\n%s"
                                 % (self.index, timeout, self.output()))
        self.reader.join(timeout=10)
        assert self.proc.returncode == 0, self.output()
        return self.steps()

    def output(self):
        return "\n".join(l for l in self.lines if l is not None)[-4000:]

    def steps(self):
        return [json.loads(l) for l in self.lines if l and l.startswith("{\"r\"")]

    def kill(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)


def step_line(line):
    return line.startswith("{\"r\"")


def check(finished, killed=()):
    """Every revision's sum names who took part: the peers that recorded it, plus possibly
    peers that were killed. Everyone who ran a revision got the same sum and world size."""
    by_revision = {}
    for peer in finished:
        for step in peer.steps():
            by_revision.setdefault(step["r"], []).append((peer, step))
    killed_bits = sum(p.value for p in killed)
    for revision, entries in sorted(by_revision.items()):
        sums = {step["sum"] for _, step in entries}
        assert len(sums) == 1, (revision, entries)
        total = int(sums.pop())
        recorded = sum(p.value for p, _ in entries)
        assert total & recorded == recorded, (revision, total, recorded)
        assert total & ~recorded & ~killed_bits == 0, (revision, total, recorded)
        for _, step in entries:
            assert step["world"] == bin(total).count("1"), (revision, step)
            assert step["attr"] == step["world"], (revision, step)
    return by_revision


def no_drift(peer):
    """After its first sync a peer's state never needed repair: the peers stayed identical."""
    steps = peer.steps()
    assert all(s["rx"] == 0 for s in steps[1:]), steps


@pytest.mark.parametrize("shape", ["pccl", "plexus", "idiom"])
def test_a_newcomer_joins_three_peers_in_each_loop_shape(master, shape):
    first = [Peer(master, shape, i, steps=60, target=4) for i in range(3)]
    first[0].wait_for(lambda l: step_line(l) and json.loads(l)["r"] >= 10)
    joiner = Peer(master, shape, 3, steps=60, target=4)
    peers = first + [joiner]
    for p in peers:
        p.finish()
    by_revision = check(peers)
    joined = [s for s in joiner.steps()]
    assert joined and joined[-1]["world"] == 4, joiner.output()
    assert joined[0]["rx"] > 0  # The newcomer received the group's state ...
    for p in first:
        no_drift(p)  # ... and nobody else ever had to.
    final = {p.output().rsplit("DONE ", 1)[1] for p in peers}
    assert len(final) == 1, final  # Same revision and the same state everywhere.
    assert max(by_revision) >= 59
    # Peers on one host move their data through shared memory.
    assert all(p.steps()[-1]["shm"] == 3 for p in peers), [p.steps()[-1] for p in peers]


def test_peers_with_different_call_counts_line_up_when_two_join(master):
    first = [Peer(master, "idiom", i, steps=80, target=4) for i in range(2)]
    first[0].wait_for(lambda l: step_line(l) and json.loads(l)["r"] >= 10)
    third = Peer(master, "idiom", 2, steps=80, target=4)
    third.wait_for(step_line)
    fourth = Peer(master, "pccl", 3, steps=80, target=4)
    peers = first + [third, fourth]
    for p in peers:
        p.finish()
    check(peers)
    assert fourth.steps()[-1]["world"] == 4


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_a_joiner_dies_or_freezes_during_its_first_sync(master, sig):
    # The joiner is set up before the others start: its imports can take longer than their 80
    # steps (Python 3.14 on a loaded machine), and it must arrive while they still train.
    joiner = Peer(master, "pccl", 3, steps=80, target=3, state_elements=1 << 21,
                  wait_for_go=True)
    joiner.wait_for(lambda l: l == "ready")
    first = [Peer(master, "pccl", i, steps=80, target=3, state_elements=1 << 21)
             for i in range(3)]
    first[0].wait_for(lambda l: step_line(l) and json.loads(l)["r"] >= 5)
    joiner.go()
    joiner.wait_for(lambda l: l.startswith("{\"sync\""))
    joiner.kill(sig)
    try:
        for p in first:
            p.finish()
    finally:
        joiner.proc.kill()
        joiner.proc.wait()
    check(first, killed=[joiner])
    for p in first:
        assert p.steps()[-1]["world"] == 3


def test_attributes_describe_the_callers_epoch(master):
    """A peer that leaves between the other's wait() and its attribute read does not change
    what the other reads; the next update_topology does."""
    a = Communicator(master)
    a.connect()
    script = ("import sys, numpy as np\n"
              "from plexus.elastic import Communicator, ReduceOp\n"
              "c = Communicator(sys.argv[1]); c.connect(n_attempts=15)\n"
              "x = np.ones(4); c.all_reduce(x, x, op=ReduceOp.SUM)\n"
              "print(x[0], flush=True)\n")
    b = subprocess.Popen([sys.executable, "-c", script, master], stdout=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 60
    while a.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < 2:
        assert time.time() < deadline
        a.update_topology()
    x = np.ones(4)
    info = a.all_reduce(x, x, op=ReduceOp.SUM)
    assert info.local_world_size == 2 and (x == 2).all()
    assert b.communicate(timeout=60)[0].strip() == "2.0" and b.returncode == 0
    while a.announced_attribute(Attribute.GLOBAL_WORLD_SIZE) != 1:  # The master saw b leave.
        assert time.time() < deadline
        time.sleep(0.01)
    assert a.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 2  # Still the epoch of the call.
    assert a.get_attribute(Attribute.LOCAL_WORLD_SIZE) == 2
    a.update_topology()
    assert a.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 1


def test_two_peers_finishing_at_different_times(master):
    """One peer leaves once both ran 20 steps together; the other goes on alone for 20 more:
    nothing waits for the one that left."""
    early = Peer(master, "plexus", 0, steps=20, target=2)
    late = Peer(master, "plexus", 1, steps=0, target=1, extra=["--alone-after-company", "20"])
    for p in (early, late):
        try:
            p.finish()
        except AssertionError as error:
            raise AssertionError("%s\nthe other peer:\n%s" % (error, (late if p is early
                                                                      else early).output()))
    check([early, late])
    together = [s for s in late.steps() if s["world"] == 2]
    assert together and together[-1]["r"] >= 19, late.output()
    assert [s["world"] for s in late.steps()[-20:]] == [1] * 20, late.output()


def test_update_topology_deadline_names_the_absent_peer(master):
    """A peer that never comes to update_topology: the one waiting there gets DeadlineExceeded
    after its timeout, naming that peer, and the group stays usable."""
    a = Communicator(master, operation_timeout=3)
    a.connect()
    b = Communicator(master, operation_timeout=3)
    connected = threading.Thread(target=b.connect)
    connected.start()
    deadline = time.time() + 30
    while not a.are_peers_pending():
        assert time.time() < deadline
        time.sleep(0.01)
    a.update_topology()  # Accepts b.
    connected.join()
    c = Communicator(master, operation_timeout=3)
    joining = threading.Thread(target=lambda: c.connect(n_attempts=1))
    joining.start()
    while not a.are_peers_pending():
        assert time.time() < deadline
        time.sleep(0.01)
    started = time.time()
    with pytest.raises(PCCLError) as error:
        a.update_topology()  # b is busy elsewhere: never comes.
    waited = time.time() - started
    assert 2.5 < waited < 8, waited
    assert error.value.result == Result.UPDATE_TOPOLOGY_FAILED
    text = str(error.value)
    assert "peer %d" % b.peer_id in text and "never called it" in text, text
    # Still usable: both call now, c is accepted, and the three all-reduce.
    done = threading.Thread(target=b.update_topology)
    done.start()
    a.update_topology()
    done.join()
    joining.join()
    assert a.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 3
