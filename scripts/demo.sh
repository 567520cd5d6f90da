#!/usr/bin/env bash
# Set up (idempotent) and run the demo: the built-in tasks, then a short search with the embedded
# SmolLM2-135M scientist and executor on circle-packing-26, printing the best score next to the seed's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/arts tasks list
echo
.venv/bin/arts search circle-packing-26 --evals "${DEMO_EVALS:-6}" --group 2 -k 3 --audits 1 \
    --run-dir "runs/demo-$(date +%Y%m%d-%H%M%S)"
