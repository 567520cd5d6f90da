"""Export and offline training: a run's adapter loads in a fresh process with the same logits, merges
into a full model, resolves `best`; rollouts become a dataset; TRL trains SFT and DPO adapters."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from arts.search.cli.main import main
from arts.search.config import SearchConfig, to_toml
from arts.search.state import Event, Node, Rollout
from arts.search.store import Store
from arts.training.checkpoint import save_checkpoint
from arts.training.export import RunInfo, export
from arts.training.grpo import GRPOConfig, lora_config, make_optimizer
from arts.training.offline import OfflineConfig, dpo_rows, rollout_records, sft_rows, train

PROBE = [1, 500, 2000, 7, 42, 9, 13]
PROMPT = [{"role": "system", "content": "Answer with JSON."}, {"role": "user", "content": "Propose."}]


def action(i: int) -> str:
    return json.dumps({"parent": 1, "hypothesis": f"hypothesis number {i} for the test", "axis": "axis"})


@pytest.fixture
def run_dir(tmp_path, tiny_backend) -> Path:
    """A finished TTT run on the tiny model: checkpoints 0 and 1 (1 moved away from the base), a store
    whose best node was drawn under adapters/1, two rewarded groups, and its config."""
    return make_run(tmp_path / "run", tiny_backend, GRPOConfig())


def make_run(run: Path, tiny_backend, config: GRPOConfig) -> Path:
    torch.manual_seed(0)
    tiny_backend.add_adapter("ttt", lora_config(config))
    model = tiny_backend.model
    opt = make_optimizer(model, "ttt", config)
    save_checkpoint(run, 0, model, "ttt", tiny_backend.path, opt, {"last_round": 0})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    save_checkpoint(run, 1, model, "ttt", tiny_backend.path, opt, {"last_round": 1})
    (run / "config.toml").write_text(
        to_toml(SearchConfig(task="toy", scientist_model={"model": str(tiny_backend.path)}))
    )
    with Store.open(run) as store:
        store.add(Node(status="seed", score=-4.0, raw_score=-4.0))
        for i in range(8):
            group, adapter = 1 + i // 4, f"adapters/{i // 4}"
            r = store.add(
                Rollout(
                    round=group,
                    group=group,
                    prompt=PROMPT,
                    action=action(i),
                    reward=float(i % 2),
                    adapter=adapter,
                    old_logprob=-3.0,
                )
            )
            node = store.add(Node(parent=1, status="valid", score=-1.0 + i, raw_score=-1.0 + i, rollout=r.id))
            r.node = node.id
            store.update(r)
        store.add(
            Event(
                kind="update",
                payload={
                    "k": 1,
                    "round": 1,
                    "reward_mean": 0.5,
                    "groups_used": 1,
                    "groups_skipped": 0,
                    "loss": 0.1,
                },
            )
        )
    return run


def adapter_logits(backend) -> torch.Tensor:
    from arts.policy.backends.decoding import hf_model
    from arts.training.logprobs import adapter_scope

    with torch.no_grad(), adapter_scope(backend.model, "ttt"):
        return hf_model(backend.model)(torch.tensor([PROBE])).logits[0]


FRESH = """
import sys, json, torch
from transformers import AutoModelForCausalLM
path, merged = sys.argv[1], sys.argv[2] == "merged"
if merged:
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
else:
    from peft import PeftModel
    base = json.load(open(path + "/adapter_config.json"))["base_model_name_or_path"]
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype="float32"), path)
with torch.no_grad():
    torch.save(model(torch.tensor([{probe}])).logits[0], sys.argv[3])
