#!/usr/bin/env bash
# Builds the libFuzzer targets with Debian's clang under ASan + UBSan and runs each for
# FUZZ_SECONDS (default 60, or 10 under bazel test) from its seed corpus in tests/fuzz/corpus/<target>; fails on any
# finding (crash, leak, undefined behaviour, timeout). Usage:
#   bash tests/fuzz/run_fuzzers.sh [seconds] [target ...]
# Under `bazel test //tests/fuzz:fuzz_test` the sources are read from the workspace the test's
# runfiles point into; new inputs it finds go to $TEST_TMPDIR, not into the repository.
set -euo pipefail

script="$(readlink -f "${BASH_SOURCE[0]}")"
root="$(cd "$(dirname "${script}")/../.." && pwd)"
# Under bazel test (TEST_TMPDIR set) 10 s a target by default, to keep CI short; 60 s by hand.
default_seconds=60
[[ -n "${TEST_TMPDIR:-}" ]] && default_seconds=10
seconds="${1:-${FUZZ_SECONDS:-${default_seconds}}}"
shift || true
work="${TEST_TMPDIR:-$(mktemp -d)}/fuzz"
mkdir -p "${work}"
clang="${CLANGXX:-clang++}"
command -v "${clang}" > /dev/null || { echo "run_fuzzers: ${clang} not found (apt install clang)"; exit 1; }

# clang 18 and later mangle some template parameters anew (Debian 13's clang 19); abseil is
# built by GCC with the old names, so ask for clang 17's.
abi=()
clang_major="$("${clang}" -dumpversion | cut -d. -f1)"
[[ "${clang_major}" -ge 18 ]] && abi=(-fclang-abi-compat=17)
# Nor may abseil's headers lay out hash tables as for a sanitized abseil (20240722 adds
# generation counters under ASan), which the installed library is not.
abi+=(-DNDEBUG_SANITIZER)
# Every abseil module installed (as third_party/system_repos.bzl links them).
absl_libs=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so |
  sed -E 's|.*/lib(absl_[a-z0-9_]*)\.so$|-l\1|' | tr '\n' ' ')
common=(base/core/logging.cc base/core/heartbeat.cc base/core/dtype.cc base/core/environment.cc
        base/core/event_journal.cc base/core/byte_size.cc
        base/net/socket_util.cc base/net/accept_guard.cc base/net/frames.cc
        base/net/event_poller.cc base/auth/mutual_auth.cc base/auth/tls.cc
        base/auth/server_admission.cc base/auth/server_connection.cc
        base/auth/server_listener.cc)
declare -A sources=(
  [handshakes_fuzz]="backends/tcp/tcp_connect.cc base/store/tcp_store_protocol.cc
                     base/store/store.cc"
  [master_messages_fuzz]="frontend/elastic/master_protocol.cc frontend/elastic/master_state.cc
                          frontend/elastic/ring_order.cc frontend/elastic/shared_state.cc
                          frontend/elastic/elastic_types.cc base/core/reduce_op.cc
                          algorithms/quantize_kernels.cc algorithms/reduce_kernels.cc"
  [store_server_fuzz]="base/store/tcp_store_server.cc base/store/tcp_store_protocol.cc
                       base/store/key_value_table.cc base/store/store.cc"
  [tcp_frames_fuzz]="backends/tcp/tcp_loop.cc backends/tcp/tcp_loop_rings.cc
                     backends/tcp/tcp_frame.cc backends/tcp/receive_matcher.cc
                     backends/tcp/send_lane.cc
                     backends/tcp/peer_liveness.cc backends/tcp/shm_ring.cc
                     backends/tcp/shm_arena.cc backends/tcp/shm_link.cc
                     backends/tcp/wait_policy.cc
                     base/net/host_identity.cc base/work/work.cc
                     base/work/callback_runner.cc"
)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(handshakes_fuzz master_messages_fuzz store_server_fuzz tcp_frames_fuzz)

export PLEXUS_LOG_LEVEL=error
# allow_user_poisoning=0: abseil's headers poison a table's free slots, which its unsanitized
# library then touches (Debian 13's abseil: false use-after-poison reports).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allow_user_poisoning=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
       -fno-sanitize=vptr "${abi[@]}" -I"${root}")
# Each source is compiled once into an object, however many targets link it, two at a time.
objects="${work}/objects"
mkdir -p "${objects}"
declare -A needed=()
for target in "${targets[@]}"; do
  [[ -n "${sources[${target}]+set}" ]] || { echo "run_fuzzers: no target ${target}"; exit 2; }
  for f in "tests/fuzz/${target}.cc" ${sources[${target}]} "${common[@]}"; do needed[${f}]=1; done
done
echo "run_fuzzers: compiling ${#needed[@]} sources"
export clang root objects
printf '%s\n' "${!needed[@]}" | xargs -P 2 -I{} bash -c \
  '"${clang}" "$@" -c "${root}/{}" -o "${objects}/$(echo {} | tr / _).o"' _ "${flags[@]}"
object() { echo "${objects}/$(echo "$1" | tr / _).o"; }
failed=0
for target in "${targets[@]}"; do
  binary="${work}/${target}"
  files=("$(object "tests/fuzz/${target}.cc")")
  for f in ${sources[${target}]} "${common[@]}"; do files+=("$(object "${f}")"); done
  echo "run_fuzzers: linking ${target}"
  "${clang}" -fsanitize=fuzzer,address,undefined "${files[@]}" ${absl_libs} -lssl -lcrypto \
    -lpthread -o "${binary}"
  corpus="${work}/${target}_corpus"
  mkdir -p "${corpus}"
  seeds="${root}/tests/fuzz/corpus/${target}"
  echo "run_fuzzers: running ${target} for ${seconds} s"
  if ! (cd "${work}" && "${binary}" -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 "${corpus}" "${seeds}" > "${work}/${target}.log" 2>&1); then
    echo "run_fuzzers: ${target} FOUND A PROBLEM:"
    tail -60 "${work}/${target}.log"
    failed=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "${work}/${target}.log" |
      sed "s/^/run_fuzzers: ${target}: /"
  fi
done
exit "${failed}"
