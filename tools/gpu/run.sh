#!/usr/bin/env bash
# Runs the checks tools/gpu/pack.sh packed, on a machine with NVIDIA GPUs. Prints the GPU, the
# NCCL found, each suite's result and the benchmark; logs go to ${OUT:-/tmp}/plexus-gpu/, and
# into ${OUT:-/tmp}/plexus-gpu.tgz at the end.
#   run.sh [--quick]     # --quick: one small benchmark sweep only
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
logs=${OUT:-/tmp}/plexus-gpu
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PLEXUS_CUDART_LIBRARY=${PLEXUS_CUDART_LIBRARY:-$here/lib/libcudart.so.13}
if [[ -z "${PLEXUS_NCCL_LIBRARY:-}" ]]; then
  # nvidia-nccl-cu13 (what torch uses), else anything on the loader's path or under /usr, /opt.
  # (nvidia.nccl is a namespace package: no __file__, one __path__.)
  PLEXUS_NCCL_LIBRARY=$(python3 -c 'import nvidia.nccl, glob; print((glob.glob(list(nvidia.nccl.__path__)[0] + "/lib/libnccl.so*") or [""])[0])' 2>/dev/null || true)
  [[ -z "$PLEXUS_NCCL_LIBRARY" ]] && PLEXUS_NCCL_LIBRARY=$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2 /{print $NF; exit}')
  [[ -z "$PLEXUS_NCCL_LIBRARY" ]] && PLEXUS_NCCL_LIBRARY=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -1)
fi
export PLEXUS_NCCL_LIBRARY
echo "# plexus GPU run, $(date -u +%Y-%m-%dT%H:%MZ), commit $(cat "$here/COMMIT" 2>/dev/null)"
nvidia-smi -L || true
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
nccl_version=$(python3 -c 'import ctypes, sys; v = ctypes.c_int(); ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v)); print(v.value)' "$PLEXUS_NCCL_LIBRARY" 2>/dev/null || echo unknown)
echo "# GPUs: $gpus; CUDA runtime: $PLEXUS_CUDART_LIBRARY; NCCL: ${PLEXUS_NCCL_LIBRARY:-none found} (version code $nccl_version)"
failed=0
# The extensions build meanwhile: the Python one (about half a minute), then the C++ torch
# backend against this machine's torch (test_gpu.py's torch.distributed cases run on it).
{ "$here/build_python.sh" python3 &&
  "$here/build_torch_extension.sh" "$here/python" python3 "$here/include"; } \
  > "$logs/build_python.log" 2>&1 &
python_build=$!
# The suites run side by side (each forks its own ranks, with its own TEST_TMPDIR) and each has a
# deadline, so one that hangs costs its deadline, not the machine's whole lease.
suite_deadline=${PLEXUS_GPU_SUITE_DEADLINE:-300}
pids=()
for test in "$here"/bin/*_test; do
  name=$(basename "$test")
  args=()
  [[ $name == *_nccl_gpu_test || $name == *_staged_gpu_test ]] && args+=(--device=cuda)
  [[ $name == *_nccl_gpu_test ]] && args+=("--backend=cpu:tcp,cuda:nccl")
  [[ $name == *_staged_gpu_test ]] && args+=(--backend=tcp)
  (
    export TEST_TMPDIR=$(mktemp -d)
    timeout -k 10 "$suite_deadline" "$test" "${args[@]}" > "$logs/$name.log" 2>&1
    echo $? > "$logs/$name.rc"
    rm -rf "$TEST_TMPDIR"
  ) &
  pids+=($!)
done
wait "${pids[@]}"
for test in "$here"/bin/*_test; do
  name=$(basename "$test")
  rc=$(cat "$logs/$name.rc" 2>/dev/null || echo missing)
  rm -f "$logs/$name.rc"
  case $rc in
    0) result=passed ;;
    124|137) result="FAILED (past its ${suite_deadline} s deadline)"; failed=1 ;;
    *) result="FAILED (exit $rc)"; failed=1 ;;
  esac
  passed=$(grep -c '^\[       OK \]' "$logs/$name.log" || true)
  skipped=$(grep -c '^\[  SKIPPED \] .*ms)$' "$logs/$name.log" || true)
  failures=$(grep -c '^\[  FAILED  \] .*ms)$' "$logs/$name.log" || true)
  reason=$(grep -m1 -A1 'Skipped$' "$logs/$name.log" | tail -1)
  echo "$name: $result ($passed passed, $failures failed, $skipped skipped${reason:+: $reason})"
done
echo "# Python $(python3 --version 2>&1 | cut -d' ' -f2): the extensions built for it and its torch"
python_built=0
if wait "$python_build"; then
  python_built=1
  if PYTHONPATH="$here/python:$here/python/tests" timeout -k 10 "$suite_deadline" python3 -m pytest -q -p no:cacheprovider \
       "$here/python/tests/test_gpu.py" "$here/python/tests/test_collectives.py" \
       > "$logs/pytest.log" 2>&1; then result=passed; else result=FAILED; failed=1; fi
  echo "python tests: $result ($(tail -1 "$logs/pytest.log"))"
else
  failed=1
  echo "python: the extensions did not build (see $logs/build_python.log)"
fi
sizes=8:1G
[[ "${1:-}" == --quick ]] && sizes=8:64M
echo "# bench --device=cuda (one rank per GPU)"
timeout -k 10 120 "$here/bin/bench" --device=cuda --ops=all_reduce,all_gather,reduce_scatter,broadcast \
  --sizes=$sizes --iters=20 --warmup=5 --json="$logs/bench_cuda.json" 2> "$logs/bench_cuda.err" || failed=1
echo "# bench --device=cuda through host memory (tcp, staged), 2 ranks"
timeout -k 10 120 "$here/bin/bench" --device=cuda --backends=tcp --ranks=2 \
  --ops=all_reduce,all_gather,broadcast --sizes=1K:64M --iters=10 --warmup=2 \
  --json="$logs/bench_staged.json" 2> "$logs/bench_staged.err" || failed=1
if (( python_built )); then
  echo "# per-call cost from Python at one rank (per_call.py), beside torch.distributed on NCCL"
  for mode in torch-nccl plexus torch-plexus; do
    PYTHONPATH="$here/python" timeout -k 10 60 python3 "$here/per_call.py" "$mode" 2>&1 | grep -E 'per call|Error'
  done
  for mode in torch-nccl plexus; do
    PYTHONPATH="$here/python" timeout -k 10 60 python3 "$here/per_call.py" "$mode" --host-wait 2>&1 | grep -E 'per call|Error'
  done
fi
# One archive beside the folder: a device run brings back only a few files.
tar czf "$logs.tgz" -C "$(dirname "$logs")" "$(basename "$logs")" && echo "# logs: $logs.tgz"
exit $failed
