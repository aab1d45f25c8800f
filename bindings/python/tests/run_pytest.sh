#!/usr/bin/env bash
# Runs one pytest file under Debian's interpreter (python3-numpy, python3-torch) with the
# assembled plexus package first on the path.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="${root}/bindings/python/plexus_pkg:${root}/bindings/python/tests:${root}/bindings/python/examples"
export PYTHONDONTWRITEBYTECODE=1
cd "${root}"
args=(-q -p no:cacheprovider -o "tmp_path_retention_policy=none")
[[ -n "${XML_OUTPUT_FILE:-}" ]] && args+=("--junitxml=${XML_OUTPUT_FILE}")
exec /usr/bin/python3 -m pytest "${args[@]}" "$@"
