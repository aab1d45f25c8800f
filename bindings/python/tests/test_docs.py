"""The documentation's examples run as written. Every ```python block of README.md and docs/
carries a marker on the line above it: `<!-- runs -->` (run here, alone, in a fresh
interpreter), `<!-- runs on 2 ranks -->` (run here as two env:// ranks), or `<!-- from PATH -->`
(a piece of PATH, a program or file of this repository that a test runs). The README's C++
block must be docs/examples/cpp/quick_start.cc, which runs here on two ranks."""
import os
import re
import subprocess
import sys

import pytest

import readme_examples

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


def _readme_cpp_block():
    (block,) = re.findall(r"```cpp\n(.*?)```", _read("README.md"), re.S)
    return block


@pytest.mark.parametrize("index", range(2))
def test_the_readme_python_examples_run_on_two_ranks(index):
    """numpy's and torch's: torch's makes a "plexus" group with no import of plexus where torch
    finds the package's entry points (2.5+, bazel-bin's package has them too)."""
    blocks = readme_examples.two_rank_blocks(_read("README.md"))
    assert len(blocks) == 2, "README.md: expected two <!-- runs on 2 ranks --> blocks"
    if "torch" in blocks[index]:
        pytest.importorskip("torch")
    readme_examples.run_block(blocks[index], os.environ["TEST_TMPDIR"], "readme_%d.py" % index)


def test_the_readme_cpp_example_is_the_built_one_and_runs_on_two_ranks():
    source = _read("docs", "examples", "cpp", "quick_start.cc")
    # The file's first line says what it is; the README shows the rest.
    assert _readme_cpp_block() == source.split("\n", 1)[1], "README.md's C++ block drifted"
    outputs = readme_examples.run_on_two_ranks([os.path.join(ROOT, "docs", "quick_start")],
                                               cwd=os.environ.get("TEST_TMPDIR"))
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
