"""Profiles for model size: `small` scaffolding for the 135M default, `capable` for larger models.

Harness tests with scripted backends (they test what each profile offers the model and that the round runs
end to end under it), plus a check of how `auto` reads a local model's size.
"""

from __future__ import annotations

import json
import re

import pytest

from arts.search.config import SearchConfig, load_config
from arts.search.profiles import auto_profile
from arts.search.store import Store
from tests.doubles import RuleBackend, make_task, run_with_rules


def test_auto_picks_small_for_the_embedded_and_small_local_models_and_capable_otherwise(
    tmp_path, tiny_model_dir
):
    assert auto_profile("transformers", None) == "small"
    assert auto_profile("transformers", str(tiny_model_dir)) == "small"
    big = tmp_path / "big"
    big.mkdir()
    (big / "config.json").write_text(
        json.dumps(
            {"hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 11008, "vocab_size": 32000}
        )
    )
    assert auto_profile("transformers", str(big)) == "capable"
    assert auto_profile("openai", "qwen-7b") == "capable"  # a served model takes the flag


def test_a_profile_supplies_defaults_and_explicit_settings_win():
    small = load_config(None, {})
    assert small.profile == "small" and small.scientist.directed and small.executor.value_menu
    capable = load_config(None, {"profile": "capable", "executor.value_menu": True})
    assert capable.profile == "capable" and not capable.scientist.directed and capable.scientist.parents == 0
    assert capable.executor.value_menu  # set explicitly: the profile does not override it
    assert "write_file" in capable.executor.ops and capable.render.budget_tokens > small.render.budget_tokens
    resolved = SearchConfig.model_validate(json.loads(capable.model_dump_json()))
    assert resolved == capable  # a resumed run re-reads the resolved config unchanged


class CapableBackend(RuleBackend):
    """A scripted larger model: free hypotheses on any shown parent, whole-function rewrites."""

    def __init__(self):
        super().__init__()
        self.parents_offered: list[list[int]] = []
        self.executor_ops: list[set[str]] = []

    def answer(self, schema, purpose, sample=0):
        if purpose == "propose":
            item = schema.model_fields["candidates"].annotation.__args__[0]
            parents = list(item.model_fields["parent"].annotation.__args__)
            self.parents_offered.append(parents)
            k = schema.model_fields["candidates"].metadata[0].min_length
            props = item.model_json_schema()["properties"]
            axes = props["axis"].get("enum", ["value"])  # the plan's axes, when it named some
            return {
                "candidates": [
                    {
                        "parent": parents[i % len(parents)],
                        "hypothesis": f"return a value nearer three, variant {i}"
                        + (f" of list {sample}" if sample else ""),
                        "axis": axes[i % len(axes)],
                        "region": props["region"].get("enum", ["functions"])[-1],
                        "probability": 0.5,
                    }
                    for i in range(k)
                ]
            }
        if purpose == "executor":
            text = json.dumps(schema.model_json_schema())
            self.executor_ops.append(
                set(re.findall(r'"const": "(\w+)"', text))
                & {"replace_function", "write_file", "set_constant", "replace_lines", "set_return"}
            )
            value = round(3.0 - 0.5 / (len(self.executor_ops) + 1), 4)
            action = {
                "op": "replace_function",
                "name": "value",
                "body": f"def value():\n    return {value}\n",
            }
            return {"action": action} if "action" in schema.model_fields else action
        return super().answer(schema, purpose, sample)


def test_the_capable_profile_runs_free_hypotheses_parent_choice_and_function_rewrites(tmp_path, monkeypatch):
    backend = CapableBackend()

    def make(mc, sink, seed):
        backend.sink = sink
        return backend

    monkeypatch.setattr("arts.search.run.make_backend", make)
    task = make_task(tmp_path / "task")
    cfg = load_config(None, {"task": str(task), "profile": "capable", "group": 2, "budget.evals": 6})
    summary = run_with_rules(cfg, tmp_path / "run")
    assert summary["valid_nodes"] >= 3 and summary["best"]["score"] > -4.0
    assert max(len(p) for p in backend.parents_offered) > 1  # the scientist chooses among shown nodes
    assert all({"replace_function", "write_file"} <= ops for ops in backend.executor_ops)
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    edits = [t["action"]["op"] for n in state.nodes.values() for t in n.transcript if t.get("action")]
    assert edits and set(edits) == {"replace_function"}
    assert not any(h.text.startswith(("increase", "decrease")) for h in state.hypotheses.values())
    assert state.meta["plan"]["axes"] == ["x value", "precision"]  # the capable profile asks for them
    axes = {h.axis for h in state.hypotheses.values()}
    assert {"x value", "precision"} <= axes <= {"x value", "precision", "other"}  # and proposals use them


def test_the_small_profile_directs_hypotheses_at_real_targets(tmp_path, rules):
    task = make_task(tmp_path / "task")
    cfg = load_config(None, {"task": str(task), "group": 2, "budget.evals": 4})
    assert cfg.profile == "small"
    run_with_rules(cfg, tmp_path / "run")
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    texts = [h.text for h in state.hypotheses.values()]
    assert texts and all(re.match(r"(increase|decrease|rewrite) (X|value)\b", t) for t in texts)


@pytest.mark.slow
def test_the_capable_profile_with_the_embedded_model_stays_valid_or_cleanly_refused(tmp_path):
    """The 135M model under `capable`: every node valid or invalid with a recorded reason, no crash."""
    from arts.search.run import start_run

    cfg = load_config(
        None,
        {
            "task": "circle-packing-26",
            "profile": "capable",
            "group": 2,
            "budget.evals": 3,
            "budget.rounds": 2,
            "scientist.audits": 0,
        },
    )
    summary = start_run(cfg, tmp_path / "run", log=lambda line: None)
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    nodes = [n for n in state.nodes.values() if n.parent is not None]
    assert all(n.status == "valid" or n.reason for n in nodes)
    refused = [e for e in state.events.values() if e.kind == "proposal_failed"]
    assert summary["nodes"] + len(refused) >= 1
