#!/usr/bin/env bash
# Offline training of a scientist adapter on the rollouts of finished runs, on all GPUs of one machine
# through `accelerate launch` (TRL's SFTTrainer or DPOTrainer, data-parallel).
# The run stores are read once, here, into datasets (`arts rollouts export`); the training processes
# read only those, so no process needs a run's store lock.
# Usage: bash scripts/train_multi_gpu.sh OUT_DIR RUN_DIR [RUN_DIR ...]
#        METHOD=dpo STEPS=200 NUM_GPUS=8 MODEL=path/to/base bash scripts/train_multi_gpu.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -lt 2 ]; then
    echo "usage: $0 OUT_DIR RUN_DIR [RUN_DIR ...]" >&2
    exit 2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
OUT="$1"; shift
METHOD="${METHOD:-sft}"
STEPS="${STEPS:-200}"
NUM_GPUS="${NUM_GPUS:-$(.venv/bin/python -c 'import torch; print(max(torch.cuda.device_count(), 1))')}"
DATA_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/arts-data-XXXXXX")"
trap 'rm -rf "$DATA_ROOT"' EXIT

DATA=()
for RUN in "$@"; do
    D="$DATA_ROOT/$(basename "$RUN")"
    .venv/bin/arts rollouts export "$RUN" --out "$D"
    DATA+=("$D")
done

if [ -n "${CPU:-}" ]; then  # a smoke test of the same path on CPU processes (gloo), e.g. CPU=1 NUM_GPUS=2
    LAUNCH=(--cpu --num_processes "$NUM_GPUS" --num_machines 1 --mixed_precision no --dynamo_backend no)
elif [ "$NUM_GPUS" -gt 1 ]; then
    LAUNCH=(--multi_gpu --num_processes "$NUM_GPUS" --num_machines 1 --mixed_precision bf16 --dynamo_backend no)
else
    LAUNCH=(--num_processes 1 --num_machines 1 --mixed_precision bf16 --dynamo_backend no)
fi
.venv/bin/accelerate launch "${LAUNCH[@]}" -m arts.training.offline --data "${DATA[@]}" --out "$OUT" --method "$METHOD" --steps "$STEPS" \
    --batch-size "${BATCH_SIZE:-4}" ${MODEL:+--model "$MODEL"} ${GRADIENT_CHECKPOINTING:+--gradient-checkpointing}
