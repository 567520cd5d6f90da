#!/usr/bin/env bash
# A test-time-training search on one machine: the embedded scientist samples N=4 actions per round,
# each round's group is rewarded (70th percentile of the scores so far) and a LoRA GRPO update follows
# every round; adapters land in <run-dir>/adapters/<k>/, and the best one is exported at the end.
# Usage: bash scripts/ttt_search.sh [TASK] [RUN_DIR]   (extra `arts search` flags via ARTS_FLAGS)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
TASK="${1:-circle-packing-26}"
RUN_DIR="${2:-runs/${TASK}-ttt-$(date +%Y%m%d-%H%M%S)}"

.venv/bin/arts search "$TASK" --ttt --group 4 -k 5 --update-every 1 --lora-rank 8 --lr 2e-4 \
    --evals 40 --run-dir "$RUN_DIR" ${ARTS_FLAGS:-}
.venv/bin/arts export "$RUN_DIR" --out "$RUN_DIR/export-best" --checkpoint best \
    || .venv/bin/arts export "$RUN_DIR" --out "$RUN_DIR/export-latest" --checkpoint latest
