#!/usr/bin/env bash
# bench --plot draws a picture from a real (tiny) run, with the memcpy line; bench_plot.py
# refuses input with no successful measurement.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
out="${TEST_TMPDIR}/busbw.png"
"$root/tools/bench" --backends=cpu:tcp --ranks=2 --sizes=1K,64K --iters=2 --warmup=0 \
  --json="${TEST_TMPDIR}/run.json" --plot="$out"
[[ "$(head -c 8 "$out" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || {
  echo "bench --plot wrote no PNG"; exit 1; }
grep -q '"op": "memcpy"' "${TEST_TMPDIR}/run.json" || { echo "no memcpy rows in the JSON"; exit 1; }
grep -c '"op": "all_reduce"' "${TEST_TMPDIR}/run.json" | grep -qx 2 || { echo "rows missing"; exit 1; }
echo '[{"backend": "cpu:tcp", "op": "all_reduce", "ranks": 2, "bytes": 1024, "busbw_gbps": 0,
        "error": "rank 1 lost"}]' > "${TEST_TMPDIR}/failed.json"
if /usr/bin/python3 "$root/tools/bench_plot.py" --out "${TEST_TMPDIR}/no.png" \
     "${TEST_TMPDIR}/failed.json" 2> "${TEST_TMPDIR}/err"; then
  echo "bench_plot.py drew a picture of nothing"; exit 1
fi
grep -q "no successful measurement" "${TEST_TMPDIR}/err"
echo "PASS"
