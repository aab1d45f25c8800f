"""A torch process in the reconfigure regime on plexus, driven by test_torch_reconfigure.py:
one JSON command per line on stdin, one JSON reply per line on stdout.

    reconfigure_worker.py STORE_PORT RANK WORLD

It joins torch's TCPStore on 127.0.0.1:STORE_PORT, makes its "plexus" group with
enable_reconfigure=True, publishes its handle as handle/<RANK> and says {"ready": handle}.
Commands: {"op": "reconfigure", "uuid": U, "handles": [...], "set": false, "timeout": S},
{"op": "all_reduce", "value": V, "announce": false} (announce: {"issued": true} first),
{"op": "ddp_step", "value": V, "rebuild": false} (the gradient: the mean of the members' V), {"op": "error"},
{"op": "abort"}, {"op": "exit"}. A reply holds "ok" and either the result or
"error" (the exception's text), with "seconds" taken."""
import json
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import plexus.torch  # noqa: F401 - registers "plexus"


def main():
    port, rank, world = (int(a) for a in sys.argv[1:4])
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    dist.init_process_group("plexus", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=30), enable_reconfigure=True)
    backend = dist.get_backend_impl(dist.group.WORLD, torch.device("cpu"))
    hook_fired = threading.Event()
    backend.register_abort_hook(7, hook_fired.set)
    handle = dist._get_reconfigure_handle()
    store.set("handle/%d" % rank, handle)
    reply({"ready": handle, "supports": dist._supports_reconfigure()})
    for line in sys.stdin:
        command = json.loads(line)
        started = time.monotonic()
        try:
            result = run(command, backend, hook_fired)
            answer = {"ok": True, "result": result}
        except Exception as error:  # noqa: BLE001 - the test reads what was raised
            answer = {"ok": False, "error": "%s: %s" % (type(error).__name__, error)}
        answer["seconds"] = time.monotonic() - started
        reply(answer)
        if command["op"] == "exit":
            break


DDP = None


def run(command, backend, hook_fired):
    op = command["op"]
    if op == "reconfigure":
        handles = command["handles"]
        dist._reconfigure(command["uuid"], set(handles) if command.get("set") else handles,
                          timeout=timedelta(seconds=command.get("timeout", 30))).wait()
        return {"rank": dist.get_rank(), "size": dist.get_world_size()}
    if op == "all_reduce":
        tensor = torch.full((1000,), float(command["value"]))
        if command.get("announce"):  # Says when it is issued, then waits for it.
            work = dist.all_reduce(tensor, async_op=True)
            reply({"issued": True})
            work.wait()
        else:
            dist.all_reduce(tensor)
        assert bool((tensor == tensor[0]).all()), tensor
        return float(tensor[0])
    if op == "ddp_step":  # One step of a DistributedDataParallel module made at its first use.
        global DDP
        if DDP is None:
            torch.manual_seed(0)
            DDP = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1, bias=False))
        elif command.get("rebuild"):  # A new DDP around the module: a fresh reducer.
            DDP = torch.nn.parallel.DistributedDataParallel(DDP.module)
        DDP.zero_grad()
        DDP(torch.full((1, 2), float(command["value"]))).sum().backward()
        return DDP.module.weight.grad[0].tolist()
    if op == "error":
        return {"error": backend.get_error().name, "hook_fired": hook_fired.is_set()}
    if op == "abort":
        backend.abort()
        return None
    if op == "exit":
        dist.destroy_process_group()
        return None
    raise ValueError("unknown command %r" % command)


def reply(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
