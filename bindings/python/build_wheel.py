"""Writes a wheel (PEP 427) from a directory holding the package and its dist-info
(METADATA and entry points, from dist_info.py): the files, plus the dist-info's WHEEL and
RECORD (with sha256 digests)."""
import argparse
import base64
import hashlib
import os
import zipfile


def digest(data):
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--package-dir", "--output", "--distribution", "--version", "--tag"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    dist_info = "%s-%s.dist-info" % (args.distribution, args.version)
    entries = []
    for root, _, files in sorted(os.walk(args.package_dir)):
        for name in sorted(files):
            path = os.path.join(root, name)
            if "__pycache__" in path:
                continue
            with open(path, "rb") as f:
                entries.append((os.path.relpath(path, args.package_dir), f.read()))
    if not os.path.isfile(os.path.join(args.package_dir, dist_info, "METADATA")):
        raise SystemExit("build_wheel: %s has no %s/METADATA" % (args.package_dir, dist_info))
    wheel = ("Wheel-Version: 1.0\nGenerator: plexus build_wheel.py\nRoot-Is-Purelib: false\n"
             "Tag: %s\n" % args.tag)
    entries.append((dist_info + "/WHEEL", wheel.encode()))
    record = "".join("%s,%s,%d\n" % (name, digest(data), len(data)) for name, data in entries)
    record += dist_info + "/RECORD,,\n"
    entries.append((dist_info + "/RECORD", record.encode()))
    with zipfile.ZipFile(args.output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)


if __name__ == "__main__":
    main()
