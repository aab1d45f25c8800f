"""The documentation's examples run as written. Every ```python block of README.md and docs/
carries a marker on the line above it: `<!-- runs -->` (run here, alone, in a fresh
interpreter), `<!-- runs on 2 ranks -->` (run here as two env:// ranks), or `<!-- from PATH -->`
(a piece of PATH, a program or file of this repository that a test runs). The README's C++
block must be docs/examples/cpp/quick_start.cc, which runs here on two ranks."""
import os
import re
import socket
import subprocess
import sys

import pytest

ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])


def _read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


MARKED = re.compile(r"(?:<!-- (runs|runs on 2 ranks|from [^ ]+) -->\n)?```python\n(.*?)```", re.S)


def _pages():
    pages = ["README.md"]
    pages += ["docs/" + name for name in sorted(os.listdir(os.path.join(ROOT, "docs")))
              if name.endswith(".md")]
    return pages


def marked_blocks():
    """(page, marker or None, code) for every python block of the documentation."""
    return [(page, marker or None, code) for page in _pages()
            for marker, code in MARKED.findall(_read(page))]


def blocks():
    """The blocks that run alone."""
    return [code for _, marker, code in marked_blocks() if marker == "runs"]


def test_every_python_block_runs_or_names_where_it_comes_from():
    pages = {page for page, _, _ in marked_blocks()}
    assert {"README.md", "docs/python.md", "docs/elastic.md"} <= pages, pages
    for page, marker, code in marked_blocks():
        assert marker is not None, "%s: a python block without a marker:\n%s" % (page, code)
        if marker.startswith("from "):
            path = marker[len("from "):]
            assert os.path.exists(os.path.join(ROOT, path)), "%s: %s does not exist" % (page, path)


def _readme_block(language):
    (block,) = re.findall(r"```%s\n(.*?)```" % language, _read("README.md"), re.S)
    return block


def _two_ranks(command):
    """Runs `command` as ranks 0 and 1 of an env:// job; their outputs."""
    with socket.socket() as probe:  # A port the kernel says is free, for MASTER_PORT.
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   RANK=str(rank))
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      cwd=os.environ.get("TEST_TMPDIR")))
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    return outputs


def test_the_readme_python_example_runs_on_two_ranks():
    script = os.path.join(os.environ["TEST_TMPDIR"], "all_reduce.py")
    with open(script, "w") as f:
        f.write(_readme_block("python"))
    outputs = _two_ranks([sys.executable, script])
    for rank, output in enumerate(outputs):
        assert "rank %d has [3. 3. 3. 3.]" % rank in output, output


def test_the_readme_cpp_example_is_the_built_one_and_runs_on_two_ranks():
    source = _read("docs", "examples", "cpp", "quick_start.cc")
    # The file's first line says what it is; the README shows the rest.
    assert _readme_block("cpp") == source.split("\n", 1)[1], "README.md's C++ block drifted"
    outputs = _two_ranks([os.path.join(ROOT, "docs", "quick_start")])
    for rank, output in enumerate(outputs):
        assert "rank %d: OK 3" % rank in output, output


def test_there_are_examples():
    assert len(blocks()) >= 6


@pytest.mark.parametrize("index", range(len(blocks())))
def test_example_runs(index):
    code = blocks()[index]
    if "torch" in code:
        pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=os.environ.get("TEST_TMPDIR"))
    assert done.returncode == 0, "example %d failed:\n%s\n%s" % (index, code, done.stderr)
