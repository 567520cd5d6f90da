#!/usr/bin/env bash
# Set up (idempotent) and run the demo: the built-in tasks, every optimize task's seed program evaluated in
# the sandbox, then a short search with the embedded SmolLM2-135M scientist and executor on
# circle-packing-26, printing the best score next to the seed's, then where to follow and read it. The run
# is written under ~/.cache/arts/demo-runs/ (or $ARTS_DEMO_DIR), not into the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/arts tasks list
echo
for task in $(.venv/bin/arts tasks list | awk 'NR > 1 && $2 == "optimize" { print $1 }'); do
    .venv/bin/arts eval "$task" || echo "  (the seed of $task did not evaluate; see above)"
done
echo
# the run goes to a user folder, never into the checkout (ARTS_DEMO_DIR chooses another)
RUNS="${ARTS_DEMO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/arts/demo-runs}"
mkdir -p "$RUNS"
RUN="$RUNS/demo-$(date +%Y%m%d-%H%M%S)"
.venv/bin/arts search circle-packing-26 --evals "${DEMO_EVALS:-6}" --group 2 -k 3 --audits 1 --run-dir "$RUN"
echo
.venv/bin/arts runs "$RUNS"
echo
echo "report: $RUN/report.html (a single offline file; open it in a browser)"
echo "the console's full log: $RUN/arts.log; the run again later: .venv/bin/arts status $RUN"
