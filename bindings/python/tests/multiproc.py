"""Runs a function on every rank of a local world: one spawned process per rank, meeting
through a FileStore in $TEST_TMPDIR (no ports to pick). Each rank's return value comes back
to the caller; a rank's exception, a crash or the deadline fails the call with every rank's
report."""
import datetime
import multiprocessing
import os
import queue
import tempfile
import time
import traceback
import uuid


def _tmpdir():
    return os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()


def _rank_main(fn, rank, world_size, args, options, results):
    try:
        if options["init"] == "plexus":
            import plexus as dist
        else:
            import plexus.torch  # noqa: F401 - registers "plexus" with torch.distributed
            import torch.distributed as dist
        if options["before_init"] is not None:
            options["before_init"](rank, world_size)
        dist.init_process_group(options["backend"], init_method="file://" + options["store"],
                                rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=options["op_timeout"]),
                                **options["init_options"])
        try:
            value = fn(rank, world_size, *args)
        finally:
            if dist.is_initialized() and options["destroy"]:
                dist.destroy_process_group()
        results.put((rank, True, value))
    except BaseException:  # Reported to the parent, which fails the test with it.
        results.put((rank, False, traceback.format_exc()))


def run_world(fn, world_size, *args, backend="tcp", init="plexus", timeout=120, op_timeout=60,
              before_init=None, may_exit=(), destroy=True, init_options=None):
    """Calls fn(rank, world_size, *args) on `world_size` ranks and returns their results in
    rank order. init: "plexus" (plexus.init_process_group) or "torch" (torch.distributed with
    plexus.torch imported).
    Ranks in `may_exit` may end without a result (theirs is None); destroy=False skips
    destroy_process_group (for worlds a test has broken on purpose); init_options: more keyword
    arguments for init_process_group (torch's enable_reconfigure=True, say)."""
    context = multiprocessing.get_context("spawn")
    store = os.path.join(_tmpdir(), "store-" + uuid.uuid4().hex)
    options = {"backend": backend, "init": init, "store": store, "op_timeout": op_timeout,
               "before_init": before_init, "destroy": destroy,
               "init_options": init_options or {}}
    results = context.Queue()
    processes = [context.Process(target=_rank_main,
                                 args=(fn, rank, world_size, args, options, results))
                 for rank in range(world_size)]
    for process in processes:
        process.start()
    deadline = time.monotonic() + timeout
    reports = {}
    try:
        while len(reports) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                rank, ok, value = results.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                if all(not processes[r].is_alive() for r in range(world_size)
                       if r not in reports and r not in may_exit) and results.empty():
                    break
                continue
            reports[rank] = (ok, value)
    finally:
        for process in processes:
            process.join(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
            if process.is_alive():
                process.kill()
                process.join()
    problems = []
    for rank in range(world_size):
        if rank not in reports and rank in may_exit:
            reports[rank] = (True, None)
        elif rank not in reports:
            problems.append("rank %d: no result (exit code %s)"
                            % (rank, processes[rank].exitcode))
        elif not reports[rank][0]:
            problems.append("rank %d raised:\n%s" % (rank, reports[rank][1]))
    if problems:
        raise AssertionError("%s on %d ranks failed:\n%s"
                             % (fn.__name__, world_size, "\n".join(problems)))
    return [reports[rank][1] for rank in range(world_size)]


def _rank_on_store_server(rank, port, secret):
    import numpy as np
    import plexus as dist
    if secret is not None:
        os.environ["PLEXUS_SECRET"] = secret
    store = dist.TCPStore("127.0.0.1", port, timeout=60)
    dist.init_process_group("tcp", store=store, rank=rank, world_size=2)
    x = np.full(1000, rank + 1, np.float32)
    dist.all_reduce(x)
    dist.destroy_process_group()
    return float(x[0])


def job_on_store_server(port, secret=None):
    """A 2-rank job whose ranks meet in the store server on `port`: each rank's sum."""
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        return pool.starmap_async(_rank_on_store_server,
                                  [(rank, port, secret) for rank in range(2)]).get(timeout=120)


def torchrun_command(*args):
    """torchrun as a user runs it: `python3 -m plexus.torchrun` where torch has no libuv and
    torchrun itself cannot start (plexus/_libuv.py), else /usr/bin/torchrun."""
    import sys
    from plexus import _libuv
    command = ([sys.executable, "-m", "plexus.torchrun"] if _libuv.torch_lacks_libuv()
               else ["/usr/bin/torchrun"])
    # Debian's torch 1.13 torchrun mis-parses --redirects 0 on Python 3.11; 1 + --tee 1 works.
    return command + ["--redirects", "1", "--tee", "1"] + list(args)


def refusal(call, words):
    """"refused" when call() raises a RuntimeError saying `words`, "accepted" when it returns,
    else the other error's message (so a test's assertion shows it)."""
    try:
        call()
    except RuntimeError as error:
        return "refused" if words in str(error) else str(error)
    return "accepted"
