"""Training that outlives its workers through torch's own fault-tolerance API (torch 2.14+,
dist._reconfigure on "plexus" groups), in the shape torchft users write it: a coordinator holds
the store and decides each round who is in; workers ask it before every step, reconfigure when
the membership changed (a fresh uuid), hand the parameters to a newcomer by broadcast, all-reduce
their gradients, and redo a step that failed.

    python3 reconfigure_training.py --demo [--workers 3] [--steps 60] [--fault kill|stop]
                                    [--backend plexus|gloo]

The demo starts three workers (--workers), one of which SIGKILLs (or SIGSTOPs) itself at step 10 just as
the others enter that step's all_reduce, starts a replacement at step 25, and checks at the end
that every worker holds bitwise the same parameters, equal to a one-process replay of the steps
and memberships the workers logged. --backend gloo runs the same loop on gloo, for comparison.
Gradients are all-reduced as integers (fixed point), so the sum is exact in any order.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import plexus.torch  # noqa: F401 - registers "plexus" (and fits torch's stores to its build)

SCALE = 2.0 ** 20  # Fixed point of the all-reduced gradients.
LR = 0.05
GRACE = timedelta(seconds=1)  # How long the coordinator waits for a member that did not ask.


def make_model():
    torch.manual_seed(0)
    return torch.nn.Linear(8, 1).double()


def batch(step, position):
    """The data of the member at `position` of the step's membership."""
    g = torch.Generator().manual_seed(step * 1000 + position)
    x = torch.randn(16, 8, generator=g, dtype=torch.float64)
    return x, x.sum(dim=1, keepdim=True) * 0.5


def local_gradient(model, step, position):
    model.zero_grad()
    x, y = batch(step, position)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [torch.round(p.grad * SCALE).to(torch.int64) for p in model.parameters()]


def apply(model, summed, world):
    with torch.no_grad():
        for p, q in zip(model.parameters(), summed):
            p -= LR * (q.to(torch.float64) / SCALE / world)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def worker(port, name, slot, joining, backend_name, fault=None, fault_at=-1):
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=120))
    dist.init_process_group(backend_name, store=store, rank=slot, world_size=slot + 1,
                            timeout=timedelta(seconds=30), enable_reconfigure=True)
    model, uuid, step, lost = make_model(), None, 0, []
    backend = dist.get_backend_impl(dist.group.WORLD, torch.device("cpu"))
    handle = dist._get_reconfigure_handle()
    if joining:  # The coordinator admits it at a round it names.
        store.get("go/" + name)  # Demo only: set up beforehand (imports take seconds), joins now.
        store.set("join/%d" % (store.add("joiners", 1) - 1), json.dumps([name, handle]))
        round_ = int(store.get("admitted/" + name))
    else:
        store.set("handle/" + name, handle)
        round_ = 0
    while True:
        # gloo's handle changes with every configuration; plexus's names the process.
        store.set("ask/%d/%s" % (round_, name), json.dumps(
            {"step": step, "lost": lost, "handle": dist._get_reconfigure_handle()}))
        answer = json.loads(store.get("answer/%d" % round_))
        round_ += 1
        if answer.get("done") or name not in answer["names"]:
            break
        if answer["uuid"] != uuid:
            started = time.monotonic()
            uuid = answer["uuid"]
            dist._reconfigure(uuid, answer["handles"], timeout=timedelta(seconds=30)).wait()
            state = torch.cat([flat(model), torch.tensor([float(step)], dtype=torch.float64)])
            dist.broadcast(state, group_src=answer["names"].index(answer["source"]))
            torch.nn.utils.vector_to_parameters(state[:-1], model.parameters())
            step = int(state[-1])
            log(name, reconfigured=uuid, world=len(answer["names"]), step=step,
                seconds=time.monotonic() - started)
        if step == fault_at and fault:  # Demo: dies or freezes where the others all-reduce.
            log(name, faulting=step)
            os.kill(os.getpid(), signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        try:
            summed = local_gradient(model, step, dist.get_rank())
            for q in summed:
                dist.all_reduce(q)
        except RuntimeError as error:  # A member was lost: the step is redone next round.
            # plexus names the ranks it found gone, which spares the coordinator its grace.
            lost = [answer["names"][r] for r in getattr(backend, "lost_ranks", [])]
            log(name, failed=step, lost=lost, error=str(error).splitlines()[0][:200])
            continue
        lost = []
        apply(model, summed, dist.get_world_size())
        log(name, trained=step, world=dist.get_world_size())
        step += 1
    log(name, final=flat(model).tolist())
    dist.destroy_process_group()


def log(name, **fields):
    print(json.dumps(dict(fields, worker=name, t=time.monotonic())), flush=True)


def coordinate(store, names, steps):
    """Answers every round: the members that asked (all; or those in by GRACE after the first,
    or once every other one was reported lost), plus newcomers; a fresh uuid whenever the
    membership changes."""
    handles = {n: store.get("handle/" + n).decode() for n in names}
    uuid, joiners, round_ = 0, 0, 0
    while True:
        asked, lost = {}, set()
        deadline = None
        while len(asked) < len(names) and not set(names) <= set(asked) | lost:
            for n in names:
                key = "ask/%d/%s" % (round_, n)
                if n not in asked and store.check([key]):
                    ask = json.loads(store.get(key))
                    asked[n] = ask["step"]
                    handles[n] = ask["handle"]
                    lost.update(ask["lost"])
            if asked and deadline is None and uuid > 0:  # The first round waits for everyone.
                deadline = time.monotonic() + GRACE.total_seconds()
            if deadline is not None and time.monotonic() > deadline:
                break
            if not set(names) <= set(asked) | lost:
                time.sleep(0.002)  # torch's store waits for one key only: poll the members.
        step = max(asked.values())
        if step >= steps:
            store.set("answer/%d" % round_, json.dumps({"done": True}))
            return
        members = [n for n in names if n in asked]
        for j in range(joiners, int(store.add("joiners", 0))):
            joiner, handle = json.loads(store.get("join/%d" % j))
            handles[joiner] = handle
            members.append(joiner)
            store.set("admitted/" + joiner, str(round_))
            joiners = j + 1
        if members != names or uuid == 0:
            uuid += 1
        names = members
        store.set("answer/%d" % round_, json.dumps(
            {"uuid": uuid, "names": names, "handles": [handles[n] for n in names],
             "source": next(n for n in names if n in asked), "step": step}))
        round_ += 1


def replay(steps_log):
    """One process, the same steps and memberships: the parameters every worker must hold."""
    torch.set_num_threads(1)
    model = make_model()
    for step, world in steps_log:
        summed = None
        for position in range(world):
            grads = local_gradient(model, step, position)
            summed = grads if summed is None else [a + b for a, b in zip(summed, grads)]
        apply(model, summed, world)
    return flat(model).tolist()


class Process:
    """A worker process whose JSON lines a thread collects."""

    def __init__(self, port, name, slot, backend, joining=False, extra=()):
        self.name, self.lines, self.cond = name, [], threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", name, "--port", str(port),
             "--slot", str(slot), "--backend", backend] + (["--joining"] if joining else [])
            + list(extra),
            stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(json.loads(line))
                self.cond.notify_all()

    def wait_for(self, predicate, timeout=120):
        with self.cond:
            if not self.cond.wait_for(lambda: any(predicate(l) for l in self.lines), timeout):
                raise SystemExit("demo: %s did not get there: %s" % (self.name, self.lines[-3:]))
        return next(l for l in self.lines if predicate(l))


