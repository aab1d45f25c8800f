#!/usr/bin/env bash
# bench --load, --ranks sweeps, --anchor and --rounds, from tiny real runs: every case runs quiet
# and then beside the load (which must really run), a sweep fits and prints the cost model, the
# anchor's rows are read into the table (a stand-in run.sh, so the test needs no Open MPI),
# rounds are set against the anchor round by round, the plot has both panels, and bad flags are
# refused naming what is wrong.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
bench="$root/tools/bench"
tmp="${TEST_TMPDIR}"

mkdir -p "$tmp/anchors"
cat > "$tmp/anchors/run.sh" <<'SCRIPT'
#!/usr/bin/env bash
# Stand-in for ../shared/anchors/run.sh: KIND WORLD BYTES... -> one row per size.
kind=$1; world=$2; shift 2
echo "# anchor Open MPI world=$world ($kind)"
printf "%10s %10s %8s %8s\n" bytes time_us algbw busbw
for b in "$@"; do printf "%10d %10.1f %8.3f %8.3f\n" "$b" "${STANDIN_TIME_US:-$((world * 10)).5}" 0.100 0.150; done
SCRIPT

PLEXUS_ANCHORS="$tmp/anchors" "$bench" --backends=cpu:tcp --ranks=2,3 --sizes=1K,4K --iters=3 \
  --warmup=0 --load=compute:1 --anchor=mpi-shm --json="$tmp/run.json" --plot="$tmp/run.png" \
  > "$tmp/out.txt" 2> "$tmp/err.txt" || { cat "$tmp/out.txt" "$tmp/err.txt"; exit 1; }
cat "$tmp/out.txt"
grep -c '"op": "all_reduce"' "$tmp/run.json" | grep -qx 16 || { echo "want 16 rows: 2 rank counts x 2 sizes x quiet/loaded x plexus/anchor"; exit 1; }
grep -c '"load": "compute:1"' "$tmp/run.json" | grep -qx 8 || { echo "want 8 rows under the load"; exit 1; }
grep -q '"backend": "openmpi-shm", "op": "all_reduce", "ranks": 3, "bytes": 4096, "count": 1024, "dtype": "float32", "time_us": 30.500' "$tmp/run.json" || { echo "anchor row not read"; exit 1; }
grep -q "quiet against under load" "$tmp/out.txt" || { echo "no contention table"; exit 1; }
grep -Eq "^# load compute:1 did [1-9][0-9]* units" "$tmp/out.txt" || { echo "the load did no work"; exit 1; }
grep -q "^# model: time_us = " "$tmp/out.txt" || { echo "no fitted model"; exit 1; }
/usr/bin/python3 - "$tmp/run.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["op"] == "all_reduce" and not r["load"]]
assert all(r["model_time_us"] > 0 for r in rows), rows
PY
[[ "$(head -c 8 "$tmp/run.png" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || { echo "no PNG"; exit 1; }

# --rounds alternates quiet and loaded passes: every round's rows, their medians, and each
# case's rounds set against the anchor's (a stand-in far slower, so plexus is ahead in both).
STANDIN_TIME_US=1000000.5 PLEXUS_ANCHORS="$tmp/anchors" "$bench" --backends=cpu:tcp --ranks=2 \
  --sizes=1K --iters=3 --warmup=0 --load=spin:1 --anchor=mpi-shm --rounds=2 \
  --json="$tmp/rounds.json" > "$tmp/rounds.txt" || { cat "$tmp/rounds.txt"; exit 1; }
cat "$tmp/rounds.txt"
/usr/bin/python3 - "$tmp/rounds.json" <<'PY'
import collections, json, sys
rows = json.load(open(sys.argv[1]))
by_round = collections.Counter(r["round"] for r in rows)
# 2 backends (plexus, anchor) x quiet/loaded: 4 rows a round, and 4 medians (round 0).
assert by_round == {1: 4, 2: 4, 0: 4}, by_round
for r in rows:
    if r["round"] == 0:
        same = sorted(x["time_us"] for x in rows
                      if x["round"] and (x["backend"], x["load"]) == (r["backend"], r["load"]))
        assert abs(r["time_us"] - sum(same) / 2) < 1e-3 * r["time_us"], (r, same)
PY
grep -q "^# round 2 of 2, 2 ranks" "$tmp/rounds.txt" || { echo "no round marker"; exit 1; }
grep -Eq "^cpu:tcp +all_reduce +2 +1024 spin:1 +[0-9.]+ / [0-9.]+ +2/2 +[0-9.]+-[0-9.]+x$" \
  "$tmp/rounds.txt" || { echo "no loaded plexus row ahead in 2/2 with its slowdown"; exit 1; }
grep -Eq "^openmpi-shm +all_reduce +2 +1024 - +1000000 / 1000000 +- +-$" "$tmp/rounds.txt" \
  || { echo "no quiet anchor row"; exit 1; }

# The second job's ranks form their own group and all-reduce while plexus is measured, a fresh
# group at each start (two rank counts, two rounds).
"$bench" --backends=cpu:tcp --ranks=2,3 --sizes=1K --iters=3 --warmup=0 --load=comm:2 --rounds=2 \
  > "$tmp/comm.txt" || { cat "$tmp/comm.txt"; echo "a run beside comm:2 failed"; exit 1; }
[[ "$(grep -Ec "^# load comm:2 did [1-9][0-9]* units" "$tmp/comm.txt")" == 4 ]] \
  || { cat "$tmp/comm.txt"; echo "want the comm load to work in each of 4 starts"; exit 1; }

refused() {  # refused EXPECTED_TEXT ARGS...
  local want=$1; shift
  if "$bench" "$@" > /dev/null 2> "$tmp/refused.txt"; then echo "accepted: $*"; exit 1; fi
  grep -q -- "$want" "$tmp/refused.txt" || { echo "refusal of $* does not say '$want':"; cat "$tmp/refused.txt"; exit 1; }
}
refused "unknown kind 'heat'" --load=heat:2
refused "must be 1..64" --load=spin:0
refused "needs N >= 2" --load=comm:1
refused "'0' is not 1..64" --ranks=2,0
refused "known anchors are mpi-shm and mpi-tcp" --anchor=nccl
refused "--rounds=0 must be 1..20" --rounds=0
# From a directory with no ../shared beside it, as in a user's clone.
mkdir -p "$tmp/clone/work"
(cd "$tmp/clone/work" && PLEXUS_ANCHORS="$tmp/none" refused "the reference script is not here" \
  --backends=cpu:tcp --ranks=2 --sizes=1K --iters=1 --warmup=0 --anchor=mpi-shm)
echo "PASS"
