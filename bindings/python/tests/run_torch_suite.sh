#!/usr/bin/env bash
# Runs a driver of one of torch's own test suites against plexus (torch_suite.py,
# torch_fault_tolerance_suite.py: the first argument) under Debian's interpreter, with the
# assembled plexus package first on the path.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="${root}/bindings/python/plexus_pkg"
export PYTHONDONTWRITEBYTECODE=1
cd "${TEST_TMPDIR}"
exec /usr/bin/python3 "${root}/bindings/python/tests/$1" "${@:2}"
