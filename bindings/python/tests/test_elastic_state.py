"""plexus.elastic's sync_shared_state from Python: torch and numpy tensors by reference, a
diverged peer adopting the popular state, a peer joining mid-run that receives the state, the
revision written back, and the Result of an irreconcilable ballot."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
from test_elastic import start_master  # noqa: E402

PEER = r"""
import sys, time
import numpy as np, torch
from plexus.elastic import (Attribute, Communicator, PCCLError, Result, SharedState,
                            SharedStateSyncStrategy, TensorInfo)
master, peer = sys.argv[1], int(sys.argv[2])

def grow(comm, world):
    deadline = time.time() + 60
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < world:
        assert time.time() < deadline
        comm.update_topology()
        time.sleep(0.01)

weights = torch.zeros(1000, dtype=torch.float32)
bias = np.zeros(10, dtype=np.float64)
state = SharedState([TensorInfo.from_torch(weights, "weights"),
                     TensorInfo.from_numpy(bias, "bias")])
comm = Communicator(master, 0)
comm.connect(n_attempts=15)
if peer < 3:
    grow(comm, 3)
    weights += torch.arange(1000, dtype=torch.float32) + (100 if peer == 2 else 0)
    bias[:] = 1.5
    state.revision = 4
    info = comm.sync_shared_state(state)
    assert state.revision == 4
    assert torch.equal(weights, torch.arange(1000, dtype=torch.float32)), peer
    assert (info.rx_bytes > 0) == (peer == 2), (peer, info)
    # Two SEND_ONLY peers that disagree: every peer gets the error, nothing changes.
    if peer < 2:
        weights[0] = 50 + peer
    try:
        comm.sync_shared_state(state, SharedStateSyncStrategy.SEND_ONLY)
        raise SystemExit("disagreeing SEND_ONLY peers were accepted")
    except PCCLError as error:
        assert error.result == Result.INVALID_USAGE or "SEND_ONLY" in str(error), error
    weights[0] = 0
    # A quantized all-reduce: a quarter of the bytes on the wire, the same bytes on every peer.
    from plexus.elastic import (DataType, QuantizationAlgorithm, QuantizationOptions, ReduceOp)
    import hashlib
    x = np.linspace(-1, 1, 10000, dtype=np.float32) * (peer + 1)
    exact = np.linspace(-1, 1, 10000, dtype=np.float64) * 6
    info = comm.all_reduce(x, x, op=ReduceOp.SUM, tag=7, quantization_options=QuantizationOptions(
        DataType.UINT8, QuantizationAlgorithm.MIN_MAX))
    assert np.abs(x - exact).max() < (2 + 4 + 6) * 2 / 255, np.abs(x - exact).max()
    assert info.tx_bytes < 2 * 10000 * 4 / 4, info
    print("Q " + hashlib.sha256(x.tobytes()).hexdigest(), flush=True)
    # One training step, then the joiner comes in and receives the state.
    weights += 1
    state.push_revision()
    print("ready", flush=True)
    grow(comm, 4)
    comm.sync_shared_state(state)
else:
    info = comm.sync_shared_state(state, SharedStateSyncStrategy.RECEIVE_ONLY)
    assert info.rx_bytes >= 1000 * 4 + 10 * 8, info
assert state.revision == 5, state.revision
assert torch.equal(weights, torch.arange(1000, dtype=torch.float32) + 1), peer
assert (bias == 1.5).all(), bias
print("OK", flush=True)
"""


def test_state_reaches_the_diverged_peer_and_a_joiner():
    proc, address = start_master()
    try:
        peers = [subprocess.Popen([sys.executable, "-c", PEER, address, str(p)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for p in range(3)]
        # The joiner starts once the first three have synced (they print "ready").
        digests = set()
        for p in peers:
            line = p.stdout.readline()
            assert line.startswith("Q "), line + p.stdout.read()
            digests.add(line)
            line = p.stdout.readline()
            assert "ready" in line, line + p.stdout.read()
        assert len(digests) == 1, digests
        joiner = subprocess.Popen([sys.executable, "-c", PEER, address, "3"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for p in peers + [joiner]:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0 and "OK" in out, out
    finally:
        proc.kill()
        proc.wait()


def test_bad_shared_state_is_refused():
    from plexus.elastic import Communicator, SharedState, TensorInfo
    import numpy as np
    with pytest.raises(ValueError):
        SharedState([])
    with pytest.raises(ValueError):
        TensorInfo.from_numpy(np.zeros((4, 4))[:, 1], "strided")
    with pytest.raises(ValueError):
        TensorInfo("raw", 0, numel=4, dtype=None)
    proc, address = start_master()
    try:
        comm = Communicator(address, 0)
        comm.connect(n_attempts=5)
        a = np.zeros(4, dtype=np.float32)
        from plexus.elastic import PCCLError
        with pytest.raises(PCCLError, match="appears twice"):
            comm.sync_shared_state(SharedState([TensorInfo.from_numpy(a, "x"),
                                                TensorInfo.from_numpy(a, "x")]))
        state = SharedState([TensorInfo.from_numpy(a, "x")])
        state.revision = 3
        assert comm.sync_shared_state(state).rx_bytes == 0  # Alone: nothing to move.
        assert state.revision == 3
    finally:
        proc.kill()
        proc.wait()


def test_training_example_survives_a_kill_and_takes_a_newcomer():
    """examples/elastic_training.py --demo: 3 peers, one SIGKILLed, one joins; loss goes down."""
    example = os.path.join(HERE, "..", "examples", "elastic_training.py")
    done = subprocess.run([sys.executable, example, "--demo"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "SIGKILLed a peer" in done.stdout
    assert "the newcomer logged" in done.stdout, done.stdout[-2000:]
