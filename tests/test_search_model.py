"""End-to-end searches with the real embedded model (slow: minutes on a laptop CPU)."""

from __future__ import annotations

import json

import pytest

from arts.search.config import SearchConfig
from arts.search.run import start_run
from arts.search.store import Store

pytestmark = pytest.mark.slow


def test_arts_search_with_the_embedded_model_on_circle_packing(tmp_path):
    cfg = SearchConfig(
        task="circle-packing-26", group=2, budget={"evals": 6}, scientist={"candidates": 3, "audits": 2}
    )
    summary = start_run(cfg, tmp_path / "run", log=print)
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    assert (
        sum(i.kind == "audit" for i in state.insights.values()) >= 3
    )  # audit statements, kept for every prompt
    rollouts = list(state.rollouts.values())
    assert rollouts, "no proposal was drawn"
    for r in rollouts:
        assert abs(sum(c["probability"] for c in r.candidates) - 1.0) < 1e-6
        assert 0 <= r.drawn < len(r.candidates) and json.loads(r.action)["parent"] in state.nodes
    assert any(e.kind == "draw" for e in state.events.values())
    children = [n for n in state.nodes.values() if n.parent is not None]
    assert children and all(
        n.transcript for n in children if n.status != "invalid" or "budget" not in n.reason
    )
    assert any(n.status == "valid" for n in children), [n.reason for n in children]
    assert any(i.kind == "memory" for i in state.insights.values())
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["nodes"] == summary["nodes"]


def test_incident_rca_search_with_the_embedded_model_writes_a_graded_answer(tmp_path):
    from arts.policy.answer_schema import schema_model
    from arts.tasks.base import resolve_task

    cfg = SearchConfig(
        task="incident-rca", group=2, budget={"rounds": 2}, scientist={"candidates": 3, "audits": 1}
    )
    summary = start_run(cfg, tmp_path / "run", log=print)
    answer = (tmp_path / "run" / "best" / "answer.json").read_text()
    schema_model(resolve_task("incident-rca").answer_schema()).model_validate_json(
        answer
    )  # valid deliverable
    assert summary["evals"] == 0 and summary["best"]["test_score"] is not None  # graded only by [test]
    with Store.open(tmp_path / "run", create=False) as store:
        state = store.load_state()
    assert state.observations and state.evidence
    assert all(
        e.observation in state.observations and e.hypothesis in state.hypotheses
        for e in state.evidence.values()
    )
    assert any(o.source == "execution" and o.node is not None for o in state.observations.values())
