#!/usr/bin/env bash
# The suites CI also runs under sanitizers: AddressSanitizer + UndefinedBehaviorSanitizer
# (--config=asan) and ThreadSanitizer (--config=tsan), each over the subset that exercises the
# code reading the network and sharing state between threads and processes, sized to keep CI
# well inside its limit (about 10 minutes for both on 2 cores):
#   asan: stores and their server, authentication and TLS, the tcp transport and its rings, the
#         algorithms and collective queue, SIGKILL/SIGSTOP/mismatch fault tests, hostile bytes
#         at every listening port, abort/split/shrink (3 SIGKILL runs each), reconfigure, and the tcp
#         conformance suites (shared memory) at world sizes 1-4 (8 ranks under ASan on 2 cores
#         took half the stage), and the elastic suites with their 1-minute churn soak;
#   tsan: the same units (in-process ranks, where every ordering is visible to it), and the
#         elastic communicator's socket-free units (its peer suites share memory across
#         processes, below).
#         ThreadSanitizer cannot follow ordering that passes through another process: frames
#         through the shared-memory rings, and the receives the ring and halving-doubling
#         all-reduces post early into the user's buffer (safe because the data that lands there
#         needs this rank's own sends first) are reported as races, so the multi-process suites
#         (conformance, and the fault suite over sockets since its ring all-reduce meets a
#         direct send) stay under ASan only; it also slows ranks past the heartbeat test's 2 s
#         interval.
# Usage: bash tools/sanitizer_tests.sh [asan|tsan]...  (default: both)
set -uo pipefail
cd "$(dirname "$0")/.."

asan_targets=(
  //base/store:all //base/auth:all //base/work:all //backends/tcp:all //algorithms:all //executor:all
  //frontend/dispatch:flight_recorder_test //tests/fault:fault_test //tests/fault:fault_sockets_test //tests/fault:heartbeat_test
  //tests/fault:listener_abuse_test //tests/fault:lifecycle_test //tests/fault:reconfigure_test
  //tests/conformance:reductions_tcp_test //tests/conformance:semantics_tcp_test
  //tests/conformance:data_movement_tcp_test //tests/elastic:all //frontend/elastic:all
)
tsan_targets=(
  //base/store:all //base/auth:all //base/work:all //backends/tcp:all //algorithms:all //executor:all
  //devices/cuda:event_watcher_test //frontend/dispatch:flight_recorder_test
  //frontend/elastic:arena_order_test //frontend/elastic:epoch_mesh_test
  //frontend/elastic:in_flight_ops_test //frontend/elastic:topology_view_test
  //frontend/elastic:master_state_test //tests/elastic:master_descriptors_test
)

configs=("$@")
[[ ${#configs[@]} -eq 0 ]] && configs=(asan tsan)
status=0
for config in "${configs[@]}"; do
  case "${config}" in
    asan) targets=("${asan_targets[@]}") ;;
    tsan) targets=("${tsan_targets[@]}") ;;
    *) echo "sanitizer_tests: unknown config ${config}" >&2; exit 2 ;;
  esac
  echo "sanitizer_tests: bazel test --config=${config} ${targets[*]}"
  extra=()
  # Debian's libgloo is not built with ThreadSanitizer: its own threads race as far as TSan can
  # tell, so the Gloo cases of the fault suite stay under ASan only.
  [[ "${config}" == tsan ]] && extra=(--test_arg=--gtest_filter=-*Gloo*)
  [[ "${config}" == asan ]] && extra=(--test_env=LIFECYCLE_RUNS=3 --test_env=CONFORMANCE_LARGEST_WORLD=4)
  bazel test --config="${config}" "${extra[@]}" "${targets[@]}" || status=1
done
exit "${status}"
