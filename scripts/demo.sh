#!/usr/bin/env bash
# Set up (idempotent) and run the demo: every built-in task's seed program evaluated in the sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/arts tasks list
echo
for t in $(.venv/bin/python -c "from tasks.base import builtin_names; print(*builtin_names())"); do
    .venv/bin/arts eval "$t" || true
done
