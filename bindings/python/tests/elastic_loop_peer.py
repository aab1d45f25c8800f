"""A peer that trains in one of the loop shapes elastic users write, for test_elastic_loops.py.

Shapes (written for plexus from PCCL's documented loops, not copied):
  pccl    - update_topology() from the second iteration on (a newcomer enters with
            sync_shared_state), waiting while alone; PCCL's end-to-end peer tests do this.
  plexus  - `if are_peers_pending(): update_topology()` at the top of every iteration.
  idiom   - `while world < 2: update_topology()` first, then a random number of extra
            are_peers_pending() / update_topology() calls before each step, and all-reduces
            retried until they succeed (so peers' call counts differ).

Every step: sync_shared_state (state: `w`, revision), one all-reduce of this peer's value
(a distinct power of two, so the sum names who took part), w += sum, revision + 1. The loop
ends once the revision reaches --steps in a step that ran over --target peers (a decision all
peers of that all-reduce share). Each step prints one JSON line; the last line is DONE.
"""
import argparse
import json
import random
import sys
import time

import numpy as np

from plexus.elastic import (Attribute, Communicator, PCCLError, ReduceOp, SharedState,
                            TensorInfo)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--shape", choices=["pccl", "plexus", "idiom"], required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--value", type=int, required=True)  # The bit this peer contributes.
    parser.add_argument("--state-elements", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    # Ends instead after this many steps alone that follow a step with company.
    parser.add_argument("--alone-after-company", type=int, default=0)
    # Says "ready" once imported and set up, and connects only when a line comes on stdin: the
    # test then decides when the peer arrives, whatever its imports cost on this machine.
    parser.add_argument("--wait-for-go", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    w = np.random.default_rng(args.seed).random(args.state_elements)  # Differs per peer.
    state = SharedState([TensorInfo.from_numpy(w, "w")])
    if args.wait_for_go:
        print("ready", flush=True)
        sys.stdin.readline()
    comm = Communicator(args.master, 0, operation_timeout=60, accept_timeout=120)
    comm.connect(n_attempts=15)
    world = comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
    print(json.dumps({"connected": world}), flush=True)

    if args.shape == "idiom":
        while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < 2:
            comm.update_topology()
            time.sleep(0.01)

    contribution = np.full(16, float(args.value))
    result = np.zeros(16)
    i = 0
    had_company, alone = False, 0
    while True:
        if args.shape == "pccl":
            if i > 0 or world == 1:
                comm.update_topology()
        elif args.shape == "plexus":
            if comm.are_peers_pending():
                comm.update_topology()
        else:
            for _ in range(rng.randrange(4)):
                if rng.random() < 0.5:
                    comm.are_peers_pending()
                else:
                    comm.update_topology()
            if comm.are_peers_pending():
                comm.update_topology()
        world = comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
        if world < 2 and args.shape == "pccl":
            time.sleep(0.01)  # PCCL's loop waits for company.
            continue

        print(json.dumps({"sync": state.revision}), flush=True)
        info = comm.sync_shared_state(state)
        revision = state.revision
        failures = 0
        while True:
            handle = comm.all_reduce_async(contribution, result, op=ReduceOp.SUM, tag=0)
            ok, status, reduced = handle.wait()
            if ok:
                break
            failures += 1
            if args.shape != "idiom" and failures > 50:
                raise RuntimeError("all_reduce keeps failing: %s" % status)
        # Read right after wait(): the epoch the all-reduce ran in, whoever left since.
        attribute = comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
        total = float(result[0])
        assert (result == total).all(), result
        w += total
        print(json.dumps({"r": revision, "sum": total, "world": reduced.local_world_size,
                          "attr": attribute, "rx": info.rx_bytes, "failures": failures,
                          "shm": comm.shared_memory_peers}),
              flush=True)
        state.revision = revision + 1
        i += 1
        if args.alone_after_company:
            had_company = had_company or reduced.local_world_size > 1
            alone = alone + 1 if had_company and reduced.local_world_size == 1 else 0
            if alone >= args.alone_after_company:
                break
        elif state.revision >= args.steps and reduced.local_world_size >= args.target:
            break
    print("DONE " + json.dumps({"revision": state.revision, "w": float(w[0])}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except PCCLError as error:
        print("PEER FAILED: %s" % error, flush=True)
        sys.exit(3)
