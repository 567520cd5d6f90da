from arts.search.render import RenderConfig, render_state
from arts.search.state import Node, SearchState
from tests.doubles import tree as _tree  # the same synthetic tree the benchmark measures


def count(text: str) -> int:
    return len(text) // 4


def test_prompt_stops_growing_past_the_budget():
    cfg = RenderConfig(budget_tokens=600)
    sizes = {n: count(render_state(_tree(n), "task " * 200, cfg, count)[0]) for n in (10, 200, 2000)}
    assert sizes[2000] <= 600
    assert sizes[2000] <= sizes[200] * 1.1


def test_shown_parents_are_valid_and_include_the_best():
    s = _tree(300)
    _, ids = render_state(s, "task", RenderConfig(), count)
    assert all(s.nodes[i].status in ("seed", "valid") for i in ids)
    assert s.best().id in ids


def test_seedless_root_is_the_only_parent_before_any_draft():
    s = SearchState(nodes={1: Node(id=1, status="seed")})
    _, ids = render_state(s, "task", RenderConfig(), count)
    assert ids == [1]


def _edited(nid: int, parent: int, action: dict, valid: bool, score: float | None) -> Node:
    entry = {"action": action, "applied": True, "valid": valid, "score": score}
    status = "valid" if valid else "invalid"
    return Node(
        id=nid, parent=parent, status=status, transcript=[entry], files={}, raw_score=score, score=score
    )


def test_tried_edits_list_the_best_then_the_latest_about_the_named_targets_in_words():
    from arts.search.render import tried_edits

    m = lambda v: {"op": "set_constant", "name": "MARGIN", "value": v}  # noqa: E731
    seed = Node(id=1, parent=None, status="seed", files={}, raw_score=1.0, score=1.0)
    nodes = [
        seed,
        _edited(2, 1, m("0.02"), True, 1.15),
        _edited(3, 1, m("1.0"), True, 0.0),
        _edited(4, 2, {"op": "set_return", "function": "pack", "expression": "x"}, False, None),
        _edited(5, 2, m("0.05"), True, 1.15),
        _edited(6, 2, {"op": "set_constant", "name": "RING", "value": "3"}, True, 1.7),
    ]
    state = SearchState(nodes={n.id: n for n in nodes})
    text = tried_edits(state, {"MARGIN"}, lambda s: s, limit=4)
    assert text.splitlines() == [
        "- MARGIN = 0.05 on node 2: no change",
        "- MARGIN = 0.02 on node 1: better",
        "- MARGIN = 1.0 on node 1: worse",
    ]
    assert "1.15" not in text  # no score to copy
    everything = tried_edits(state, set(), lambda s: s).splitlines()
    assert (
        everything[0] == "- RING = 3 on node 2: better" and "- pack returns x on node 2: failed" in everything
    )


def test_memory_entries_and_audit_notes_bound_what_the_prompt_shows():
    from arts.search.render import shown_memory
    from arts.search.state import Insight

    insights = {i: Insight(id=i, text=f"note {i}", kind="memory") for i in range(1, 5)}
    insights |= {i: Insight(id=i, text=f"audit {i}", kind="audit") for i in range(5, 9)}
    s = SearchState(nodes={1: Node(id=1, status="seed")}, insights=insights)
    text, _ = render_state(s, "task", RenderConfig(memory_entries=2, audit_notes=1), count)
    assert "note 3" in text and "note 4" in text and "note 2" not in text
    assert "audit 5" in text and "audit 6" not in text
    none, _ = render_state(s, "task", RenderConfig(memory_entries=0, audit_notes=0), count)
    assert "note" not in none and "audit" not in none  # 0 shows none, not all
    assert shown_memory(s, RenderConfig(memory_entries=0)) == [] and shown_memory(s, RenderConfig()) == [
        1,
        2,
        3,
        4,
    ]
