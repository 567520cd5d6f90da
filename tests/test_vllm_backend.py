"""The vLLM backend against vLLM's own classes.

Skipped where vllm is not importable (arts' default environment); `scripts/check_vllm_backend.sh` runs
it in a separate CPU environment that has vllm's parameter classes. The objects are built through the
backend's own code path (`sampling_params`, `lora_request`, `load_adapter`, `to_completions`,
`completion_logprobs`), not by hand. The `gpu` test drives a real `vllm.LLM` and skips without CUDA.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

vllm = pytest.importorskip("vllm")

from vllm import SamplingParams  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.logprobs import Logprob  # noqa: E402
from vllm.lora.request import LoRARequest  # noqa: E402
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402
from vllm.sampling_params import SamplingType, StructuredOutputsParams  # noqa: E402

from arts.policy.backends.vllm import (  # noqa: E402
    VLLMBackend,
    completion_logprobs,
    engine_args,
    logprob_params,
    lora_request,
    sampling_params,
    to_completions,
)
from arts.policy.base import BackendError, Request, Sampling  # noqa: E402


class Verdict(BaseModel):
    label: Literal["support", "oppose"]
    confidence: float


def adapter_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    return folder


def test_engine_args_are_vllm_engine_args(tmp_path):
    kwargs = engine_args(str(tmp_path), seed=3, max_lora_rank=16, max_loras=4, gpu_memory_utilization=0.5)
    args = EngineArgs(**kwargs)
    assert args.enable_lora and args.enable_prefix_caching
    assert (args.max_lora_rank, args.max_loras, args.seed, args.gpu_memory_utilization) == (16, 4, 3, 0.5)


def test_sampling_params_carry_every_setting():
    s = Sampling(temperature=0.7, top_p=0.9, max_tokens=33, stop=["\n\n", "END"], seed=5)
    p = sampling_params(s, 4, Verdict)
    assert isinstance(p, SamplingParams)
    assert (p.n, p.temperature, p.top_p, p.max_tokens, p.seed) == (4, 0.7, 0.9, 33, 5)
    assert p.stop == ["\n\n", "END"]
    assert isinstance(p.structured_outputs, StructuredOutputsParams)
    assert p.structured_outputs.json == Verdict.model_json_schema()
    assert p.sampling_type == SamplingType.RANDOM_SEED


def test_sampling_params_greedy_and_unconstrained():
    p = sampling_params(Sampling(temperature=0.0, stop=[]), 1, None)
    assert p.structured_outputs is None
    assert p.sampling_type == SamplingType.GREEDY
    assert p.stop == [] and p.seed is None


def test_lora_request_is_unique_per_id(tmp_path):
    folder = adapter_folder(tmp_path, "3")
    req = lora_request("scientist", 7, folder)
    assert isinstance(req, LoRARequest)
    assert (req.lora_name, req.lora_int_id, req.lora_path) == ("scientist@7", 7, str(folder.resolve()))
    assert req != lora_request("scientist", 8, folder)  # vLLM compares requests by name
    with pytest.raises(ValueError):
        lora_request("scientist", 0, folder)  # vLLM's ids start at 1


def test_load_adapter_gives_each_new_folder_a_new_id(tmp_path):
    backend = VLLMBackend.__new__(VLLMBackend)  # no engine: only the adapter bookkeeping runs
    backend._adapters, backend._next_id = {}, 1
    backend.load_adapter("scientist", adapter_folder(tmp_path, "1"))
    first = backend._lora("scientist")
    backend.load_adapter("scientist", tmp_path / "1")  # the same folder again: nothing changes
    assert backend._lora("scientist") is first
    backend.load_adapter("scientist", adapter_folder(tmp_path, "2"))
    second = backend._lora("scientist")
    assert isinstance(second, LoRARequest)
    assert (first.lora_int_id, second.lora_int_id) == (1, 2)
    assert second.lora_path.endswith("/2") and second.lora_name != first.lora_name
    assert backend._lora(None) is None
    with pytest.raises(BackendError, match="not loaded"):
        backend._lora("other")
    with pytest.raises(BackendError, match="adapter_config.json"):
        backend.load_adapter("scientist", tmp_path)


def test_prompt_logprobs_are_read_for_the_completion_tokens():
    p = logprob_params()
    assert isinstance(p, SamplingParams) and p.prompt_logprobs == 0 and p.max_tokens == 1
    rows = [None, {11: Logprob(-0.5)}, {12: Logprob(-1.5), 99: Logprob(-0.1)}, {13: Logprob(-2.0)}]
    assert completion_logprobs(rows, 2, [12, 13]) == [-1.5, -2.0]


def test_to_completions_reads_a_request_output():
    outs = [
        CompletionOutput(index=0, text='{"label": "support", "confidence": 0.9}', token_ids=[5, 6, 7],
                         cumulative_logprob=None, logprobs=None, finish_reason="stop"),
        CompletionOutput(index=1, text='{"label": "maybe"', token_ids=[5, 8],
                         cumulative_logprob=None, logprobs=None, finish_reason="length"),
    ]  # fmt: skip
    req = RequestOutput("r0", "prompt", [1, 2, 3, 4], None, outs, finished=True, num_cached_tokens=2)
    good, bad = to_completions(req, Verdict, wall_s=0.25)
    assert good.ok and good.parsed == Verdict(label="support", confidence=0.9)
    assert (good.prompt_tokens, good.completion_tokens, good.token_ids) == (4, 3, [5, 6, 7])
    assert good.constrained and good.finish_reason == "stop" and good.wall_s == 0.25
    assert not bad.ok and bad.parsed is None and bad.finish_reason == "length"


def test_requests_of_one_adapter_go_to_the_engine_as_one_chat(tmp_path):
    """`generate_each` hands the engine vLLM's own SamplingParams, one per request (its schema, n and
    seed), in one `chat` call per adapter; each request gets its own outputs and usage record."""
    calls = []

    class Engine:  # stands in for vllm.LLM: records what it is handed, answers with real RequestOutputs
        def chat(self, chats, params, use_tqdm, lora_request):
            calls.append((chats, params, lora_request))
            outs = []
            for k, p in enumerate(params):
                text = '{"label": "support", "confidence": 0.5}' if p.structured_outputs else "free text"
                done = [CompletionOutput(index=i, text=text, token_ids=[1, 2], cumulative_logprob=None,
                                         logprobs=None, finish_reason="stop") for i in range(p.n)]  # fmt: skip
                outs.append(
                    RequestOutput(f"r{k}", "p", [9] * (k + 3), None, done, finished=True, num_cached_tokens=0)
                )
            return outs

    seen = []
    backend = VLLMBackend.__new__(VLLMBackend)
    backend._llm, backend._adapters, backend._next_id = Engine(), {}, 1
    backend.model_id, backend.usage_sink = "m", seen.append
    backend.load_adapter("scientist", adapter_folder(tmp_path, "1"))
    requests = [
        Request("Verdict?", n=2, sampling=Sampling(max_tokens=30, seed=4), schema=Verdict, purpose="judge"),
        Request("Say more.", sampling=Sampling(temperature=0, max_tokens=8), purpose="free"),
        Request("Verdict again?", schema=Verdict, adapter="scientist", purpose="ttt"),
    ]
    out = backend.generate_each(requests)
    assert len(calls) == 2  # the base model's two requests in one call, the adapter's in another
    chats, params, lora = calls[0]
    assert [c[0]["content"] for c in chats] == ["Verdict?", "Say more."] and lora is None
    assert all(isinstance(p, SamplingParams) for p in params)
    assert (params[0].n, params[0].seed, params[0].max_tokens) == (2, 4, 30)
    assert params[0].structured_outputs is not None and params[1].structured_outputs is None
    assert params[1].temperature == 0 and calls[1][2] is backend._lora("scientist")
    assert [len(c) for c in out] == [2, 1, 1]
    assert out[0][0].parsed == Verdict(label="support", confidence=0.5) and out[1][0].text == "free text"
    assert [u.purpose for u in seen] == ["judge", "free", "ttt"] and seen[2].adapter == "scientist"
    assert [u.prompt_tokens for u in seen] == [3, 4, 3]


def test_vllms_loader_reads_a_checkpoint_of_lora_on_the_output_head(tmp_path, monkeypatch):
    """`ttt.grpo.target_modules = ["lm_head"]` on a model whose head is tied to its embeddings (SmolLM2's
    shape): the checkpoint `save_checkpoint` writes is read by vLLM's own LoRA loader, its config by
    `PEFTHelper` and its weights as the lm_head module's A and B (vLLM wraps a Llama's lm_head, tied or
    not, in `LogitsProcessorWithLoRA`), with no embedding weights that vLLM would reject."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from transformers import LlamaConfig, LlamaForCausalLM
    from vllm.lora import lora_model
    from vllm.lora.lora_model import LoRAModel
    from vllm.lora.peft_helper import PEFTHelper

    from arts.training.checkpoint import save_checkpoint

    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["lm_head"], init_lora_weights=False)
    model = peft.get_peft_model(LlamaForCausalLM(config), lora, adapter_name="ttt")
    folder = save_checkpoint(tmp_path, 1, model, "ttt", tmp_path / "base", None, {})
    helper = PEFTHelper.from_local_dir(str(folder), max_position_embeddings=None)
    monkeypatch.setattr(lora_model, "PIN_MEMORY", False)  # pinned host memory is for a GPU's copies
    expected = {"lm_head", "embed_tokens", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                "down_proj"}  # fmt: skip
    loaded = LoRAModel.from_local_checkpoint(
        str(folder), expected, helper, lora_model_id=1, device="cpu", model_vocab_size=config.vocab_size
    )
    head = loaded.get_lora("lm_head")
    assert head is not None and set(loaded.loras) == {"lm_head"}
    assert tuple(head.lora_a.shape) == (4, 32) and tuple(head.lora_b.shape) == (96, 4)
    b = model.base_model.model.lm_head.lora_B["ttt"].weight.detach()
    a = model.base_model.model.lm_head.lora_A["ttt"].weight.detach()
    assert torch.equal(head.lora_a, a) and torch.equal(head.lora_b, b)  # as trained; vLLM scales them later
    assert helper.r == 4 and helper.lora_alpha == 8 and helper.target_modules == ["lm_head"]


@pytest.mark.gpu
def test_real_engine_samples_structured_answers_and_scores_them():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    seen = []
    backend = VLLMBackend(usage_sink=seen.append, max_model_len=2048)
    prompt = "Does a bigger learning rate help here? Answer with a label and a confidence."
    [answers] = backend.generate(prompt, n=3, sampling=Sampling(max_tokens=64, seed=1), schema=Verdict)
    assert len(answers) == 3 and all(a.ok for a in answers), [a.error for a in answers]
    assert seen[0].prompt_tokens > 0 and seen[0].completion_tokens > 0
    lp = backend.logprobs(prompt, answers[0].token_ids)
    assert len(lp) == len(answers[0].token_ids) and all(v <= 0.0 for v in lp)
