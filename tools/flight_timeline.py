"""The flight recorders of every rank as one timeline: a Chrome trace / Perfetto JSON (one
process per rank, one track per group) and a picture of the same, on the store server's clock.

A collective is drawn from when it started to when it ended (or to the dump, if it had not).
Recorders stamp issue and end; collectives of a group run in issue order, so one starts when it
was issued or when the one before it ended, whichever is later, and the wait between is drawn as
"queued". A collective that some ranks of its group had not issued when they dumped names them
("missing").
"""
import json
import textwrap

# Chrome's trace viewer colour names.
COLOURS = {"completed": "good", "failed": "terrible", "issued": "bad"}
QUEUED_US = 50  # Shorter waits behind the previous collective are not drawn.


def _offset_us(dump):
    clock = dump.get("clock")
    return clock["offset_us"] if clock else 0


def _process_id(dump, index):
    rank = dump.get("global_rank", -1)
    return rank if rank >= 0 else 100000 + index


def _label(entry):
    text = "%s #%d" % (entry["op"], entry["sequence"])
    if entry["kind"] == "p2p" and entry.get("peer", -1) >= 0:
        text += (" to " if entry["op"] in ("send", "isend") else " from ") + str(entry["peer"])
    return text


def _missing_ranks(dumps):
    """(group, sequence) -> the group ranks that had not issued that collective when they
    dumped. A rank without a dump is not counted (the report names it), nor one whose ring
    merely no longer holds the entry."""
    issued = set()
    last = {}
    for dump in dumps:
        for group in dump["groups"]:
            sequences = [e["sequence"] for e in group["entries"] if e["kind"] == "collective"]
            issued.update((group["name"], s) for s in sequences)
            last[(group["name"], group["rank"])] = max(sequences, default=-1)
    missing = {}
    for name, sequence in issued:
        absent = sorted(rank for (group, rank), latest in last.items()
                        if group == name and latest < sequence)
        if absent:
            missing[(name, sequence)] = absent
    return missing


def spans(dumps):
    """Every recorded operation as a dict with times on the common clock (microseconds since
    the earliest issue), sorted per rank and group."""
    missing = _missing_ranks(dumps)
    out = []
    for index, dump in enumerate(dumps):
        offset = _offset_us(dump)
        end_of_record = dump.get("dumped_unix_us", 0) - offset
        for group_index, group in enumerate(dump["groups"]):
            previous_end = None
            for entry in sorted(group["entries"], key=lambda e: (e["kind"], e["sequence"])):
                issued = entry["issued_unix_us"] - offset
                finished = entry.get("finished_unix_us")
                end = (finished - offset) if finished is not None else end_of_record
                start = issued
                if entry["kind"] == "collective" and previous_end is not None:
                    start = max(issued, min(previous_end, end))
                if entry["kind"] == "collective":
                    previous_end = end
                span = {
                    "pid": _process_id(dump, index), "global_rank": dump.get("global_rank", -1),
                    "host": dump.get("host", "?"), "group": group["name"],
                    "group_index": group_index, "group_rank": group["rank"],
                    "backend": group.get("backend", ""), "kind": entry["kind"],
                    "label": _label(entry), "entry": entry, "issued": issued, "start": start,
                    "end": max(end, start), "state": entry["state"],
                    "missing": (missing.get((group["name"], entry["sequence"]), [])
                                if entry["kind"] == "collective" else []),
                }
                out.append(span)
    return out


def journal(dumps):
    """The processes' events (peer lost, abort, timeout) and dumps, on the common clock."""
    marks = []
    for index, dump in enumerate(dumps):
        offset = _offset_us(dump)
        pid = _process_id(dump, index)
        for event in dump.get("events", []):
            marks.append({"pid": pid, "time": event["unix_us"] - offset, "kind": event["kind"],
                          "detail": event["detail"]})
        marks.append({"pid": pid, "time": dump.get("dumped_unix_us", 0) - offset,
                      "kind": "dump", "detail": dump.get("reason", "")})
    return marks


def origin(all_spans, marks):
    times = [s["issued"] for s in all_spans] + [m["time"] for m in marks]
    return min(times) if times else 0


def _process_events(dumps):
    """Names and orders a process per rank and a thread per group of it."""
    events = []
    for index, dump in enumerate(dumps):
        pid = _process_id(dump, index)
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {
            "name": "rank %s (%s, pid %s)" % (dump.get("global_rank", "?"), dump.get("host", "?"),
                                             dump.get("pid", "?"))}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": pid}})
        for group_index, group in enumerate(dump["groups"]):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": group_index,
                           "args": {"name": "group '%s' rank %d (%s)" % (
                               group["name"], group["rank"], group.get("backend", ""))}})
    return events


def _span_args(span, zero):
    entry = span["entry"]
    args = {"group": span["group"], "sequence": entry["sequence"], "state": span["state"],
            "dtype": entry["dtype"], "count": entry["count"],
            "issued_us": round(span["issued"] - zero, 1)}
    if entry.get("reduce_op"):
        args["reduce_op"] = entry["reduce_op"]
    if entry.get("root", -1) >= 0:
        args["root"] = entry["root"]
    if entry.get("error"):
        args["error"] = entry["error"]
    if span["missing"]:
        args["missing"] = span["missing"]
    return args


