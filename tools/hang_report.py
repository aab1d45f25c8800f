#!/usr/bin/python3
"""Merges plexus flight-recorder dumps (one per rank) and says which rank is behind in which
collective, which ranks disagree about one, and which never dumped.

    bazel run //tools:hang_report -- /tmp/dumps            # a directory of *.json dumps
    bazel run //tools:hang_report -- rank0.json rank1.json --json
    bazel run //tools:hang_report -- /tmp/dumps --timeline=trace.json --plot=trace.png

Dumps come from plexus.debug_dump(), SIGUSR1, or an operation's timeout (docs/debugging.md).
"""
import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flight_timeline  # noqa: E402  (beside this file, also in Bazel's runfiles)

FORMAT = "plexus-flight-recorder-1"


def load_dumps(paths):
    files = []
    for path in paths:
        if os.path.isdir(path):
            files.extend(sorted(glob.glob(os.path.join(path, "*.json"))))
        else:
            files.append(path)
    dumps = []
    for name in files:
        try:
            with open(name) as f:
                dump = json.load(f)
        except (OSError, ValueError) as error:
            print("skipping %s: %s" % (name, error), file=sys.stderr)
            continue
        if isinstance(dump, dict) and "traceEvents" in dump:
            continue  # A timeline this tool wrote.
        if not isinstance(dump, dict) or dump.get("format") != FORMAT:
            print("skipping %s: not a plexus flight-recorder dump" % name, file=sys.stderr)
            continue
        dump["_file"] = name
        dumps.append(dump)
    return dumps


def describe(entry):
    text = "%s #%d" % (entry["op"], entry["sequence"])
    details = [entry["dtype"] + " x " + str(entry["count"])] if entry["count"] >= 0 else []
    if entry.get("reduce_op"):
        details.append(entry["reduce_op"])
    if entry.get("root", -1) >= 0:
        details.append("root %d" % entry["root"])
    return text + (" (" + ", ".join(details) + ")" if details else "")


def signature(entry):
    return (entry["op"], entry["dtype"], entry["count"], entry.get("root", -1),
            entry.get("reduce_op", ""))


def mismatches(name, collectives):
    """Ranks that disagree about one sequence number ran different collectives there."""
    findings = []
    sequences = sorted({s for entries in collectives.values() for s in entries})
    for sequence in sequences:
        seen = {r: entries[sequence] for r, entries in collectives.items() if sequence in entries}
        kinds = {signature(e) for e in seen.values()}
        if len(kinds) > 1:
            parts = ["rank %d: %s" % (r, describe(e)) for r, e in sorted(seen.items())]
            findings.append({"kind": "mismatch", "group": name, "sequence": sequence,
                             "text": "group '%s': ranks disagree at collective #%d: %s"
                                     % (name, sequence, "; ".join(parts))})
    return findings


def failures(name, collectives):
    """Every collective a rank recorded as failed, with its error."""
    findings = []
    for rank, entries in sorted(collectives.items()):
        for entry in entries.values():
            if entry["state"] == "failed" and entry.get("error"):
                findings.append({"kind": "failed", "group": name, "rank": rank,
                                 "sequence": entry["sequence"],
                                 "text": "group '%s': rank %d: %s failed: %s"
                                         % (name, rank, describe(entry), entry["error"])})
    return findings


