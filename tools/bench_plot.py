#!/usr/bin/python3
"""Draws the benchmark's bus bandwidth against message size: one line per (backend, op, ranks)
from one or more `bench --json` files, and the machine's memcpy bandwidth (rows with op
"memcpy", which `bench --plot` measures) as a dashed line - the ceiling a same-host transport is
judged against.

    bench_plot.py --out busbw.png run1.json [run2.json ...] [--title TEXT]

Uses Debian's python3-matplotlib without a display. Exits non-zero, saying why, when the files
hold no successful measurement.
"""
import argparse
import collections
import json
import sys

import matplotlib

matplotlib.use("Agg")  # No display: draw straight to the file.
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend.
from matplotlib.ticker import FuncFormatter  # noqa: E402


def _size_label(value, _position=None):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return "%g%s" % (value / scale, unit)
    return "%g" % value


def load_series(paths):
    """(backend, op, ranks) -> sorted [(bytes, busbw GB/s)], from the rows that succeeded."""
    series = collections.defaultdict(list)
    dtypes = set()
    for path in paths:
        with open(path) as f:
            rows = json.load(f)
        for row in rows:
            if row.get("error") or row.get("wrong", 0) or row.get("busbw_gbps", 0) <= 0:
                continue
            series[(row["backend"], row["op"], row["ranks"])].append(
                (row["bytes"], row["busbw_gbps"]))
            if row["op"] != "memcpy":
                dtypes.add(row.get("dtype", ""))
    return {key: sorted(points) for key, points in series.items()}, sorted(dtypes)


def plot(series, dtypes, out, title):
    figure, axes = plt.subplots(figsize=(9, 5.5))
    for (backend, op, ranks), points in sorted(series.items()):
        sizes = [p[0] for p in points]
        busbw = [p[1] for p in points]
        if op == "memcpy":
            axes.plot(sizes, busbw, "k--", linewidth=1.5, label="memcpy (one core)")
        else:
            axes.plot(sizes, busbw, marker="o", markersize=3,
                      label="%s %s, %d ranks" % (backend, op, ranks))
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(_size_label))
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("bus bandwidth (GB/s, nccl-tests' definition)")
    axes.set_title(title or "plexus bench: busbw against size (%s)" % ", ".join(dtypes))
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", nargs="+", help="files written by bench --json")
    parser.add_argument("--out", required=True, help="the picture to write (.png, .svg, .pdf)")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    series, dtypes = load_series(args.json)
    if not any(op != "memcpy" for (_, op, _) in series):
        print("bench_plot: no successful measurement in %s" % ", ".join(args.json),
              file=sys.stderr)
        return 1
    plot(series, dtypes, args.out, args.title)
    print("bench_plot: wrote %s (%d lines)" % (args.out, len(series)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
