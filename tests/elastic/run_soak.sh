#!/bin/bash
# Runs the elastic churn soak for 1 minute in CI ($ELASTIC_SOAK_MINUTES overrides).
set -euo pipefail
exec "$1" --minutes="${ELASTIC_SOAK_MINUTES:-1}" --seed="${ELASTIC_SOAK_SEED:-$RANDOM}"
