"""The tutorial-style examples (examples/tutorial.py, written for `import plexus as dist`) give
the same results on plexus as the same code on torch.distributed with gloo."""
import os
import subprocess
import sys

import numpy as np
import pytest

import multiproc

torch = pytest.importorskip("torch")
import tutorial  # noqa: E402 - needs torch


def run_examples(rank, size, api):
    if api == "torch":
        import torch.distributed
        tutorial.dist = torch.distributed
    return {example.__name__: example(rank, size) for example in tutorial.EXAMPLES}


def test_examples_match_torch_distributed():
    ours = multiproc.run_world(run_examples, 4, "plexus")
    theirs = multiproc.run_world(run_examples, 4, "torch", init="torch", backend="gloo")
    for rank in range(4):
        assert ours[rank].keys() == theirs[rank].keys()
        for name in ours[rank]:
            mine, reference = ours[rank][name], theirs[rank][name]
            if name == "train_by_hand":  # Sums in another order: equal to rounding.
                for a, b in zip(mine, reference):
                    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
            else:
                assert mine == reference, (rank, name)
    assert [r["ring"] for r in ours] == [[0.0, 10.0, 20.0]] * 4  # sum of (rank + 1) * [0, 1, 2]
    assert [r["group_all_reduce"] for r in ours] == [[2.0], [2.0], [1.0], [1.0]]
    assert [r["point_to_point"] for r in ours][:2] == [[1.0], [1.0]]
    assert ours[0]["collectives"] == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0]


def test_script_runs():
    script = os.path.join(os.path.dirname(tutorial.__file__), "tutorial.py")
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "rank 3 ring: [0.0, 10.0, 20.0]" in done.stdout
