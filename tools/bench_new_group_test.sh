#!/usr/bin/env bash
# bench --ops=new_group: each iteration forms a subgroup of every rank, runs a barrier on it and
# shuts it down. The row is timed once (no sizes), its result checked, and --ops=all leaves it
# out (it is asked for by name).
set -euo pipefail
bench="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/bench"
tmp="${TEST_TMPDIR}"

"$bench" --backends=cpu:tcp,cpu:gloo --ranks=3 --ops=new_group,barrier --sizes=1K,4K --iters=3 \
  --warmup=1 --json="$tmp/groups.json" > "$tmp/groups.txt" || { cat "$tmp/groups.txt"; exit 1; }
cat "$tmp/groups.txt"
/usr/bin/python3 - "$tmp/groups.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["op"] == "new_group"]
assert sorted(r["backend"] for r in rows) == ["cpu:gloo", "cpu:tcp"], rows
for r in rows:
    assert r["ranks"] == 3 and r["bytes"] == 0 and r["wrong"] == 0, r
    assert r["time_us"] > 0, r
PY

"$bench" --backends=cpu:tcp --ranks=2 --ops=all --sizes=1K --iters=1 --warmup=0 \
  --json="$tmp/all.json" > /dev/null
/usr/bin/python3 - "$tmp/all.json" <<'PY'
import json, sys
ops = {r["op"] for r in json.load(open(sys.argv[1]))}
assert "all_reduce" in ops and "new_group" not in ops, ops
PY

if "$bench" --ops=new_groups > /dev/null 2> "$tmp/refused.txt"; then echo "accepted new_groups"; exit 1; fi
grep -q "barrier, new_group, all" "$tmp/refused.txt" || { cat "$tmp/refused.txt"; exit 1; }
echo "PASS"
