#!/usr/bin/env bash
# Runs the checks tools/gpu/pack.sh packed, on a machine with NVIDIA GPUs. Prints the GPU, the
# NCCL found, each suite's result and the benchmark; logs go to ${OUT:-/tmp}/plexus-gpu/.
#   run.sh [--quick]     # --quick: one small benchmark sweep only
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
logs=${OUT:-/tmp}/plexus-gpu
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PLEXUS_CUDART_LIBRARY=${PLEXUS_CUDART_LIBRARY:-$here/lib/libcudart.so.13}
if [[ -z "${PLEXUS_NCCL_LIBRARY:-}" ]]; then
  # nvidia-nccl-cu13 (what torch uses), else anything on the loader's path or under /usr, /opt.
  PLEXUS_NCCL_LIBRARY=$(python3 -c 'import nvidia.nccl, os, glob; d = os.path.dirname(nvidia.nccl.__file__); print((glob.glob(d + "/lib/libnccl.so*") or [""])[0])' 2>/dev/null || true)
  [[ -z "$PLEXUS_NCCL_LIBRARY" ]] && PLEXUS_NCCL_LIBRARY=$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2 /{print $NF; exit}')
  [[ -z "$PLEXUS_NCCL_LIBRARY" ]] && PLEXUS_NCCL_LIBRARY=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -1)
fi
export PLEXUS_NCCL_LIBRARY
echo "# plexus GPU run, $(date -u +%Y-%m-%dT%H:%MZ), commit $(cat "$here/COMMIT" 2>/dev/null)"
nvidia-smi -L || true
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "# GPUs: $gpus; CUDA runtime: $PLEXUS_CUDART_LIBRARY; NCCL: ${PLEXUS_NCCL_LIBRARY:-none found}"
failed=0
for test in "$here"/bin/*_test; do
  name=$(basename "$test")
  export TEST_TMPDIR=$(mktemp -d)
  args=()
  [[ $name == *_nccl_gpu_test || $name == *_staged_gpu_test ]] && args+=(--device=cuda)
  [[ $name == *_nccl_gpu_test ]] && args+=("--backend=cpu:tcp,cuda:nccl")
  [[ $name == *_staged_gpu_test ]] && args+=(--backend=tcp)
  if "$test" "${args[@]}" > "$logs/$name.log" 2>&1; then result=passed; else result=FAILED; failed=1; fi
  passed=$(grep -c '^\[       OK \]' "$logs/$name.log" || true)
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)$' "$logs/$name.log" || true)
  failures=$(grep -c '^\[  FAILED  \] .*ms)$' "$logs/$name.log" || true)
  reason=$(grep -m1 -A1 'Skipped$' "$logs/$name.log" | tail -1)
  echo "$name: $result ($passed passed, $failures failed, $skipped skipped${reason:+: $reason})"
  rm -rf "$TEST_TMPDIR"
done
echo "# Python $(python3 --version 2>&1 | cut -d' ' -f2): building the extension for it"
if "$here/build_python.sh" python3 > "$logs/build_python.log" 2>&1; then
  if PYTHONPATH="$here/python:$here/python/tests" python3 -m pytest -q -p no:cacheprovider \
       "$here/python/tests/test_gpu.py" "$here/python/tests/test_collectives.py" \
       > "$logs/pytest.log" 2>&1; then result=passed; else result=FAILED; failed=1; fi
  echo "python tests: $result ($(tail -1 "$logs/pytest.log"))"
else
  failed=1
  echo "python: the extension did not build (see $logs/build_python.log)"
fi
sizes=8:1G
[[ "${1:-}" == --quick ]] && sizes=8:64M
echo "# bench --device=cuda (one rank per GPU)"
"$here/bin/bench" --device=cuda --ops=all_reduce,all_gather,reduce_scatter,broadcast \
  --sizes=$sizes --iters=20 --warmup=5 --json="$logs/bench_cuda.json" 2> "$logs/bench_cuda.err" || failed=1
echo "# bench --device=cuda through host memory (tcp, staged), 2 ranks"
"$here/bin/bench" --device=cuda --backends=tcp --ranks=2 --ops=all_reduce --sizes=1K:64M \
  --iters=10 --warmup=2 --json="$logs/bench_staged.json" 2> "$logs/bench_staged.err" || failed=1
exit $failed