"""


def fresh_logits(path: Path, merged: bool, tmp_path: Path) -> torch.Tensor:
    out = tmp_path / f"logits-{merged}.pt"
    code = FRESH.format(probe=PROBE)
    subprocess.run(
        [sys.executable, "-c", code, str(path), "merged" if merged else "adapter", str(out)], check=True
    )
    return torch.load(out)


def test_exported_adapter_gives_the_same_logits_in_a_fresh_process(run_dir, tiny_backend, tmp_path):
    out = tmp_path / "exported"
    assert main(["export", str(run_dir), "--out", str(out), "--checkpoint", "best"]) == 0
    assert {p.name for p in out.iterdir()} == {
        "adapter_config.json",
        "adapter_model.safetensors",
        "README.md",
    }
    expected = adapter_logits(tiny_backend)
    assert torch.equal(fresh_logits(out, False, tmp_path), expected)
    card = (out / "README.md").read_text()
    assert "task: toy" in card and "adapters/1" in card and "| 1 | 1 | 0.500 | 0.1000 |" in card
    assert f"base model: `{tiny_backend.path}`; trained on the local model folder" in card
    assert "--base-model HUB_ID" in card  # a local base is named as such, with the way to fix it
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and not config.get("modules_to_save")
    from safetensors.torch import load_file

    keys = list(load_file(out / "adapter_model.safetensors"))
    assert all(k.startswith("base_model.model.model.layers.") and ".ttt." not in k for k in keys)


def test_merged_export_is_a_full_model_with_the_adapters_logits(run_dir, tiny_backend, tmp_path):
    out = export(run_dir, tmp_path / "merged", "latest", merge=True, info=RunInfo(task="toy"))
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {
        p.name for p in out.iterdir()
    }
    torch.testing.assert_close(
        fresh_logits(out, True, tmp_path), adapter_logits(tiny_backend), atol=1e-5, rtol=1e-5
    )


def test_an_adapter_on_the_tied_output_head_merges_without_touching_the_input_embeddings(tmp_path, tiny_backend):
    """LoRA on `lm_head` (tied to the embeddings in SmolLM2): `arts export --merge` unties the head, so the
    merged model reads its inputs as the base does and gives the adapter's logits; the peft folder too."""
    from safetensors.torch import load_file

    run = make_run(tmp_path / "run", tiny_backend, GRPOConfig(target_modules=["lm_head"]))
    out = tmp_path / "merged"
    assert main(["export", str(run), "--out", str(out), "--merge"]) == 0
    expected = adapter_logits(tiny_backend)
    torch.testing.assert_close(fresh_logits(out, True, tmp_path), expected, atol=1e-5, rtol=1e-5)
    weights = load_file(out / "model.safetensors")
    base = tiny_backend.model.get_base_model().get_input_embeddings().weight
    assert torch.equal(weights["model.embed_tokens.weight"], base.detach())
    assert main(["export", str(run), "--out", str(tmp_path / "peft")]) == 0
    assert torch.equal(fresh_logits(tmp_path / "peft", False, tmp_path), expected)


def test_export_resolves_adapters_and_refuses_clearly(run_dir, tmp_path):
    with pytest.raises(ValueError, match="latest, best or one of"):
        export(run_dir, tmp_path / "x", "7")
    with pytest.raises(ValueError, match="not proposed under a TTT adapter"):
        export(run_dir, tmp_path / "x", "best", info=RunInfo(best_node=1))
    export(run_dir, tmp_path / "zero", "0", force=True)
    with pytest.raises(ValueError, match="not empty"):
        export(run_dir, tmp_path / "zero", "1")


