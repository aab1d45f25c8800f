#!/bin/bash
# Runs the elastic churn soak for 2 minutes ($ELASTIC_SOAK_MINUTES overrides).
set -euo pipefail
exec "$1" --minutes="${ELASTIC_SOAK_MINUTES:-2}" --seed="${ELASTIC_SOAK_SEED:-$RANDOM}"