def analyse_group(name, records, now_us):
    """records: group rank -> (dump, group record). Returns findings (dicts)."""
    findings = []
    size = max(record["size"] for _, record in records.values())
    missing = [r for r in range(size) if r not in records]
    if missing:
        findings.append({"kind": "missing", "group": name, "ranks": missing,
                         "text": "group '%s': no dump from rank(s) %s (dead, or stuck where "
                                 "no signal reaches)" % (name, ", ".join(map(str, missing)))})
    collectives = {}
    for rank, (_, record) in records.items():
        collectives[rank] = {e["sequence"]: e for e in record["entries"]
                             if e["kind"] == "collective"}
    findings += mismatches(name, collectives)
    last = {r: max(entries) if entries else -1 for r, entries in collectives.items()}
    if not last:
        return findings
    frontier = max(last.values())
    ahead = sorted(r for r, s in last.items() if s == frontier)
    waiting = [r for r in ahead if collectives[r][frontier]["state"] != "completed"]
    behind = sorted(r for r, s in last.items() if s < frontier)
    if behind and frontier >= 0:
        sample = collectives[ahead[0]][frontier]
        waited = (now_us - min(collectives[r][frontier]["issued_unix_us"] for r in ahead)) / 1e6
        for rank in behind:
            global_rank = records[rank][1]["global_ranks"][rank]
            latest = collectives[rank].get(last[rank])
            was = ("its last was %s, %s" % (describe(latest), latest["state"])
                   if latest else "it issued none")
            findings.append({
                "kind": "behind", "group": name, "rank": rank, "global_rank": global_rank,
                "sequence": frontier, "op": sample["op"], "waiting": waiting,
                "text": "group '%s': rank %d (global %d) is behind: it has not issued %s, which "
                        "rank(s) %s issued %.1f s before the dump (%s)"
                        % (name, rank, global_rank, describe(sample),
                           ", ".join(map(str, ahead)), waited, was)})
    elif waiting:
        sample = collectives[waiting[0]][frontier]
        states = ", ".join("rank %d %s" % (r, collectives[r][frontier]["state"]) for r in ahead)
        findings.append({"kind": "stuck", "group": name, "sequence": frontier,
                         "op": sample["op"], "ranks": waiting,
                         "text": "group '%s': every rank issued %s but it has not completed "
                                 "(%s): look at the transport (lost peer, network) and the "
                                 "errors below" % (name, describe(sample), states)})
    return findings + failures(name, collectives)


def analyse(dumps):
    groups = {}
    latest_us = 0
    for dump in dumps:
        latest_us = max(latest_us, dump.get("dumped_unix_us", 0))
        for record in dump["groups"]:
            groups.setdefault(record["name"], {})[record["rank"]] = (dump, record)
    now_us = latest_us or int(time.time() * 1e6)
    findings = []
    for name in sorted(groups):
        findings.extend(analyse_group(name, groups[name], now_us))
    return findings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="dump files or directories holding them")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--timeline", metavar="OUT.json",
                        help="write every rank's operations as a Chrome trace / Perfetto JSON "
                             "(open it in ui.perfetto.dev or chrome://tracing)")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="draw the same timeline as a picture (needs matplotlib)")
    args = parser.parse_args(argv)
    # Under `bazel run`, relative paths are the caller's.
    os.chdir(os.environ.get("BUILD_WORKING_DIRECTORY", "."))
    dumps = load_dumps(args.paths)
    if not dumps:
        print("no plexus flight-recorder dumps found in %s" % " ".join(args.paths),
              file=sys.stderr)
        return 1
    findings = analyse(dumps)
    if args.timeline:
        flight_timeline.write_chrome_trace(dumps, args.timeline, findings)
        print("timeline written to %s" % args.timeline, file=sys.stderr)
    if args.plot:
        try:
            flight_timeline.plot(dumps, args.plot, findings)
        except ImportError as error:
            print("cannot draw %s: %s (install python3-matplotlib)" % (args.plot, error),
                  file=sys.stderr)
            return 1
        print("timeline drawn to %s" % args.plot, file=sys.stderr)
    if args.json:
        print(json.dumps(findings, indent=2))
        return 0
    print("%d dump(s): %s" % (len(dumps), ", ".join(
        "rank %s (pid %s, %s)" % (d["global_rank"], d["pid"], d["reason"]) for d in dumps)))
    for finding in findings:
        print("- " + finding["text"])
    if not findings:
        print("- nothing pending: every rank completed every recorded collective")
    return 0


if __name__ == "__main__":
    sys.exit(main())
