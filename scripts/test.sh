#!/usr/bin/env bash
# Set up (idempotent) and run the test suite. Extra arguments go to pytest (e.g. `-m slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
exec .venv/bin/python -m pytest "$@"
