"""Every ```python block in docs/python.md runs as written (each in a fresh interpreter)."""
import os
import re
import subprocess
import sys

import pytest


def blocks():
    root = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    with open(os.path.join(root, "docs", "python.md")) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_there_are_examples():
    assert len(blocks()) >= 4


@pytest.mark.parametrize("index", range(len(blocks())))
def test_example_runs(index):
    code = blocks()[index]
    if "torch" in code:
        pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=os.environ.get("TEST_TMPDIR"))
    assert done.returncode == 0, "example %d failed:\n%s\n%s" % (index, code, done.stderr)
