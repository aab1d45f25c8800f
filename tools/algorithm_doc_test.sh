#!/usr/bin/env bash
# docs/algorithm_names.md is what tools/algorithm_doc prints from the catalog of schedules.
set -euo pipefail
checkout="$(dirname "$(readlink -f WORKSPACE)")"
if ! diff -u "${checkout}/docs/algorithm_names.md" <(tools/algorithm_doc); then
  echo "docs/algorithm_names.md is not the catalog's:" \
       "run bazel run //tools:algorithm_doc > docs/algorithm_names.md"
  exit 1
fi