def demo(steps, fault, backend, count):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=120))
    names = ["w%d" % i for i in range(count)]
    # w1 kills or stops itself at step 10, as the others enter that step's all_reduce.
    workers = [Process(store.port, n, i, backend,
                       extra=["--fault", fault, "--fault-at", "10"] if n == "w1" else [])
               for i, n in enumerate(names)]
    joiner = Process(store.port, "w%d" % count, count, backend, joining=True)  # At step 25.
    threading.Thread(target=coordinate, args=(store, names, steps), daemon=True).start()
    first, victim = workers[0], workers[1]
    lost_at = victim.wait_for(lambda l: "faulting" in l)["t"]  # One clock for every process.
    # The first step without the victim; the failure the survivors saw, if it hit a step.
    redone = first.wait_for(lambda l: "trained" in l and l["world"] == count - 1)
    error = next((l for l in first.lines if "failed" in l), None)
    first.wait_for(lambda l: l.get("trained", -1) >= 25)
    store.set("go/" + joiner.name, "1")
    alive = [w for w in workers if w is not victim] + [joiner]
    for w in alive:
        if w.proc.wait(timeout=300) != 0:
            raise SystemExit("demo: %s ended with status %s" % (w.name, w.proc.returncode))
    victim.proc.kill()
    victim.proc.wait()
    finals = [next(l["final"] for l in w.lines if "final" in l) for w in alive]
    joined = joiner.wait_for(lambda l: "reconfigured" in l)
    joined_step = joiner.wait_for(lambda l: "trained" in l)
    result = {
        "backend": backend,
        "fault": fault,
        "workers": count,
        "survivors_raised_after_s": round(error["t"] - lost_at, 3) if error else None,
        "next_step_after_s": round(redone["t"] - lost_at, 3),
        "joiner_first_step_after_reconfigure_s":
            round(joined_step["t"] - (joined["t"] - joined["seconds"]), 3),
        "workers_equal": all(f == finals[0] for f in finals),
        "replay_equal": replay([(l["trained"], l["world"]) for l in first.lines
                                if "trained" in l]) == finals[0],
    }
    print(json.dumps(result), flush=True)
    if not (result["workers_equal"] and result["replay_equal"]):
        raise SystemExit("demo: the workers' parameters differ (%s)" % result)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--fault", choices=["kill", "stop"], default="kill")
    parser.add_argument("--fault-at", type=int, default=-1)  # A worker's own step to fault at.
    parser.add_argument("--worker")
    parser.add_argument("--port", type=int)
    parser.add_argument("--slot", type=int)
    parser.add_argument("--joining", action="store_true")
    parser.add_argument("--backend", default="plexus", choices=["plexus", "gloo"])
    args = parser.parse_args()
    if args.worker:
        worker(args.port, args.worker, args.slot, args.joining, args.backend,
               args.fault if args.fault_at >= 0 else None, args.fault_at)
    elif args.demo:
        demo(args.steps, args.fault, args.backend, args.workers)
    else:
        parser.error("give --demo")


if __name__ == "__main__":
    main()
