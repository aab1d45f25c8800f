"""The package as users get it: the wheel well-formed (RECORD digests match), installable with
pip where pip exists, and the installed package imports and runs a collective; the entry points
through which torch finds "plexus" without an import (in bazel-bin's package as in the wheel and
the .deb), lazy and harmless at `import torch`; python3-plexus's contents and Depends."""
import base64
import csv
import glob
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import pytest

ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
PACKAGE_DIR = os.path.join(ROOT, "bindings/python/plexus_pkg")


def wheel_path():
    (path,) = glob.glob(os.path.join(ROOT, "bindings/python/plexus-*.whl"))
    return path


def python(code, **env):
    """Runs `code` in a fresh interpreter with only the package directory on the path."""
    environment = dict(os.environ, PYTHONPATH=PACKAGE_DIR, **env)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, timeout=120, cwd=os.environ["TEST_TMPDIR"])
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def torch_mechanism():
    """How this torch finds installed backends: "entry point" (2.14+: the
    torch.distributed.backends group), "autoload" (2.5+: torch.backends at import torch), or
    None (1.13)."""
    torch = pytest.importorskip("torch")
    import torch.distributed as torch_dist
    if hasattr(torch_dist.Backend, "_ensure_backend_registered"):
        return "entry point"
    return "autoload" if hasattr(torch, "_import_device_backends") else None


def test_wheel_record_matches_contents():
    with zipfile.ZipFile(wheel_path()) as wheel:
        names = set(wheel.namelist())
        assert "plexus/__init__.py" in names and "plexus/_plexus.so" in names
        assert "plexus/torch.py" in names and "_plexus_entry.py" in names
        assert "plexus-0.1.0.dist-info/entry_points.txt" in names
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


def test_versions_agree():
    done = python("import importlib.metadata as m, plexus\n"
                  "print(m.version('plexus'), plexus.__version__)")
    dist_version, module_version = done.stdout.split()
    with open(os.path.join(ROOT, "sdk/plexus.h")) as f:
        header = f.read()
    parts = [re.search(r"kVersion%s = (\d+);" % part, header).group(1)
             for part in ("Major", "Minor", "Patch")]
    assert dist_version == module_version == ".".join(parts)


def test_the_entry_points_name_plexus():
    done = python("import importlib.metadata as m\n"
                  "for group in ('torch.distributed.backends', 'torch.backends'):\n"
                  "    (ep,) = [e for e in m.entry_points(group=group) if e.name == 'plexus']\n"
                  "    print(group, ep.value)")
    assert "torch.distributed.backends _plexus_entry:register" in done.stdout
    assert "torch.backends _plexus_entry:autoload" in done.stdout


def test_torch_makes_a_plexus_group_with_no_import_of_plexus():
    if torch_mechanism() is None:
        pytest.skip("torch %s looks up no installed backends (2.5+ do): users of it "
                    "`import plexus.torch`" % __import__("torch").__version__)
    done = python("import sys, torch, torch.distributed as dist\n"
                  "dist.init_process_group('plexus', store=dist.HashStore(), rank=0,"
                  " world_size=1)\n"
                  "x = torch.arange(3.0); dist.all_reduce(x)\n"
                  "print(dist.get_backend(), x.tolist(), 'plexus.torch' in sys.modules)\n"
                  "dist.destroy_process_group()")
    assert done.stdout.split("\n")[0] == "plexus [0.0, 1.0, 2.0] True", done.stdout


def test_import_torch_loads_none_of_plexus():
    """The autoload hook registers a creator; plexus's extensions load with the first group."""
    mechanism = torch_mechanism()
    if mechanism is None:
        pytest.skip("torch %s calls no hooks at import" % __import__("torch").__version__)
    done = python("import sys, torch, torch.distributed as dist\n"
                  "print('PLEXUS' in dist.Backend._plugins, '_plexus_entry' in sys.modules,"
                  " [m for m in sys.modules if m.split('.')[0] == 'plexus'])")
    # torch 2.14 asks for the registrar when "plexus" is named; 2.5-2.13 register at import.
    registered = "False" if mechanism == "entry point" else "True"
    assert done.stdout.strip() == "%s True []" % registered, done.stdout


def test_a_failing_autoload_warns_and_import_torch_goes_on():
    pytest.importorskip("torch")
    done = python("import warnings, torch, torch.distributed as dist, _plexus_entry\n"
                  "def broken(): raise OSError('no such library')\n"
                  "dist.is_available = broken\n"
                  "with warnings.catch_warnings(record=True) as caught:\n"
                  "    warnings.simplefilter('always')\n"
                  "    assert _plexus_entry.autoload() is None\n"
                  "print([str(w.message) for w in caught])",
                  TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert "not registered with torch.distributed at import torch (OSError: no such library)" \
        in done.stdout, done.stdout


def python_deb_control():
    """python3-plexus built here: its control fields and its files."""
    output = os.path.join(os.environ["TEST_TMPDIR"], "deb")
    subprocess.run([os.path.join(ROOT, "bindings/python/python_deb"), "--output=" + output],
                   check=True, capture_output=True, timeout=300)
    (deb,) = glob.glob(os.path.join(output, "python3-plexus_*.deb"))
    fields = subprocess.run(["dpkg-deb", "-f", deb], check=True, capture_output=True,
                            text=True).stdout
    files = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True,
                           text=True).stdout
    return fields, files


def owner_of_library(soname_start):
    """The Debian package holding the library that ldconfig finds first for `soname_start`."""
    listing = subprocess.run(["ldconfig", "-p"], check=True, capture_output=True,
                             text=True).stdout
    path = next(line.split(" => ")[1] for line in listing.splitlines()
                if line.strip().startswith(soname_start) and "x86-64" in line)
    path = os.path.realpath(path)
    owner = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True)
    if owner.returncode != 0:  # Merged /usr: dpkg may know the file under /lib.
        owner = subprocess.run(["dpkg-query", "-S", path.replace("/usr/lib/", "/lib/", 1)],
                               check=True, capture_output=True, text=True)
    return owner.stdout.split(":")[0]


def test_python_deb_holds_the_package_and_depends_on_what_it_links():
    fields, files = python_deb_control()
    assert "Package: python3-plexus" in fields
    for path in ("usr/lib/python3/dist-packages/plexus/_plexus.so",
                 "usr/lib/python3/dist-packages/_plexus_entry.py",
                 "usr/lib/python3/dist-packages/plexus-0.1.0.dist-info/entry_points.txt"):
        assert " ./" + path + "\n" in files, path
    (depends,) = [line for line in fields.splitlines() if line.startswith("Depends: ")]
    minor = "%d.%d" % sys.version_info[:2]
    assert "python3 (>= %s~)" % minor in depends, depends
    for library in ("libabsl_base.so.", "libssl.so.3", "libmpi.so."):
        assert owner_of_library(library) in depends, (library, depends)
    if os.path.exists(os.path.join(PACKAGE_DIR, "plexus", "_plexus_torch.so")):
        torch_minor = ".".join(__import__("torch").__version__.split(".")[:2])
        assert owner_of_library("libtorch.so.") in depends, depends
        assert "python3-torch (>= %s~)" % torch_minor in depends, depends
