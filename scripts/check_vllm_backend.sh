#!/usr/bin/env bash
# Checks the in-process vLLM backend against vLLM's own classes, on a CPU machine.
#
# vLLM 0.33 pins torch 2.14 and transformers < 5.21, which clash with the project's torch 2.13 /
# transformers 5.24, so it gets its own virtual environment (default /work/vllm-venv, override with
# VLLM_VENV). There vllm is installed WITHOUT its dependencies (they would pull a multi-GB CUDA torch),
# next to the CPU torch wheel and only the pure-Python packages needed to import `vllm.SamplingParams`,
# `vllm.sampling_params.StructuredOutputsParams`, `vllm.lora.request.LoRARequest`, `vllm.outputs`,
# `vllm.engine.arg_utils.EngineArgs`, `vllm.LLM` and vLLM's LoRA checkpoint loader (`LoRAModel`, which
# also needs einops; peft writes the checkpoint it reads). tests/test_vllm_backend.py then builds the real
# vLLM objects through the backend's own code path. The `gpu` test of a real `vllm.LLM` skips here.
# arts itself is installed there editable and without dependencies, so `arts.policy.backends.vllm`
# imports as it does in the project's environment.
# Idempotent: a stamp file makes the second run skip the installs. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${VLLM_VENV:-/work/vllm-venv}"
STAMP="$VENV/.arts-vllm-stamp"
want="$(cat scripts/check_vllm_backend.sh pyproject.toml | sha256sum | cut -d' ' -f1)"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
    echo "arts: preparing $VENV for the vLLM check" >&2
    [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
    pip install --no-deps "vllm==0.33.0"
    pip install "torch==2.13.0"  # the CPU wheel on this disk (find-links), not PyPI's CUDA build
    # What importing vllm's parameter classes needs (found by importing until nothing was missing),
    # transformers and xgrammar as vllm 0.33 pins them, pytest.
    pip install "transformers>=5.16.1,<5.21" numpy packaging msgspec "pydantic>=2.12" regex cbor2 \
        psutil pyzmq urllib3 aiohttp requests openai-harmony openai cloudpickle pillow pybase64 \
        cachetools uvloop py-cpuinfo pyyaml tqdm "xgrammar==0.2.8" \
        prometheus-client fastapi partial-json-parser llguidance einops peft pytest
    pip install --no-deps -e .  # the package layout lives in pyproject.toml, hence its place in the stamp
    echo "$want" > "$STAMP"
fi
"$VENV/bin/python" -c "import vllm, torch; print(f'vllm {vllm.__version__}, torch {torch.__version__}')"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -m "not slow" tests/test_vllm_backend.py -v "$@"
