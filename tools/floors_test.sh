#!/usr/bin/env bash
# floors runs every measurement, reports them in its format, and refuses bad flags.
set -euo pipefail
floors=tools/floors
out=$("$floors" shm-exchange --bytes=256 --iters=20000)
echo "$out"
grep -Eq '^shm-exchange .* 256 bytes +[0-9]+\.[0-9]+ us per exchange$' <<<"$out"
out=$("$floors" tcp-ring --ranks=3 --bytes=1048576 --rounds=2)
echo "$out"
grep -Eq '^tcp-ring  3 ranks  1048576 bytes per link  best [0-9.]+ ms  [0-9.]+ GB/s per link  all-reduce of 786432 bytes: busbw at most [0-9.]+ GB/s$' <<<"$out"
out=$("$floors" tcp-all-reduce --ranks=3 --bytes=1572864 --rounds=2)
echo "$out"
grep -Eq '^tcp-all-reduce  3 ranks  1572864 bytes  mean [0-9.]+ ms  best [0-9.]+ ms  busbw [0-9.]+ GB/s \(mean\)$' <<<"$out"
if "$floors" tcp-all-reduce --ranks=3 --bytes=1000 2>/dev/null; then
  echo "a size that does not split into whole float blocks was accepted" >&2
  exit 1
fi
if "$floors" shm-exchange --bytes=3 2>/dev/null; then
  echo "a size that is not a whole number of floats was accepted" >&2
  exit 1
fi
if "$floors" nonsense 2>/dev/null; then
  echo "an unknown mode was accepted" >&2
  exit 1
fi
echo PASS
