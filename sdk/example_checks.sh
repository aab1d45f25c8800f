# Sourced by the tests that run docs/examples/cpp/average_service.cc: what every rank must print.

# expected_checksum N STEPS: 1024 x ((N + 1) / 2 + STEPS x (N - 1) / 2), as the example explains.
expected_checksum() {
  awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", 1024 * ((n + 1) / 2 + s * (n - 1) / 2) }'
}

# check_ranks OUTPUT N STEPS WHAT: exits 1 unless each of the N ranks printed its checksum line.
check_ranks() {
  local want
  want="$(expected_checksum "$2" "$3")"
  for ((r = 0; r < $2; ++r)); do
    if ! grep -qx "rank ${r} of $2: checksum ${want} after $3 steps" <<< "$1"; then
      echo "FAIL: $4: rank ${r} of $2 did not print checksum ${want}:"
      echo "$1"
      exit 1
    fi
  done
  echo "ok: $4"
}