def test_export_refuses_an_adapter_that_never_trained_unless_forced(run_dir, tmp_path, capsys):
    """A run that applied no update holds only checkpoint 0, LoRA's initialisation (B = 0): exported, it
    would be the base model under an adapter's name."""
    shutil.rmtree(run_dir / "adapters" / "1")
    out = tmp_path / "untrained"
    assert main(["export", str(run_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "never trained" in err and "--force" in err and not out.exists()
    assert main(["export", str(run_dir), "--out", str(out), "--force"]) == 0
    assert (out / "adapter_model.safetensors").is_file()


def test_the_embedded_base_is_exported_under_its_published_name(run_dir, tmp_path):
    from arts.training.export import PUBLISHED_EMBEDDED, published_base

    converted = tmp_path / "smollm2-135m-instruct"  # what policy.backends.weights leaves in its cache
    converted.mkdir()
    (converted / "arts-source.json").write_text('{"gguf": "SmolLM2-135M-Instruct.Q4_1.gguf", "bytes": 1}')
    base, weights = published_base(str(converted))
    assert base == PUBLISHED_EMBEDDED == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert "Q4_1" in weights and "dequantised" in weights
    out = tmp_path / "named"
    argv = ["export", str(run_dir), "--out", str(out), "--base-model", "org/tiny-model"]
    assert main(argv) == 0
    assert (
        json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == "org/tiny-model"
    )
    card = (out / "README.md").read_text()
    assert card.startswith("---\nbase_model: org/tiny-model\n") and "best score 6" in card


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_rollouts_export_loads_with_load_dataset_in_trl_columns(run_dir, tmp_path, fmt):
    from datasets import load_dataset

    out = tmp_path / "data"
    assert main(["rollouts", "export", str(run_dir), "--out", str(out), "--format", fmt]) == 0
    data = load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert data.column_names[:3] == ["prompt", "completion", "reward"]
    assert {"run", "round", "group", "node", "adapter"} <= set(data.column_names)
    row = data[0]
    assert row["prompt"] == PROMPT and row["completion"][0]["role"] == "assistant"
    assert row["completion"][0]["content"].startswith('{"parent": 1, ') and row["reward_source"] == "ttt"
    from arts.training.offline import load_records

    records = load_records([str(out)])
    assert len(sft_rows(records)) == 4
    pairs = dpo_rows(records)
    assert len(pairs) == 8  # per group: 2 rewarded x 2 unrewarded
    assert all(p["chosen"] != p["rejected"] for p in pairs)


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_offline_training_with_trl_writes_a_loadable_adapter(run_dir, tiny_backend, tmp_path, method):
    out = tmp_path / method
    assert main(["train", "--from", str(run_dir), "--out", str(out), "--method", method, "--steps", "2"]) == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]) == tiny_backend.path
    assert json.loads((out / "training.json").read_text())["method"] == method
    tiny_backend.load_adapter("offline", out)
    assert tiny_backend.generate(PROMPT, adapter="offline")[0][0].text is not None


def test_offline_training_refuses_runs_without_signal():
    records = rollout_records(
        [{"round": 1, "group": 1, "prompt": PROMPT, "action": action(0), "reward": 0.0}], "r", None
    )
    with pytest.raises(ValueError, match="nothing to train on"):
        train(records, Path("unused"), OfflineConfig(method="dpo"))


def test_a_run_without_ttt_exports_rewards_from_its_node_scores(run_dir, tmp_path, capsys):
    """Rewards are computed as TTT would have: each group against the valid scores before it."""
    with Store.open(run_dir, create=False) as store:
        for r in store.all(Rollout):
            store.update(r.model_copy(update={"reward": None}))
        broken = store.get(Node, store.get(Rollout, 2).node)
        store.update(broken.model_copy(update={"status": "invalid", "score": None, "raw_score": None}))
    out = tmp_path / "plain"
    assert main(["rollouts", "export", str(run_dir), "--out", str(out)]) == 0
    assert "8 rewarded rollouts (8 rewarded at export" in capsys.readouterr().out
    from datasets import load_dataset

    data = load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache"))  # a fresh cache
    assert set(data["reward_source"]) == {"computed"}
    # each valid node beats its parent (the seed, -4); the invalid node gets 0
    assert list(data["reward"]) == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_a_baseline_run_has_no_rollouts_and_says_why(tmp_path, capsys):
    with Store.open(tmp_path / "run") as store:
        store.add(Node(status="seed", score=1.0, raw_score=1.0))
    assert main(["rollouts", "export", str(tmp_path / "run"), "--out", str(tmp_path / "d")]) == 2
    assert "mutate or greedy proposes none" in capsys.readouterr().err


def test_the_cards_load_line_names_the_local_base_for_offline_use(run_dir, tiny_backend, tmp_path):
    out = tmp_path / "named"
    assert main(["export", str(run_dir), "--out", str(out), "--base-model", "org/tiny-model"]) == 0
    load = next(line for line in (out / "README.md").read_text().splitlines() if line.startswith("Load: "))
    assert "from_pretrained('org/tiny-model')" in load and f"give the base as '{tiny_backend.path}'" in load


def test_rollouts_export_names_the_embedded_model_in_its_model_column(run_dir, tmp_path):
    from arts.training.export import PUBLISHED_EMBEDDED

    (run_dir / "config.toml").write_text(to_toml(SearchConfig(task="toy")))  # the default model
    out = tmp_path / "data"
    assert main(["rollouts", "export", str(run_dir), "--out", str(out), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert rows and {row["model"] for row in rows} == {PUBLISHED_EMBEDDED}


def test_offline_training_of_embedded_model_runs_trains_the_embedded_weights(monkeypatch):
    """A default run's records name the embedded model by its published id, which is in no local cache:
    training takes the package's own weights (a new user's `arts train` once failed for want of a download)."""
    import arts.policy.backends.weights
    from arts.training.export import PUBLISHED_EMBEDDED

    asked = []

    def resolve(spec):
        asked.append(spec)
        raise RuntimeError("stop here")

    monkeypatch.setattr(arts.policy.backends.weights, "resolve_model", resolve)
    records = rollout_records(
        [{"round": 1, "group": 1, "prompt": PROMPT, "action": action(0), "reward": 1.0}],
        "r",
        PUBLISHED_EMBEDDED,
    )
    with pytest.raises(RuntimeError, match="stop here"):
        train(records, Path("unused"), OfflineConfig())
    assert asked == [None]  # the embedded default