def _span_events(all_spans, zero):
    """A collective as a slice (and its time queued, when long, as an async pair); a
    point-to-point operation as an async pair of its own."""
    events = []
    async_id = 0
    for span in all_spans:
        args = _span_args(span, zero)
        name = span["label"]
        if span["state"] == "issued":
            name += " (not finished)"
        if span["missing"]:
            name += " (missing rank %s)" % ", ".join(map(str, span["missing"]))
        if span["kind"] == "collective":
            events.append({"ph": "X", "name": name, "cat": "collective", "pid": span["pid"],
                           "tid": span["group_index"], "ts": span["start"] - zero,
                           "dur": span["end"] - span["start"], "cname": COLOURS[span["state"]],
                           "args": args})
            if span["start"] - span["issued"] >= QUEUED_US:
                async_id += 1
                for phase, time in (("b", span["issued"]), ("e", span["start"])):
                    events.append({"ph": phase, "name": span["label"] + " queued",
                                   "cat": "queued", "id": async_id, "pid": span["pid"],
                                   "tid": span["group_index"], "ts": time - zero})
        else:
            async_id += 1
            for phase, time in (("b", span["start"]), ("e", span["end"])):
                event = {"ph": phase, "name": name, "cat": "p2p", "id": async_id,
                         "pid": span["pid"], "tid": span["group_index"], "ts": time - zero,
                         "cname": COLOURS[span["state"]]}
                if phase == "b":
                    event["args"] = args
                events.append(event)
    return events


def chrome_trace(dumps, findings=()):
    """The Chrome trace / Perfetto JSON document (a dict)."""
    all_spans = spans(dumps)
    marks = journal(dumps)
    zero = origin(all_spans, marks)
    events = _process_events(dumps) + _span_events(all_spans, zero)
    for mark in marks:
        events.append({"ph": "i", "s": "p", "name": mark["kind"], "pid": mark["pid"], "tid": 0,
                       "ts": mark["time"] - zero, "args": {"detail": mark["detail"]}})
    clocks = {}
    for index, dump in enumerate(dumps):
        clocks[str(dump.get("global_rank", index))] = dump.get("clock")
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": "plexus flight recorders", "origin_unix_us": zero,
                          "clocks": clocks,
                          "findings": [f["text"] for f in findings]}}


def write_chrome_trace(dumps, path, findings=()):
    with open(path, "w") as f:
        json.dump(chrome_trace(dumps, findings), f)


def _draw_marks(ax, marks, row_of, zero):
    """Dumps and journal events, above the first row of their rank."""
    drawn = set()
    for mark in marks:
        rows_of_pid = [i for (pid, _), i in row_of.items() if pid == mark["pid"]]
        if not rows_of_pid:
            continue
        y = min(rows_of_pid)
        x = (mark["time"] - zero) / 1e6
        style = ("k", "|") if mark["kind"] == "dump" else ("#c44e52", "x")
        label = mark["kind"] if mark["kind"] not in drawn else None
        drawn.add(mark["kind"])
        ax.plot([x], [y - 0.45], marker=style[1], color=style[0], markersize=9, linestyle="",
                label=label)


def _row_names(rows):
    names = []
    for pid, _, group in rows:
        title = "rank %d" % pid if pid < 100000 else "rank ?"
        names.append(title + ("\n" + group if group and group != "world" else ""))
    return names


def plot(dumps, path, findings=()):
    """Draws the timeline to `path` (PNG, SVG or PDF by its name). Needs matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    all_spans = spans(dumps)
    marks = journal(dumps)
    zero = origin(all_spans, marks)
    rows = sorted({(s["pid"], s["group_index"], s["group"]) for s in all_spans})
    rows += sorted({(m["pid"], 0, "") for m in marks if not any(r[0] == m["pid"] for r in rows)})
    row_of = {(pid, group_index): i for i, (pid, group_index, _) in enumerate(rows)}
    end = max([s["end"] for s in all_spans] + [m["time"] for m in marks] + [zero + 1])
    span_s = (end - zero) / 1e6
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.6 * len(rows)))
    colours = {"completed": "#4c72b0", "failed": "#c44e52", "issued": "#dd8452"}
    for span in all_spans:
        y = row_of[(span["pid"], span["group_index"])]
        left = (span["start"] - zero) / 1e6
        width = max((span["end"] - span["start"]) / 1e6, span_s / 2000)
        height = 0.6 if span["kind"] == "collective" else 0.3
        bottom = y - 0.3 if span["kind"] == "collective" else y + 0.32
        ax.broken_barh([(left, width)], (bottom, height), facecolors=colours[span["state"]],
                       edgecolor="black" if span["missing"] else "none",
                       hatch="//" if span["state"] == "issued" else None, linewidth=0.5)
        if width > span_s * 0.06:
            text = span["label"]
            if span["missing"]:
                text += ": rank %s missing" % ",".join(map(str, span["missing"]))
            ax.text(left + width / 2, y, text, ha="center", va="center", fontsize=7,
                    color="white", clip_on=True)
    _draw_marks(ax, marks, row_of, zero)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(_row_names(rows))
    ax.set_ylim(len(rows) - 0.4, -0.8)
    ax.set_xlabel("seconds (store server's clock, from the first operation)")
    for state, colour in colours.items():
        ax.plot([], [], color=colour, linewidth=6,
                label={"issued": "not finished"}.get(state, state))
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7)
    headline = [f["text"] for f in findings if f["kind"] in ("behind", "stuck", "missing")]
    title = "plexus timeline: %d rank(s)" % len({s["pid"] for s in all_spans})
    if headline:
        title += "\n" + textwrap.fill(headline[0], 140)
    ax.set_title(title, fontsize=8, loc="left")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
