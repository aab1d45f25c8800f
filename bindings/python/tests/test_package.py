"""The wheel: well-formed (RECORD digests match), installable with pip where pip exists, and
the installed package imports and runs a collective."""
import base64
import csv
import glob
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile

import pytest


def wheel_path():
    root = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    (path,) = glob.glob(os.path.join(root, "bindings/python/plexus-*.whl"))
    return path


def test_wheel_record_matches_contents():
    with zipfile.ZipFile(wheel_path()) as wheel:
        names = set(wheel.namelist())
        assert "plexus/__init__.py" in names and "plexus/_plexus.so" in names
        assert "plexus/torch.py" in names
        (record_name,) = [n for n in names if n.endswith(".dist-info/RECORD")]
        rows = list(csv.reader(io.StringIO(wheel.read(record_name).decode())))
        assert {row[0] for row in rows} == names
        for name, digest, size in rows:
            if name == record_name:
                continue
            data = wheel.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == "sha256=" + expected.decode() and int(size) == len(data), name
        wheel_info = wheel.read(record_name.replace("RECORD", "WHEEL")).decode()
        assert "Root-Is-Purelib: false" in wheel_info


def test_installed_wheel_imports_and_runs():
    target = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if pip.returncode == 0:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                               "--target", target, wheel_path()], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    else:
        with zipfile.ZipFile(wheel_path()) as wheel:
            wheel.extractall(target)
        os.chmod(os.path.join(target, "plexus", "_plexus.so"), 0o755)
    code = ("import numpy, plexus\n"
            "plexus.init_process_group('gloo', store=plexus.HashStore(), rank=0, world_size=1)\n"
            "x = numpy.arange(3.0); plexus.all_reduce(x); print(plexus.__file__, x.sum())\n"
            "plexus.destroy_process_group()\n")
    env = dict(os.environ, PYTHONPATH=target)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(os.path.join(target, "plexus")) and "3.0" in done.stdout
