"""The README's two-rank Python examples (the blocks under `<!-- runs on 2 ranks -->`), run as
the README starts them: two processes with MASTER_ADDR, MASTER_PORT (one the kernel says is
free), WORLD_SIZE and RANK. Each must print "rank R has [3, 3, 3, 3]" in numpy's or a list's
form on both ranks. test_docs runs them against bazel-bin's package; sdk:deb_clean_install_test
runs this file on a clean Debian with the installed packages:

    python3 readme_examples.py README.md

On a torch before 2.5, which looks up no installed backend, a block that makes a "plexus"
group gets `import plexus.torch` first, as the README tells such users to add; on a torch
without libuv (Debian 13's 2.6), where torch's env:// store fails for every backend unless
USE_LIBUV=0, it runs with USE_LIBUV=0, as the README says."""
import os
import re
import socket
import subprocess
import sys

BLOCKS = re.compile(r"<!-- runs on 2 ranks -->\n```python\n(.*?)```", re.S)


def two_rank_blocks(readme_text):
    return BLOCKS.findall(readme_text)


def torch_finds_installed_backends():
    """torch 2.5+ loads the `torch.backends` entry points at import; 1.13 loads none."""
    import torch
    return hasattr(torch, "_import_device_backends")


def makes_a_torch_group(code):
    return 'init_process_group("plexus"' in code


def as_run_here(code):
    """The block as a user of this torch runs it."""
    if makes_a_torch_group(code) and not torch_finds_installed_backends():
        return "import plexus.torch\n" + code
    return code


def environment_here(code):
    """What a user of this torch sets for the block."""
    if makes_a_torch_group(code):
        from plexus._libuv import torch_lacks_libuv
        if torch_lacks_libuv():
            return {"USE_LIBUV": "0"}
    return {}


def run_on_two_ranks(command, cwd=None, timeout=120, extra_env=None):
    """Runs `command` as ranks 0 and 1 of an env:// job; their outputs (stdout and stderr)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   RANK=str(rank), **(extra_env or {}))
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, cwd=cwd))
    try:
        outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    if [p.returncode for p in procs] != [0, 0]:
        raise AssertionError("exit codes %s:\n%s" % ([p.returncode for p in procs],
                                                     "\n".join(outputs)))
    return outputs


def summed(rank, output):
    """Whether `output` says rank `rank` holds [3, 3, 3, 3] (numpy's or a list's print)."""
    return re.search(r"rank %d has \[3\.0?(,? 3\.0?){3}\]" % rank, output) is not None


def run_block(code, directory, name):
    script = os.path.join(directory, name)
    with open(script, "w") as f:
        f.write(as_run_here(code))
    outputs = run_on_two_ranks([sys.executable, script], cwd=directory,
                               extra_env=environment_here(code))
    for rank, output in enumerate(outputs):
        if not summed(rank, output):
            raise AssertionError("%s: rank %d did not print its sum:\n%s" % (name, rank, output))
    return outputs


def main():
    with open(sys.argv[1]) as f:
        blocks = two_rank_blocks(f.read())
    if len(blocks) < 2:
        raise SystemExit("readme_examples: %s has %d two-rank blocks, expected numpy's and "
                         "torch's" % (sys.argv[1], len(blocks)))
    directory = os.path.dirname(os.path.abspath(sys.argv[1]))
    for index, code in enumerate(blocks):
        run_block(code, directory, "readme_example_%d.py" % index)
        print("ok: the README's example %d ran on 2 ranks (%s)"
              % (index, "torch" if "import torch" in code else "numpy"))


if __name__ == "__main__":
    main()
