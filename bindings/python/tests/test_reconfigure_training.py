"""examples/reconfigure_training.py's demo: a training loop on torch's reconfigure API survives
a SIGKILLed and a SIGSTOPped worker and a replacement joining, and every worker ends with
bitwise the parameters of a one-process replay of the same steps and memberships."""
import json
import os
import subprocess
import sys

import pytest
import torch.distributed as dist

pytestmark = pytest.mark.skipif(not hasattr(dist, "_reconfigure"),
                                reason="this torch has no c10d reconfigure API (2.14 brought it)")

EXAMPLE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "examples",
                       "reconfigure_training.py")


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_training_survives_a_lost_worker_and_takes_a_new_one(fault):
    done = subprocess.run([sys.executable, EXAMPLE, "--demo", "--fault", fault],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["workers_equal"] and result["replay_equal"], result
    # A kill is seen at once; a freeze within tcp's heartbeat (5 s), not torch's 30 s timeout.
    assert result["next_step_after_s"] < (5 if fault == "kill" else 12), result
    assert result["joiner_first_step_after_reconfigure_s"] < 5, result
