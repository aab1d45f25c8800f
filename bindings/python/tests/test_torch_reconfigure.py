"""plexus under torch's own fault-tolerance API (torch 2.14's c10d reconfigure): handles, bad
input, a member that never comes, and workers killed or frozen inside an all_reduce, with the
survivors going on under a fresh uuid and a replacement joining. Each worker is a separate
process (reconfigure_worker.py) around torch's TCPStore on port 0. torch's own suite for the
same API is torch_fault_tolerance_suite.py."""
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

import plexus.torch  # noqa: F401

pytestmark = pytest.mark.skipif(not hasattr(dist, "_reconfigure"),
                                reason="this torch has no c10d reconfigure API (2.14 brought it)")

WORKER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "reconfigure_worker.py")


class Worker:
    def __init__(self, port, rank, world, backend=None):
        self.rank = rank
        env = dict(os.environ, **({"PLEXUS_TORCH_BACKEND": backend} if backend else {}))
        self.proc = subprocess.Popen([sys.executable, WORKER, str(port), str(rank), str(world)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        ready = self.read()
        assert ready["supports"], ready
        self.handle = ready["ready"]

    def send(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        assert line, "worker %d ended (status %s)" % (self.rank, self.proc.wait(timeout=30))
        return json.loads(line)

    def call(self, **command):
        self.send(**command)
        return self.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def world():
    """Starts workers on one TCPStore; kills whatever is left at the end."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=60))
    workers = []

    def start(count, first_rank=0, world_size=None, backend=None):
        made = [Worker(store.port, first_rank + i, world_size or count, backend)
                for i in range(count)]
        workers.extend(made)
        return made
    yield start
    for w in workers:
        w.close()


def reconfigure(workers, uuid, members=None, **extra):
    """Every worker in `workers` reconfigures to `members` (default: themselves)."""
    handles = [w.handle for w in (members or workers)]
    for w in workers:
        w.send(op="reconfigure", uuid=uuid, handles=handles, **extra)
    return [w.read() for w in workers]


def all_reduce(workers, values):
    for w, v in zip(workers, values):
        w.send(op="all_reduce", value=v)
    return [w.read() for w in workers]


def test_handles_name_processes_and_bad_input_is_refused(world):
    a, b = world(2)
    assert a.handle != b.handle and a.handle.startswith("plexus:")
    early = a.call(op="all_reduce", value=1)
    assert not early["ok"] and "enable_reconfigure=True and has no members yet" in early["error"]
    foreign = a.call(op="reconfigure", uuid=1, handles=[a.handle, "gloo:0:0:0:"])
    assert "handle 1 'gloo:0:0:0:' is not a plexus handle" in foreign["error"]
    twice = a.call(op="reconfigure", uuid=2, handles=[a.handle, a.handle])
    assert "is given twice (positions 0 and 1)" in twice["error"]
    absent = a.call(op="reconfigure", uuid=3, handles=[b.handle])
    assert "this process's handle '%s' is not among the 1 handles" % a.handle in absent["error"]
    # Alone under uuid 4, then uuid 4 again: refused by this process.
    assert a.call(op="reconfigure", uuid=4, handles=[a.handle])["result"] == {"rank": 0, "size": 1}
    again = a.call(op="reconfigure", uuid=4, handles=[a.handle])
    assert "uuid 4 was already used by this process" in again["error"]
    # Another process, another membership, the same uuid: refused through the store.
    other = b.call(op="reconfigure", uuid=4, handles=[b.handle])
    assert "uuid 4 was already used for another membership" in other["error"]


def test_two_processes_started_with_one_rank_do_not_collide(world):
    a = world(1, first_rank=0, world_size=2)[0]
    b = world(1, first_rank=0, world_size=2)[0]  # The same rank at init: a replacement, say.
    assert a.handle != b.handle
    assert [r["result"] for r in reconfigure([a, b], 50)] == [{"rank": 0, "size": 2},
                                                               {"rank": 1, "size": 2}]
    assert [r["result"] for r in all_reduce([a, b], [1, 2])] == [3.0, 3.0]


def test_a_set_of_handles_lets_plexus_order_the_ranks(world):
    workers = world(3)
    results = reconfigure(workers, 10, set=True)
    order = sorted(w.handle for w in workers)
    for w, r in zip(workers, results):
        assert r["result"] == {"rank": order.index(w.handle), "size": 3}, r
    assert [r["result"] for r in all_reduce(workers, [1, 2, 4])] == [7.0] * 3


def test_a_member_that_never_comes_is_named(world):
    a, b = world(2)
    started = time.monotonic()
    failed = a.call(op="reconfigure", uuid=20, handles=[a.handle, b.handle], timeout=2)
    assert time.monotonic() - started < 15
    assert not failed["ok"] and "DEADLINE_EXCEEDED" in failed["error"], failed
    assert "never arrived: rank(s) 1" in failed["error"] and b.handle in failed["error"]
    # The failed attempt left nothing behind: both form a group under a fresh uuid.
    assert [r["result"]["size"] for r in reconfigure([a, b], 21)] == [2, 2]


def survivors_recover(survivors, victim, uuid):
    """After `victim` failed inside an all_reduce: the error kind and the hooks, then the
    survivors' group under a fresh uuid, and the old one refused."""
    for w in survivors:
        state = w.call(op="error")["result"]
        assert state["error"] in ("REMOTE_ERROR", "TIMEOUT") and state["hook_fired"], state
    stale = survivors[0].call(op="all_reduce", value=1)
    assert not stale["ok"] and "revoked" in stale["error"], stale
    results = reconfigure(survivors, uuid)
    assert [r["result"] for r in results] == [{"rank": i, "size": len(survivors)}
                                             for i in range(len(survivors))]
    sums = all_reduce(survivors, [1 << w.rank for w in survivors])
    assert {r["result"] for r in sums} == {float(sum(1 << w.rank for w in survivors))}


@pytest.mark.parametrize("sig,backend", [(signal.SIGKILL, None), (signal.SIGSTOP, None),
                                         (signal.SIGKILL, "cpu:gloo")],
                         ids=["killed", "frozen", "killed-gloo"])
def test_a_worker_lost_inside_an_all_reduce(world, sig, backend):
    """A killed worker fails the survivors' all_reduce within a second; a frozen one within
    the heartbeat window (5 s), well before the group's 30 s timeout (tcp, the default; on
    gloo's connections, which carry no heartbeat, only the timeout finds it). A replacement
    joins."""
    workers = world(3, backend=backend)
    reconfigure(workers, 30)
    assert {r["result"] for r in all_reduce(workers, [1, 2, 4])} == {7.0}
    survivors, victim = workers[:2], workers[2]
    for w in survivors:
        w.send(op="all_reduce", value=1, announce=True)
    for w in survivors:
        assert w.read() == {"issued": True}
    lost_at = time.monotonic()
    victim.proc.send_signal(sig)
    failures = [w.read() for w in survivors]
    seconds = time.monotonic() - lost_at
    print("%s: the survivors' all_reduce raised %.2f s after it" % (sig.name, seconds))
    assert all(not f["ok"] for f in failures), failures
    assert seconds < (2 if sig == signal.SIGKILL else 12), (seconds, failures)
    survivors_recover(survivors, victim, 31)
    victim.close()
    replacement = world(1, first_rank=3, world_size=4, backend=backend)[0]
    everyone = survivors + [replacement]
    reconfigure(everyone, 32)
    assert {r["result"] for r in all_reduce(everyone, [1, 2, 8])} == {11.0}
    for w in everyone:
        assert w.call(op="exit")["ok"]


def ddp_steps(workers, values, rebuild=False):
    for w, v in zip(workers, values):
        w.send(op="ddp_step", value=v, rebuild=rebuild)
    return [w.read() for w in workers]


def test_distributed_data_parallel_follows_the_membership(world):
    """torch's DDP over a reconfigured group averages over whoever the group holds now when
    the membership changes between steps. A step that failed part-way leaves the survivors'
    reducers in different states (one rebuilt its buckets, one did not): they rebuild the DDP
    wrapper, as after a shrink, and redo the step."""
    workers = world(4)
    reconfigure(workers, 40)
    assert [r["result"] for r in ddp_steps(workers, [1, 2, 3, 6])] == [[3.0, 3.0]] * 4
    assert workers[3].call(op="exit")["ok"]  # Leaves between steps.
    workers = workers[:3]
    reconfigure(workers, 41)
    assert [r["result"] for r in ddp_steps(workers, [1, 2, 6])] == [[3.0, 3.0]] * 3
    survivors = workers[:2]
    workers[2].proc.kill()
    failed = ddp_steps(survivors, [1, 1])
    assert all(not f["ok"] for f in failed), failed
    reconfigure(survivors, 42)
    redone = ddp_steps(survivors, [1, 2], rebuild=True)
    assert [r.get("result") for r in redone] == [[1.5, 1.5]] * 2, redone
