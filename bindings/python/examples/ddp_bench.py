"""Training step time on torch.distributed's gloo and on plexus ("plexus", plexus.torch), side
by side: local CPU ranks train one MLP (default ~25M parameters: 1024 -> 4096 -> 4096 -> 1024) on
synthetic data, forward, backward and an SGD step, under one of torch's distributed stacks
(--stack):
  ddp   DistributedDataParallel: gradients all-reduced in DDP's buckets (default);
  fsdp  FullyShardedDataParallel: parameters all-gathered before use, gradients
        reduce-scattered (torch 2.x; 1.13's does not import on Python 3.11);
  tp    tensor parallelism on a DeviceMesh (torch 2.x): linear layers alternate
        ColwiseParallel and RowwiseParallel (an odd last one stays replicated), DTensor
        all-reduces the row-parallel outputs; every rank feeds the same batch.
torch's intra-op threads stay on (its default), as in training; the ranks share the cores.

    /usr/bin/python3 bindings/python/examples/ddp_bench.py --ranks=2,4 --steps=10
    /usr/bin/python3 bindings/python/examples/ddp_bench.py --stack=fsdp --backends=none,gloo,plexus

Prints, per backend and rank count, the median and best step time (ms) over --steps timed
steps after --warmup, and the gloo/plexus ratio of the medians. Every run ends by checking that
both backends trained to the same parameters (rank 0's, or its shard), and for ddp that all
ranks hold identical ones.

`--load=N` runs N busy-loop processes beside the ranks for every run (the floor's too): a
machine with other work on it.

`--backends=none,gloo,plexus` adds the floor: the same step's computation without the stack's
communication (over a gloo group that then carries only the barriers between steps). ddp: a
hook that leaves each rank's gradients as they are; fsdp: the unwrapped model; tp: the local
shard's layers (a column-parallel layer's outputs and a row-parallel one's inputs divided by
the rank count). What a backend adds to a step is its time over the floor's; the runs then
print that too. The floor's ranks train apart, so it is not compared.
"""
import argparse
import datetime
import multiprocessing
import os
import queue
import statistics
import sys
import tempfile
import time
import uuid


