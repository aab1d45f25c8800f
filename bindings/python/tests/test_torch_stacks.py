"""What torch users run on top of a backend, on plexus against gloo, 2 ranks on the CPU:
functional collectives (what DTensor and tensor parallelism call), DTensor on a DeviceMesh,
tensor-parallel Linear layers, FSDP, fully_shard, distributed checkpoint save and load, and DDP
under torchrun.
Each scenario runs on "plexus" and on "gloo"; results must be the same, and are also checked
against a reference computed locally. Where torch itself refuses something on the CPU (on gloo
too), the test asserts plexus fails the same way, so it notices when torch starts accepting
it. Scenarios skip, saying why, on a torch without the library (torch 1.13 has no DTensor)."""
import importlib
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import multiproc
from multiproc import torchrun_command

torch = pytest.importorskip("torch")

BACKENDS = ("plexus", "gloo")


def has(module, attribute=None):
    """Whether `module` imports here (and has `attribute`). torch 1.13's checkpoint package does
    not even import on Python 3.11 (ValueError from its dataclasses)."""
    try:
        imported = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - any failure to import means "not here".
        return False
    return attribute is None or hasattr(imported, attribute)


def outcome(call):
    """("ok", value) or ("raised", exception class name, first line of the message)."""
    try:
        return ("ok", call())
    except Exception as error:  # noqa: BLE001 - the outcome is what is compared.
        return ("raised", type(error).__name__, str(error).splitlines()[0] if str(error) else "")


def run_both(fn, *args):
    """fn's per-rank results on plexus and on gloo (gloo's ranks skip destroy_process_group,
    where torch 2.6's gloo hangs now and then; its teardown is not compared)."""
    return {backend: multiproc.run_world(fn, 2, *args, backend=backend, init="torch",
                                         destroy=backend == "plexus")
            for backend in BACKENDS}


def assert_same(reports):
    """plexus's results equal gloo's, value for value."""
    plexus, gloo = reports["plexus"], reports["gloo"]
    assert plexus == gloo, "plexus %r\ngloo   %r" % (plexus, gloo)


# --- functional collectives -------------------------------------------------------------------

def functional(rank, world):
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    group = dist.group.WORLD
    x = torch.arange(4, dtype=torch.float32) + 10 * rank
    report = {
        "all_reduce": funcol.all_reduce(x, "sum", group).tolist(),
        "all_gather": funcol.all_gather_tensor(x, 0, group).tolist(),
        "reduce_scatter": funcol.reduce_scatter_tensor(x, "sum", 0, group).tolist(),
        "all_to_all": funcol.all_to_all_single(x, None, None, group).tolist(),
        "broadcast": funcol.broadcast(x, 1, group).tolist(),
    }
    # The coalesced forms (what FSDP2 and DTensor's redistribute issue for several tensors).
    y = torch.ones(2) * (rank + 1)
    report["all_gather_coalesced"] = [t.tolist() for t in
                                      funcol.all_gather_into_tensor_coalesced([x, y], group)]
    report["reduce_scatter_coalesced"] = [
        t.tolist() for t in funcol.reduce_scatter_tensor_coalesced([x, y], "sum",
                                                                   [0, 0], group)]
    return report


@pytest.mark.skipif(not has("torch.distributed._functional_collectives"),
                    reason="this torch has no torch.distributed._functional_collectives (1.13)")
def test_functional_collectives_as_gloo():
    reports = run_both(functional)
    assert_same(reports)
    x = [np.arange(4) + 10 * r for r in range(2)]
    for rank, report in enumerate(reports["plexus"]):
        assert report["all_reduce"] == (x[0] + x[1]).tolist()
        assert report["all_gather"] == np.concatenate(x).tolist()
        assert report["reduce_scatter"] == (x[0] + x[1])[2 * rank:2 * rank + 2].tolist()
        assert report["all_to_all"] == np.concatenate([x[0][2 * rank:2 * rank + 2],
                                                       x[1][2 * rank:2 * rank + 2]]).tolist()
        assert report["broadcast"] == x[1].tolist()
        assert report["all_gather_coalesced"][1] == [1.0, 1.0, 2.0, 2.0]
        assert report["reduce_scatter_coalesced"][1] == [3.0]


# --- DTensor on a DeviceMesh, tensor parallelism --------------------------------------------

def dtensor(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)  # The same global tensor on every rank.
    full = torch.randn(6, 4)
    sharded = distribute_tensor(full, mesh, [Shard(0)])
    report = {
        "local": sharded.to_local().tolist(),
        "full": sharded.full_tensor().tolist(),
        "replicated": sharded.redistribute(mesh, [Replicate()]).to_local().tolist(),
        "resharded": sharded.redistribute(mesh, [Shard(1)]).to_local().tolist(),
        "sum": (sharded * 2).sum().full_tensor().item(),
    }
    # A two-layer MLP, first layer column-wise, second row-wise (Megatron style).
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    torch.manual_seed(2)
    inputs = torch.randn(5, 4)
    out = model(inputs)
    out.sum().backward()
    report["tp_out"] = out.tolist()
    report["tp_grad"] = model[0].weight.grad.full_tensor().tolist()
    return report


