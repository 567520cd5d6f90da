"""The transformers backend and test-time training on CUDA (marked `gpu`: skipped without CUDA).

They load the embedded model, or the model folder named by ARTS_GPU_MODEL (a machine that cannot hold the
embedded GGUF passes a folder of the same shape). On CUDA the backend picks bf16; the tests check what
bf16 and the device change: grammar-constrained sampling, the log-probs the update trains against, an
update that moves the rewarded tokens with finite statistics, and `arts search --ttt` then `arts export`.
"""

from __future__ import annotations

import math
import os

import pytest

from arts.policy.scientist import Scientist, ScientistConfig
from arts.training.grpo import GRPOConfig
from arts.training.ttt import ADAPTER, ActionGroup, Trainer
from tests.doubles import STATE

pytestmark = pytest.mark.gpu
TEMPERATURE = ScientistConfig().temperature


@pytest.fixture(scope="module")
def model() -> str | None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return os.environ.get("ARTS_GPU_MODEL") or None


@pytest.fixture
def backend(model):
    from arts.policy.backends.transformers import TransformersBackend

    return TransformersBackend(model, seed=0)


def proposal(backend):
    scientist = Scientist(backend, ScientistConfig(candidates=3, max_tokens=400), adapter=ADAPTER)
    return scientist.propose(STATE, [1, 2], tail=False, seed=7)


def test_cuda_picks_bf16_samples_the_grammar_and_rescores_close_to_the_sampler(tmp_path, backend):
    import torch

    assert backend.device.type == "cuda" and backend.dtype == torch.bfloat16
    trainer = Trainer(backend, GRPOConfig(), tmp_path / "run", temperature=TEMPERATURE)
    trainer.start()
    prop = proposal(backend)
    assert prop.completion.ok and prop.spans, prop.completion.error
    sampled = prop.completion.token_ids
    stored = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
    assert stored is not None and len(stored) == len(sampled) and all(math.isfinite(v) for v in stored)
    if prop.completion.logprobs:  # bf16 kernels differ between the cached decode and the full forward
        gaps = [abs(a - b) for a, b in zip(stored, prop.completion.logprobs)]
        assert sum(gaps) / len(gaps) < 0.1, max(gaps)


def test_an_update_on_cuda_raises_the_rewarded_tokens_with_finite_statistics(tmp_path, backend):
    trainer = Trainer(backend, GRPOConfig(lr=5e-3), tmp_path / "run", temperature=TEMPERATURE)
    trainer.start()
    prop = proposal(backend)
    sampled, spans = prop.completion.token_ids, prop.spans
    assert len(spans) >= 2
    rewards = [1.0] + [0.0] * (len(spans) - 1)

    def span_sums() -> list[float]:
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
        return [math.fsum(full[s:e]) for s, e in spans]

    before = span_sums()
    for _ in range(2):
        full = trainer.proposal_logprobs(prop.messages, prop.json_schema, sampled)
        group = ActionGroup(prop.messages, prop.json_schema, ["a"] * len(spans), rewards,
                            [full[s:e] for s, e in spans], sampled, spans)  # fmt: skip
        result = trainer.update([group])
        assert result.applied
        stats = result.stats
        assert stats.steps >= 1 and all(math.isfinite(v) for v in (stats.kl, stats.kl_old, stats.old_drift))
    after = span_sums()
    assert after[0] > before[0] + 0.1
    lora = [p for n, p in backend.model.named_parameters() if "lora_" in n]
    assert lora and all(p.device.type == "cuda" and p.isfinite().all() for p in lora)


def test_arts_search_ttt_on_cuda_updates_and_exports_an_adapter(tmp_path, model, monkeypatch):
    import arts.search.run
    from arts.policy.backends.transformers import TransformersBackend
    from arts.search.cli.main import main
    from arts.search.store import Store
    from tests.doubles import RuleBackend, make_task

    def make(mc, sink, seed):
        if mc.backend == "transformers":
            return TransformersBackend(model, usage_sink=sink, seed=seed)
        return RuleBackend(seed)

    monkeypatch.setattr(arts.search.run, "make_backend", make)
    task, run, out = make_task(tmp_path / "task"), tmp_path / "run", tmp_path / "adapter"
    argv = ["search", str(task), "--ttt", "--group", "4", "-k", "2", "--audits", "0", "--rounds", "3",
            "--evals", "400", "--run-dir", str(run), "--set", "executor_model.backend=rules",
            "--set", "scientist.inspect=0", "--set", "ttt.grpo.lr=5e-3"]  # fmt: skip
    assert main(argv) == 0
    with Store.open(run, create=False) as store:
        updates = [e.payload for e in store.events("update")]
    assert updates and all(math.isfinite(u["kl"]) for u in updates)
    assert main(["export", str(run), "--out", str(out)]) == 0
    assert (out / "adapter_model.safetensors").is_file()
