"""Launchers out of the box: ranks started by torchrun (static rendezvous, where torchrun's
agent serves the store, and c10d), by mpirun and by a Slurm-style environment call
init_process_group(backend) with no rendezvous variables of their own, and every collective
gives the right answer (launched_worker.py). Also: plexus joins a server speaking torch 2.x's
TCPStore protocol (torch_store_v2_server.py, written from the protocol, since only torch 1.13
is installed here)."""
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from multiproc import torchrun_command

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "launched_worker.py")
BYTES = str(1 << 20)
TIMEOUT = 240
LAUNCHER_VARS = ("MASTER_", "RANK", "WORLD_SIZE", "LOCAL_", "GROUP_", "ROLE_", "SLURM_",
                 "OMPI_", "PMI", "PMIX", "TORCHELASTIC")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    """This process's environment without any launcher's variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
    for name in ("TEST_PREMATURE_EXIT_FILE", "XML_OUTPUT_FILE"):
        env.pop(name, None)
    env.update(extra)
    return env


def parse_results(output, world):
    """The RESULT lines of every rank (torchrun --tee prefixes them with the rank's name)."""
    results = {}
    for line in output.splitlines():
        if "RESULT " in line:
            result = json.loads(line[line.index("RESULT ") + 7:])
            results[result["rank"]] = result
    assert sorted(results) == list(range(world)), output[-4000:]
    for result in results.values():
        assert result["world"] == world
        assert not result["failures"], result["failures"]
    return results


def run(argv, env, world):
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=TIMEOUT, cwd=HERE)
    assert done.returncode == 0, "%s exited %d:\n%s" % (argv[0], done.returncode,
                                                       done.stdout[-6000:])
    return parse_results(done.stdout, world)


@pytest.mark.parametrize("backend", ["tcp", "gloo"])
def test_torchrun_static_joins_the_agent_store(backend):
    pytest.importorskip("torch")
    results = run(torchrun_command("--nproc_per_node=3", "--master_addr=127.0.0.1",
                           "--master_port=%d" % free_port(), WORKER, backend, BYTES),
                  clean_env(), 3)
    assert all(r["agent_store"] == "True" for r in results.values()), results
    assert sorted(int(r["launcher_rank"]) for r in results.values()) == [0, 1, 2]


@pytest.mark.parametrize("backend", ["tcp", "gloo"])
def test_torchrun_c10d_rendezvous(backend):
    pytest.importorskip("torch")
    run(torchrun_command("--nnodes=1", "--nproc_per_node=2", "--rdzv_backend=c10d",
                 "--rdzv_endpoint=127.0.0.1:%d" % free_port(), WORKER, backend, BYTES),
        clean_env(), 2)


def test_torchrun_restart_attempts_do_not_collide():
    """A restarted worker group (TORCHELASTIC_RESTART_COUNT) meets in a fresh namespace of the
    agent's store: rank claims of the first attempt do not block the second."""
    pytest.importorskip("torch")
    import datetime
    import torch.distributed as torch_dist
    from plexus import _libuv
    _libuv.stores_without_libuv()  # This process plays torchrun's agent.
    store = torch_dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=30),
                                wait_for_workers=False)
    for attempt in ("0", "1"):
        procs = [subprocess.Popen(
            [sys.executable, WORKER, "tcp", BYTES], cwd=HERE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port), RANK=str(r),
                          WORLD_SIZE="2", TORCHELASTIC_USE_AGENT_STORE="True",
                          TORCHELASTIC_RESTART_COUNT=attempt)) for r in range(2)]
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), "\n".join(outputs)[-6000:]
        parse_results("\n".join(outputs), 2)
    # Each attempt claimed its ranks in its own namespace of the agent's store.
    for attempt in ("0", "1"):
        for rank in range(2):
            assert store.get("plexus/attempt_%s/world/rank_owner/%d" % (attempt, rank))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
@pytest.mark.parametrize("backend", ["tcp", "gloo", "mpi"])
def test_mpirun_without_master_addr(backend):
    argv = ["mpirun", "-np", "3", "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["-x", "PYTHONPATH", sys.executable, WORKER, backend, BYTES]
    run(argv, clean_env(), 3)


@pytest.mark.parametrize("backend", ["tcp", "gloo"])
def test_slurm_environment_without_master_addr(backend):
    """What srun gives each task: SLURM_PROCID/SLURM_NTASKS and the step's node list; the store
    lives on the list's first node. The port is given (MASTER_PORT) so the test never uses a
    fixed one; the port derived from SLURM_JOB_ID is covered by launcher_env_test and the
    multi-host test."""
    port = str(free_port())
    procs = []
    for rank in range(3):
        env = clean_env(SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_PROCID=str(rank),
                        SLURM_NTASKS="3", SLURM_LOCALID=str(rank),
                        SLURM_STEP_NODELIST="localhost", SLURM_JOB_NODELIST="localhost",
                        MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, WORKER, backend, BYTES], env=env,
                                      cwd=HERE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outputs)[-6000:]
    parse_results("\n".join(outputs), 3)


def test_torch2_protocol_store():
    """A server that speaks only torch 2.x's TCPStore protocol (VALIDATE first; it closes
    connections that start otherwise) serves as torchrun's agent store."""
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "torch_store_v2_server.py")],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        assert port.isdigit(), port
        procs = [subprocess.Popen(
            [sys.executable, WORKER, "tcp", BYTES], cwd=HERE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r),
                          WORLD_SIZE="2", TORCHELASTIC_USE_AGENT_STORE="True"))
            for r in range(2)]
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), "\n".join(outputs)[-6000:]
        parse_results("\n".join(outputs), 2)
    finally:
        server.kill()
        server.wait()


def test_env_without_any_launcher_says_what_to_set():
    done = subprocess.run([sys.executable, "-c",
                           "import plexus; plexus.init_process_group('tcp', rank=0, "
                           "world_size=2)"], env=clean_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    assert done.returncode != 0
    assert "MASTER_ADDR and MASTER_PORT" in done.stdout, done.stdout
    assert "mpirun" in done.stdout and "Slurm" in done.stdout, done.stdout