@pytest.mark.skipif(not has("torch.distributed.tensor.parallel") or
                    not has("torch.distributed.device_mesh"),
                    reason="this torch has no DTensor/DeviceMesh (1.13)")
def test_dtensor_and_tensor_parallel_as_gloo():
    reports = run_both(dtensor)
    assert_same(reports)
    torch.manual_seed(0)
    full = torch.randn(6, 4)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch.manual_seed(2)
    inputs = torch.randn(5, 4)
    out = model(inputs)
    out.sum().backward()
    for rank, report in enumerate(reports["plexus"]):
        np.testing.assert_allclose(report["full"], full.numpy(), rtol=0, atol=0)
        np.testing.assert_allclose(report["local"], full[3 * rank:3 * rank + 3].numpy())
        np.testing.assert_allclose(report["replicated"], full.numpy())
        np.testing.assert_allclose(report["resharded"], full[:, 2 * rank:2 * rank + 2].numpy())
        np.testing.assert_allclose(report["sum"], 2 * full.sum().item(), rtol=1e-5)
        np.testing.assert_allclose(report["tp_out"], out.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(report["tp_grad"], model[0].weight.grad.numpy(), rtol=1e-5,
                                   atol=1e-6)


# --- FSDP ---------------------------------------------------------------------------------------

def train_steps(model, rank, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model(torch.randn(4, 6, generator=generator)).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(round(loss.item(), 5))
    return losses


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def fsdp(rank, world):
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    def train():
        model = FSDP(small_model(), device_id=torch.device("cpu"))
        losses = train_steps(model, rank)
        config = FullStateDictConfig()  # offload_to_cpu=True fails on a CPU model, on gloo too.
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):
            state = {k: v.tolist() for k, v in model.state_dict().items()}
        return losses, state
    return outcome(train)


def fully_shard(rank, world):
    try:
        from torch.distributed.fsdp import fully_shard as shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard as shard

    def train():
        model = small_model()
        for layer in (model[0], model[2]):
            shard(layer)
        shard(model)
        losses = train_steps(model, rank)
        return losses, {k: v.full_tensor().tolist() for k, v in model.state_dict().items()}
    return outcome(train)


def ddp_reference(rank, world):
    """The same training with DDP on gloo: what FSDP must match (the same averaged gradients)."""
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(small_model())
    losses = train_steps(model, rank)
    return losses, {k: v.tolist() for k, v in model.module.state_dict().items()}


def close(a, b):
    np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.skipif(not has("torch.distributed.fsdp"),
                    reason="torch.distributed.fsdp does not import here (1.13 on Python 3.11)")
def test_fsdp_trains_as_on_gloo():
    reports = run_both(fsdp)
    plexus, gloo = reports["plexus"], reports["gloo"]
    if gloo[0][0] == "raised":  # torch refuses it on the CPU: plexus must fail alike.
        assert [r[:2] for r in plexus] == [r[:2] for r in gloo], (plexus, gloo)
        pytest.skip("torch refuses FSDP on the CPU on gloo too: %s" % (gloo[0][2],))
    assert_same(reports)
    assert_matches_ddp(plexus)


def assert_matches_ddp(plexus):
    """Sharded training's losses and full parameters are DDP's (on gloo): the same averaged
    gradients, however they were reduced."""
    reference = multiproc.run_world(ddp_reference, 2, backend="gloo", init="torch",
                                    destroy=False)
    for (status, (losses, state)), (ref_losses, ref_state) in zip(plexus, reference):
        assert status == "ok"
        close(losses, ref_losses)
        for name, value in ref_state.items():
            close(state["_fsdp_wrapped_module." + name] if name not in state else state[name],
                  value)


@pytest.mark.skipif(not (has("torch.distributed.fsdp") or
                         has("torch.distributed._composable.fsdp")),
                    reason="this torch has no fully_shard (FSDP2), or its FSDP does not import")
def test_fully_shard_on_cpu_as_on_gloo():
    reports = run_both(fully_shard)
    plexus, gloo = reports["plexus"], reports["gloo"]
    if gloo[0][0] == "raised":
        # torch 2.6 refuses it on the CPU before any collective ("'Stream' object has no
        # attribute 'record_event'"): plexus must fail the same way. When torch accepts it,
        # this turns into the comparison below.
        assert [r[:2] for r in plexus] == [r[:2] for r in gloo], (plexus, gloo)
        pytest.skip("torch refuses fully_shard on the CPU on gloo too: %s" % (gloo[0][2],))
    assert_same(reports)
    assert_matches_ddp(plexus)


# --- distributed checkpoint -------------------------------------------------------------------

def checkpoint(rank, world, directory):
    import torch.distributed.checkpoint as dcp
    model = small_model()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.5)  # Not what a fresh model starts with.
    state = {"model": model.state_dict()}
    dcp.save(state, checkpoint_id=directory + "/sync")
    fresh = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    loaded = {"model": fresh.state_dict()}
    dcp.load(loaded, checkpoint_id=directory + "/sync")
    report = {"loaded": {k: v.tolist() for k, v in loaded["model"].items()}}
    if hasattr(dcp, "async_save"):
        dcp.async_save(state, checkpoint_id=directory + "/async").result()
        again = {"model": torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                                              torch.nn.Linear(8, 2)).state_dict()}
        dcp.load(again, checkpoint_id=directory + "/async")
        report["async"] = {k: v.tolist() for k, v in again["model"].items()}
    return report


