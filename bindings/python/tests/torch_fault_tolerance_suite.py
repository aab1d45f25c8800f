"""torch's own fault-tolerance suite (test/distributed/test_c10d_fault_tolerance.py, torch 2.14+)
with "plexus" added to its backend list through the file's own _make_fault_tolerance_test_class.

Debian installs none of torch's test/ directory and this machine's mirror serves no source
packages, so the file comes from --torch-tests DIR, else ../shared/reference/torch/ beside the
checkout. Without it, or on a torch without c10d's
reconfigure API, the suite skips, saying why. A test that fails on plexus is rerun on gloo and
counts against plexus only when gloo passes it.

    torch_fault_tolerance_suite.py [--torch-tests DIR] [-k SUBSTRING] [--backend plexus|gloo]

Exit status 0 when nothing counts against plexus (or the suite is skipped)."""
import argparse
import importlib.util
import os
import sys
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
# Debian packages no `expecttest`, which torch's test utilities import; a stand-in is beside us.
sys.path.insert(0, os.path.join(HERE, "torch_suite_support"))

import torch.distributed as dist  # noqa: E402

import plexus.torch  # noqa: E402,F401 - registers "plexus"

FILE_NAME = "test_c10d_fault_tolerance.py"


def find_torch_test(directory):
    """The path of torch's file, or None and why not."""
    candidates = [os.path.join(directory, FILE_NAME)] if directory else []
    candidates.append(os.path.join(HERE, "..", "..", "..", "..", "shared", "reference", "torch",
                                   FILE_NAME))
    for path in candidates:
        if os.path.isfile(path):
            return path, ""
    return None, ("torch's %s is not here (looked at %s): Debian installs no torch tests; put "
                  "torch's test/distributed/%s in a directory given as --torch-tests"
                  % (FILE_NAME, ", ".join(os.path.normpath(p) for p in candidates), FILE_NAME))


def load(path):
    """torch's module, with a "plexus" class beside its gloo one. The classes are made global
    here as well: spawned ranks re-import this file and find them by name."""
    spec = importlib.util.spec_from_file_location("test_c10d_fault_tolerance", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    classes = {"plexus": module._make_fault_tolerance_test_class("plexus", "cpu"),
               "gloo": module.GlooFaultToleranceTest}
    for cls in classes.values():
        cls.__module__ = __name__
        globals()[cls.__name__] = cls
    return classes


def run(cls, names):
    """Runs `names` of `cls`; the names that failed."""
    suite = unittest.TestSuite(cls(name) for name in names)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = [t.id().rsplit(".", 1)[1] for t, _ in result.failures + result.errors]
    return failed


def parse_arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("--torch-tests", default="", help="a directory holding torch's file")
    parser.add_argument("-k", default="")
    parser.add_argument("--backend", default="plexus", choices=["plexus", "gloo"])
    return parser.parse_known_args()[0]


# At import, also in the ranks torch spawns (they re-import this file with the same argv).
if not hasattr(dist, "_reconfigure"):
    CLASSES, SKIP = None, "this torch has no c10d reconfigure API (torch 2.14 brought it)"
else:
    _PATH, SKIP = find_torch_test(parse_arguments().torch_tests)
    CLASSES = load(_PATH) if _PATH else None


def main():
    args = parse_arguments()
    if CLASSES is None:
        print("SKIPPED: " + SKIP)
        return 0
    cls = CLASSES[args.backend]
    names = sorted(n for n in unittest.TestLoader().getTestCaseNames(cls) if args.k in n)
    failed = run(cls, names)
    if args.backend == "gloo" or not failed:
        print("%s: %d tests, %d failed" % (args.backend, len(names), len(failed)))
        return 1 if failed else 0
    gloo_failed = run(CLASSES["gloo"], failed)
    against = [n for n in failed if n not in gloo_failed]
    print("plexus: %d tests, %d failed (%d of them also on gloo); against plexus: %s"
          % (len(names), len(failed), len(gloo_failed), ", ".join(against) or "none"))
    return 1 if against else 0


if __name__ == "__main__":
    sys.exit(main())