def rank_main(rank, ranks, backend, args, results):
    import torch
    import torch.distributed as dist
    if backend == "plexus":
        import plexus.torch  # noqa: F401 - registers "plexus"
    # "none": the floor; a gloo group for the barriers, and no gradient communication.
    dist.init_process_group("gloo" if backend == "none" else backend,
                            init_method="file://" + args.store + backend + str(ranks),
                            rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(0)
    widths = [int(w) for w in args.widths.split(",")]
    model = build_model(args.stack, backend, widths, ranks)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    # Tensor parallelism splits one batch across ranks: every rank feeds the same one.
    generator = torch.Generator().manual_seed(0 if args.stack == "tp" else rank)
    inputs = torch.randn(args.batch, widths[0], generator=generator)
    targets = torch.randn(args.batch, widths[-1], generator=generator)
    times = []
    for step in range(args.warmup + args.steps):
        dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    # DDP's replicas must be identical; rank 0 reports a fingerprint to compare across backends.
    flat = torch.cat([local(p).detach().reshape(-1) for p in model.parameters()])
    identical = True
    if args.stack == "ddp" and backend != "none":  # fsdp and tp hold shards, not replicas.
        gathered = [torch.zeros_like(flat) for _ in range(ranks)]
        dist.all_gather(gathered, flat)
        identical = all(torch.equal(g, flat) for g in gathered)
    dist.destroy_process_group()
    results.put((rank, times, identical, flat[:1000].tolist(), flat.numel()))


def build_model(stack, backend, widths, ranks):
    """The MLP under `stack` (the floor's stand-in for backend "none")."""
    import torch
    import torch.distributed as dist
    if stack == "tp" and backend == "none":
        # Each column-parallel layer keeps 1/ranks of its outputs, the row-parallel one after it
        # 1/ranks of its inputs: a rank's share of the computation, with nothing to reduce.
        widths = [w // ranks if j % 2 == 1 and j < len(widths) - 1 else w
                  for j, w in enumerate(widths)]
    layers = []
    for fan_in, fan_out in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    if stack == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
        if backend == "none":
            def keep_local_gradients(state, bucket):
                done = torch.futures.Future()
                done.set_result(bucket.buffer())
                return done
            model.register_comm_hook(None, keep_local_gradients)
        return model
    if backend == "none":
        return model
    if stack == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel
        return FullyShardedDataParallel(model, device_id=torch.device("cpu"))
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    linears = [str(2 * i) for i in range(len(widths) - 1)]
    plan = {}
    for first, second in zip(linears[0::2], linears[1::2]):
        plan[first], plan[second] = ColwiseParallel(), RowwiseParallel()
    return parallelize_module(model, mesh, plan)


def local(parameter):
    """A rank's own part of a parameter (a DTensor's local shard)."""
    return parameter.to_local() if hasattr(parameter, "to_local") else parameter


def busy_loop():
    """Other work on the machine (--load): a process that keeps one core busy."""
    while True:
        pass


def run(backend, ranks, args):
    context = multiprocessing.get_context("spawn")
    loaders = [context.Process(target=busy_loop, daemon=True) for _ in range(args.load)]
    for loader in loaders:
        loader.start()
    try:
        return run_ranks(context, backend, ranks, args)
    finally:
        for loader in loaders:
            loader.kill()
            loader.join()


def run_ranks(context, backend, ranks, args):
    results = context.Queue()
    processes = [context.Process(target=rank_main, args=(r, ranks, backend, args, results))
                 for r in range(ranks)]
    for process in processes:
        process.start()
    reports = []
    deadline = time.monotonic() + args.timeout
    while len(reports) < ranks:
        try:
            reports.append(results.get(timeout=1.0))
        except queue.Empty:
            # A rank that died cannot report: say so instead of waiting out the timeout.
            gone = [r for r, p in enumerate(processes) if p.exitcode not in (None, 0)]
            if gone or time.monotonic() > deadline:
                for process in processes:
                    process.kill()
                sys.exit("ddp_bench: %s at %d ranks: %s" % (
                    backend, ranks, "ranks %s exited with %s" % (
                        gone, [processes[r].exitcode for r in gone]) if gone else "timed out"))
    reports.sort()
    for process in processes:
        process.join()
    if not all(report[2] for report in reports):
        sys.exit("ddp_bench: replicas differ on %s at %d ranks" % (backend, ranks))
    # A step's time is the slowest rank's.
    steps = [max(report[1][i] for report in reports) for i in range(args.steps)]
    return steps, reports[0][3], reports[0][4]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stack", choices=["ddp", "fsdp", "tp"], default="ddp")
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--backends", default="gloo,plexus")
    parser.add_argument("--widths", default="1024,4096,4096,1024")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--load", type=int, default=0,
                        help="busy-loop processes running beside the ranks (a busy machine)")
    args = parser.parse_args()
    args.store = os.path.join(tempfile.gettempdir(), "ddp_bench-" + uuid.uuid4().hex + "-")
    backends = args.backends.split(",")
    for ranks in (int(r) for r in args.ranks.split(",")):
        medians, fingerprints = {}, {}
        for backend in backends:
            steps, fingerprint, parameters = run(backend, ranks, args)
            medians[backend] = statistics.median(steps)
            fingerprints[backend] = fingerprint
            print("%-7s %s ranks %d  rank 0 holds %d parameters  step median %8.1f ms  "
                  "best %8.1f ms" % (backend, args.stack, ranks, parameters,
                                     medians[backend] * 1e3, min(steps) * 1e3),
                  flush=True)
        trained = [b for b in backends if b != "none"]
        for backend in trained[1:]:
            worst = max(abs(a - b) for a, b in zip(fingerprints[trained[0]], fingerprints[backend]))
            if worst > 1e-4:
                sys.exit("ddp_bench: %s and %s trained to different parameters (%g)"
                         % (trained[0], backend, worst))
        if "gloo" in medians and "plexus" in medians:
            print("ranks %d  gloo/plexus step time: %.2fx" % (ranks, medians["gloo"] /
                                                              medians["plexus"]), flush=True)
        if "none" in medians:
            for backend in trained:
                print("ranks %d  %s over the floor: %+.1f ms a step" % (
                    ranks, backend, (medians[backend] - medians["none"]) * 1e3), flush=True)


if __name__ == "__main__":
    main()