@pytest.mark.skipif(not has("torch.distributed.checkpoint", "save"),
                    reason="torch.distributed.checkpoint has no save() here (1.13's does not "
                    "import on Python 3.11)")
def test_distributed_checkpoint_saves_and_loads_as_on_gloo(tmp_path):
    reports = {backend: multiproc.run_world(checkpoint, 2, str(tmp_path / backend),
                                            backend=backend, init="torch",
                                            destroy=backend == "plexus")
               for backend in BACKENDS}
    assert_same(reports)
    # Replicated keys are saved once (by one rank); every rank loads them back.
    model = small_model()
    expected = {k: (v + 1.5).tolist() for k, v in model.state_dict().items()}
    for report in reports["plexus"]:
        for key, value in expected.items():
            close(report["loaded"][key], value)
            if "async" in report:
                close(report["async"][key], value)


# --- the step-time benchmark -------------------------------------------------------------------

@pytest.mark.parametrize("stack", [
    pytest.param("fsdp", marks=pytest.mark.skipif(
        not has("torch.distributed.fsdp"),
        reason="torch.distributed.fsdp does not import here (1.13 on Python 3.11)")),
    pytest.param("tp", marks=pytest.mark.skipif(
        not has("torch.distributed.tensor.parallel") or not has("torch.distributed.device_mesh"),
        reason="this torch has no DTensor/DeviceMesh (1.13)")),
])
def test_step_bench_runs_each_stack_with_its_floor(stack):
    """examples/ddp_bench.py --stack: the floor, gloo and plexus run, and plexus trains to
    gloo's parameters (the bench exits otherwise)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                          "ddp_bench.py")
    done = subprocess.run([sys.executable, script, "--stack=" + stack, "--ranks=2",
                           "--widths=16,32,8", "--steps=2", "--warmup=1",
                           "--backends=none,gloo,plexus"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for backend in ("none", "gloo", "plexus"):
        assert "%-7s %s ranks 2  rank 0 holds" % (backend, stack) in done.stdout, done.stdout
    assert "ranks 2  gloo/plexus step time:" in done.stdout, done.stdout
    assert "ranks 2  plexus over the floor:" in done.stdout, done.stdout


# --- torchrun ----------------------------------------------------------------------------------

def torchrun_ddp(backend):
    """Every rank's RESULT from torchrun --nproc-per-node 2 running torchrun_ddp_worker.py, as
    a user starts it (python3 -m plexus.torchrun where torch has no libuv: docs/python.md)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = torchrun_command("--nproc_per_node=2", "--master_addr=127.0.0.1",
                               "--master_port=%d" % port,
                               os.path.join(here, "torchrun_ddp_worker.py"), backend)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MASTER_", "RANK", "WORLD_SIZE", "LOCAL_", "TORCHELASTIC"))}
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-6000:]
    results = {}
    for line in done.stdout.splitlines():
        if "RESULT " in line:
            result = json.loads(line[line.index("RESULT ") + 7:])
            results[result["rank"]] = result
    assert sorted(results) == [0, 1], done.stdout[-4000:]
    return [results[0], results[1]]


@pytest.mark.skipif(not os.path.exists("/usr/bin/torchrun"), reason="no /usr/bin/torchrun")
def test_ddp_under_torchrun_trains_as_on_gloo():
    plexus, gloo = torchrun_ddp("plexus"), torchrun_ddp("gloo")
    for mine, theirs in zip(plexus, gloo):
        assert (mine["backend"], mine["world"]) == ("plexus", 2), mine
        assert mine["local_rank"] == mine["rank"]
        close(mine["losses"], theirs["losses"])
        for name, value in theirs["parameters"].items():
            close(mine["parameters"][name], value)
    # DDP keeps the replicas equal: both ranks end with the same parameters.
    assert plexus[0]["parameters"] == plexus[1]["parameters"]
