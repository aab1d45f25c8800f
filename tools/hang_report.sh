#!/usr/bin/env bash
# Runs tools/hang_report.py under Debian's python3 (see that file).
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
script="${here}/hang_report.py"
[[ -f "${script}" ]] || script="${BASH_SOURCE[0]}.runfiles/plexus/tools/hang_report.py"
[[ -f "${script}" ]] || script="${BASH_SOURCE[0]}.runfiles/_main/tools/hang_report.py"  # bzlmod
exec /usr/bin/python3 "${script}" "$@"
