#!/usr/bin/env bash
# The checks that need CUDA, in one go: the `gpu` tests (tests/test_gpu.py), then per dtype how far the
# sampler's log-probs are from the update's own forward and what an update costs (scripts/ttt_sweep.py,
# the default learner), then one GRPO update against a bare peft step (scripts/bench_grpo.py).
# Logs and tables go to $OUT (default gpu-check/).
#
# Usage: bash scripts/gpu_check.sh [--random-shape DIR]
#   ARTS_GPU_MODEL=DIR   run on that model folder instead of the embedded model;
#   --random-shape DIR   build a randomly initialised model from the config.json and tokenizer in DIR
#                        (for a machine that cannot hold the embedded GGUF): the costs are the shape's,
#                        the learning figures of random weights mean nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

if [ "${1:-}" = "--random-shape" ]; then
    ARTS_GPU_MODEL=/tmp/arts-random-shape
    "$PY" - "$2" "$ARTS_GPU_MODEL" <<'EOF' || exit 1
import sys, torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
src, dst = sys.argv[1:]
torch.manual_seed(0)
AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src)).save_pretrained(dst)
AutoTokenizer.from_pretrained(src).save_pretrained(dst)
print(f"random model of {src}'s shape at {dst}")
EOF
fi
export ARTS_GPU_MODEL=${ARTS_GPU_MODEL:-}
model=${ARTS_GPU_MODEL:-embedded}
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"

status=0
"$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/gpu-tests.log" || status=1
"$PY" scripts/ttt_sweep.py --model "$model" --dtype both --lr 1e-4 --steps 4 --rank 8 --updates 3 \
    --kl-max 0.01 --prompt-grad off --out "$OUT/ttt-sweep-cuda.csv" 2>&1 | tee "$OUT/ttt-sweep.log" || status=1
"$PY" scripts/bench_grpo.py ${ARTS_GPU_MODEL:+--model "$ARTS_GPU_MODEL"} --json "$OUT/bench-grpo-cuda.json" \
    2>&1 | tee "$OUT/bench-grpo.log" || status=1
exit $status
