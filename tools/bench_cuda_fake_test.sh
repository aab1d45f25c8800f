#!/usr/bin/env bash
# bench --device=cuda over the fake CUDA runtime and NCCL (tests/fake_cuda): tensors in device
# memory, staged through the host (tcp) and through nccl, every op checked after its first run
# (bench exits non-zero on any wrong element or failed rank).
set -euo pipefail
bench=tools/bench
ops=all_reduce,broadcast,reduce,all_gather,reduce_scatter,all_to_all,gather,scatter,sendrecv
"$bench" --device=cuda --backends=tcp --ranks=2 --ops=$ops --sizes=1K,1M --iters=3 --warmup=1
"$bench" --device=cuda --ranks=2 --ops=$ops --sizes=1K,1M --iters=3 --warmup=1
