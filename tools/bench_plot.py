#!/usr/bin/python3
"""Draws the benchmark's bus bandwidth against message size: one line per (backend, op, ranks,
load) from one or more `bench --json` files, and the machine's memcpy bandwidth (rows with op
"memcpy", which `bench --plot` measures) as a dashed line - the ceiling a same-host transport is
judged against. Rows measured under `bench --load` are drawn dotted beside their quiet line.
When the rows cover two or more rank counts (`bench --ranks=2,4,8`), a second panel draws time
against ranks for each size, with the fitted cost model (`model_time_us`) dashed.

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


def load_rows(paths):
    """The rows that succeeded, from every file; of a case measured in rounds, only the median."""
    rows = []
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                if row.get("error") or row.get("wrong", 0) or row.get("busbw_gbps", 0) <= 0:
                    continue
                if row.get("round", 0) > 0:
                    continue
                rows.append(row)
    return rows


def load_series(rows):
    """(backend, op, ranks, load) -> sorted [(bytes, busbw GB/s)]."""
    series = collections.defaultdict(list)
    dtypes = set()
    for row in rows:
        series[(row["backend"], row["op"], row["ranks"], row.get("load", ""))].append(
            (row["bytes"], row["busbw_gbps"]))
        if row["op"] != "memcpy":
            dtypes.add(row.get("dtype", ""))
    return {key: sorted(points) for key, points in series.items()}, sorted(dtypes)


def scaling_series(rows):
    """(backend, op, bytes) -> sorted [(ranks, time_us, model_time_us)] for quiet rows, where the
    series spans two or more rank counts."""
    series = collections.defaultdict(list)
    for row in rows:
        if row["op"] in ("memcpy", "barrier") or row.get("load"):
            continue
        series[(row["backend"], row["op"], row["bytes"])].append(
            (row["ranks"], row["time_us"], row.get("model_time_us", 0)))
    return {key: sorted(points) for key, points in series.items()
            if len({p[0] for p in points}) >= 2}


def plot_busbw(axes, series, dtypes, title):
    for (backend, op, ranks, load), points in sorted(series.items()):
        sizes = [p[0] for p in points]
        busbw = [p[1] for p in points]
        if op == "memcpy":
            axes.plot(sizes, busbw, "k--", linewidth=1.5, label="memcpy (one core)")
        else:
            axes.plot(sizes, busbw, marker="o", markersize=3, linestyle=":" if load else "-",
                      label="%s %s, %d ranks%s" % (backend, op, ranks,
                                                   " under " + load if load else ""))
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(_size_label))
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("bus bandwidth (GB/s, nccl-tests' definition)")
    axes.set_title(title or "plexus bench: busbw against size (%s)" % ", ".join(dtypes))
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)


def plot_scaling(axes, series):
    for (backend, op, size), points in sorted(series.items()):
        ranks = [p[0] for p in points]
        line = axes.plot(ranks, [p[1] for p in points], marker="o", markersize=3,
                         label="%s %s %s" % (backend, op, _size_label(size)))
        if all(p[2] > 0 for p in points):
            axes.plot(ranks, [p[2] for p in points], linestyle="--", linewidth=1,
                      color=line[0].get_color())
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("ranks")
    axes.set_ylabel("time per call (us); dashed: fitted model")
    axes.set_title("time against rank count")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)


def plot(rows, out, title):
    series, dtypes = load_series(rows)
    scaling = scaling_series(rows)
    if scaling:
        figure, (left, right) = plt.subplots(1, 2, figsize=(16, 6))
        plot_busbw(left, series, dtypes, title)
        plot_scaling(right, scaling)
    else:
        figure, axes = plt.subplots(figsize=(9, 5.5))
        plot_busbw(axes, series, dtypes, title)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    return len(series) + len(scaling)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", nargs="+", help="files written by bench --json")
    parser.add_argument("--out", required=True, help="the picture to write (.png, .svg, .pdf)")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    rows = load_rows(args.json)
    if not any(row["op"] != "memcpy" for row in rows):
        print("bench_plot: no successful measurement in %s" % ", ".join(args.json),
              file=sys.stderr)
        return 1
    lines = plot(rows, args.out, args.title)
    print("bench_plot: wrote %s (%d lines)" % (args.out, lines))
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
