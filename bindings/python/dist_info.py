"""Writes the package's DISTRIBUTION-VERSION.dist-info (METADATA, entry_points.txt,
top_level.txt) into a directory that holds the package: what importlib.metadata reads, so torch
finds the entry points of _plexus_entry.py wherever the directory is on sys.path (bazel-bin's
plexus_pkg, /usr/lib/python3/dist-packages from the .deb, a venv from the wheel, which adds
WHEEL and RECORD to the same directory)."""
import argparse
import os

ENTRY_POINTS = """\
[torch.backends]
plexus = _plexus_entry:autoload

[torch.distributed.backends]
plexus = _plexus_entry:register
"""


def metadata(distribution, version):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Collective communication with a torch.distributed-shaped API\n"
            "Requires-Python: >=3.9\nRequires-Dist: numpy\n" % (distribution, version))


def write(root, distribution, version, top_level):
    directory = os.path.join(root, "%s-%s.dist-info" % (distribution, version))
    os.makedirs(directory, exist_ok=True)
    files = {
        "METADATA": metadata(distribution, version),
        "entry_points.txt": ENTRY_POINTS,
        "top_level.txt": "".join(name + "\n" for name in top_level),
    }
    for name, text in files.items():
        with open(os.path.join(directory, name), "w") as f:
            f.write(text)
    return directory


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, help="the directory holding the package")
    parser.add_argument("--distribution", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--top-level", action="append", required=True,
                        help="a top-level module or package the distribution installs")
    args = parser.parse_args()
    write(args.root, args.distribution, args.version, args.top_level)


if __name__ == "__main__":
    main()
