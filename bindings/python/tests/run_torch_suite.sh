#!/usr/bin/env bash
# Runs torch's distributed test suite against plexus (torch_suite.py) under Debian's
# interpreter, with the assembled plexus package first on the path.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="${root}/bindings/python/plexus_pkg"
export PYTHONDONTWRITEBYTECODE=1
cd "${TEST_TMPDIR}"
exec /usr/bin/python3 "${root}/bindings/python/tests/torch_suite.py" "$@"
