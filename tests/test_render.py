from scripts.bench_harness import tree as _tree  # the same synthetic tree the benchmark measures
from search.render import RenderConfig, render_state
from search.state import Node, SearchState


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
