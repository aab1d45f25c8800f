"""Elastic data-parallel training with plexus.elastic: peers come and go, training goes on.

Each peer trains the same small MLP on its own shard of a synthetic regression problem. Every step
it (1) lets waiting peers in (are_peers_pending / update_topology), (2) synchronises the model
with sync_shared_state - a newcomer receives it, a diverged peer is corrected - and (3) averages
gradients with all_reduce_multiple_with_retry, which retries by itself when a peer dies mid-step.
The shared state's revision is the step number.

    python3 elastic_training.py --demo            # master + 3 peers; one is SIGKILLed, one joins
    python3 elastic_training.py --peer HOST:PORT  # one peer of a master you started with
                                                  # python3 -m plexus.elastic.master
"""
import argparse
import os
import signal
import subprocess
import sys
import time

import torch

from plexus.elastic import (Attribute, Communicator, DataType, DistributionHint, QuantizationAlgorithm,
                            QuantizationOptions, ReduceDescriptor, ReduceOp, ReduceOpDescriptor,
                            ReduceOperandDescriptor, SharedState, SharedStateSyncStrategy,
                            TensorInfo)

FEATURES = 32


def make_model():
    torch.manual_seed(os.getpid())  # Every peer starts different: the first sync makes them agree.
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 1))


def batch(step, peer_seed):
    """A batch of y = sin(x . w) for a fixed w: the same problem everywhere, other samples."""
    generator = torch.Generator().manual_seed(step * 1000 + peer_seed)
    truth = torch.linspace(-1, 1, FEATURES)
    x = torch.randn(256, FEATURES, generator=generator)
    return x, torch.sin(x @ truth / 4).unsqueeze(1)


def average_gradients(comm, parameters):
    descriptors = []
    for tag, p in enumerate(parameters):
        grad = p.grad.view(-1)
        descriptors.append(ReduceOpDescriptor.from_torch(grad, grad, ReduceDescriptor(
            count=grad.numel(), op=ReduceOp.AVG, tag=tag,
            operand_descriptor=ReduceOperandDescriptor(DataType.FLOAT, DistributionHint.NORMAL),
            quantization_options=QuantizationOptions(DataType.FLOAT, QuantizationAlgorithm.NONE))))
    return comm.all_reduce_multiple_with_retry(descriptors, max_in_flight=4)


def peer(master, steps, joining, wait_for_go):
    model = make_model()
    parameters = list(model.parameters())
    optimizer = torch.optim.SGD(parameters, lr=0.1)
    state = SharedState([TensorInfo.from_torch(p.data, f"param{i}")
                         for i, p in enumerate(parameters)])
    if wait_for_go:  # Demo only: started early (torch's first optimizer takes seconds to load).
        print("ready", flush=True)
        sys.stdin.readline()
    comm = Communicator(master, 0)
    comm.connect(n_attempts=15)
    # A newcomer must not vote with its random weights: it receives the group's state first.
    strategy = SharedStateSyncStrategy.RECEIVE_ONLY if joining else SharedStateSyncStrategy.ENFORCE_POPULAR
    while True:
        if comm.are_peers_pending():
            comm.update_topology()
        comm.sync_shared_state(state, strategy)
        strategy = SharedStateSyncStrategy.ENFORCE_POPULAR
        step = state.revision
        if step >= steps:
            break
        x, y = batch(step, comm.peer_id)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        info = average_gradients(comm, parameters)
        optimizer.step()
        state.revision += 1
        if step % 10 == 0:
            print(f"peer {comm.peer_id} step {step} peers {info.local_world_size} "
                  f"loss {loss.item():.5f}", flush=True)
    print(f"peer {comm.peer_id} done at step {state.revision} "
          f"with {comm.get_attribute(Attribute.LOCAL_WORLD_SIZE)} peers", flush=True)


def start_peer(address, steps, joining):
    """A peer of this example in its own process, waiting for "go" on its stdin."""
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--peer", address,
                             "--steps", str(steps), "--wait-for-go"]
                            + (["--joining"] if joining else []),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ))


def go(process):
    process.stdin.write("go\n")
    process.stdin.flush()


def record_step(line, losses):
    """The step of a peer's "... step S ... loss L" line (its loss noted in `losses`), or None."""
    words = line.split()
    if len(words) >= 8 and words[2] == "step":
        losses[int(words[3])] = float(words[7])
        return int(words[3])
    return None


def follow_first(peers, joined, losses):
    """Echoes the first peer's log; at step 20 SIGKILLs another and lets the newcomer go."""
    killed = None
    for line in peers[0].stdout:
        print(line, end="", flush=True)
        step = record_step(line, losses)
        if step is not None and step >= 20 and killed is None:
            killed = peers[1]
            killed.send_signal(signal.SIGKILL)
            print(f"demo: SIGKILLed a peer at step {step}; a new one joins", flush=True)
            go(joined)
    return killed


def collect(processes, joined, killed, losses):
    """Waits for every peer, noting their losses; the newcomer's step lines."""
    joiner_lines = []
    for p in processes:
        out, _ = p.communicate(timeout=300)
        for line in out.splitlines():
            record_step(line, losses)
        if p is joined:
            joiner_lines = [l for l in out.splitlines() if " step " in l]
        if p.returncode != 0 and p is not killed:
            print(out, file=sys.stderr)
            raise SystemExit(f"demo: a peer failed (exit {p.returncode})")
    return joiner_lines


def demo(steps):
    master = subprocess.Popen([sys.executable, "-m", "plexus.elastic.master",
                               "--listen-address", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ))
    address = master.stdout.readline().split()[-1]
    # Every peer finishes its imports before training starts: on a loaded machine they take
    # longer than a whole run, so a peer started late would train alone, and the newcomer would
    # arrive to find everyone gone.
    joined = start_peer(address, steps, True)
    peers = [start_peer(address, steps, False) for _ in range(3)]
    for p in [joined] + peers:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("demo: a peer did not start")
    for p in peers:
        go(p)
    losses = {}  # step -> loss, from every surviving peer's log
    try:
        killed = follow_first(peers, joined, losses)
        joiner_lines = collect([peers[0], peers[2], joined, killed], joined, killed, losses)
    finally:
        for p in peers + [joined]:
            if p.poll() is None:
                p.kill()
        master.kill()
        master.wait()
    first, last = losses[min(losses)], losses[max(losses)]
    since = joiner_lines[0].split()[3] if joiner_lines else "-"
    print(f"demo: loss {first:.5f} at step {min(losses)} -> {last:.5f} at step {max(losses)}; "
          f"the newcomer logged {len(joiner_lines)} steps, from {since}", flush=True)
    if not last < first / 4:
        raise SystemExit("demo: the loss did not go down")
    if not joiner_lines:
        raise SystemExit("demo: the newcomer never trained")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--peer", metavar="HOST:PORT")
    parser.add_argument("--joining", action="store_true")
    parser.add_argument("--wait-for-go", action="store_true")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    if args.peer:
        peer(args.peer, args.steps, args.joining, args.wait_for_go)
    else:
        demo(args.steps)


if __name__ == "__main__":
    main()
