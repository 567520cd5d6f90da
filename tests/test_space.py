"""The hypothesis and observation spaces: labels, the status life cycle, evidence and the provisional rule,
the region map and its bounded rendering (pure functions; a test applies the returned records itself)."""

from __future__ import annotations

from arts.search.investigation.space import (
    archive,
    find_hypothesis,
    hypothesis_for,
    lineage,
    normalise_label,
    observe,
    record_node,
    refine,
    relate,
    retain,
    revivable,
    revive,
    set_aside,
    work,
)
from arts.search.investigation.spacemap import hypothesis_map, render_space, under_explored
from arts.search.investigation.standing import best_supported, established, refuted, standing, unexplained
from arts.search.state import Evidence, Hypothesis, Node, Observation, Record, SearchState

_FIELD = {Node: "nodes", Hypothesis: "hypotheses", Observation: "observations", Evidence: "evidence"}


def put(state: SearchState, record: Record) -> Record:
    """Persist like the store would: a new record (id 0) gets the next id, a changed one replaces its id."""
    table = getattr(state, _FIELD[type(record)])
    if record.id == 0:
        record.id = max(table, default=0) + 1
    table[record.id] = record
    return record


def count(text: str) -> int:
    return len(text) // 4


def test_one_axis_written_four_ways_is_one_label():
    labels = {
        normalise_label(t) for t in ("Learning rate", "learning_rate", "learning-rates", "the learning rate")
    }
    assert labels == {"learning rate"}
    assert normalise_label("Losses") == normalise_label("loss") == "loss"
    assert normalise_label("biases") == normalise_label("Bias")
    assert normalise_label("batch sizes") == normalise_label("Batch-size")
    assert normalise_label("the") == "the"  # a label of stopwords alone stays itself


def test_a_rephrased_hypothesis_is_found_not_added_again():
    s = SearchState()
    h, new = hypothesis_for(s, "Use a larger learning rate", "Learning rate", "high", round=1, cites=[99])
    assert new and h.id == 0 and h.cites == [] and h.created_round == 1  # unknown observation ids dropped
    put(s, h)
    again, new = hypothesis_for(s, "use larger learning-rates", "lr", "x", round=2)
    assert not new and again.id == h.id
    assert find_hypothesis(s, "Use a smaller learning rate") is None


def test_life_cycle_moves_return_copies_and_refuse_what_does_not_fit():
    h = Hypothesis(id=1, text="warm restarts", status="pending")
    assert retain(h, 1) is None  # nothing retained before it was tested
    w = work(h, 1)
    assert w.status == "working" and h.status == "pending"  # the input is left as it was
    r = retain(w, 2)
    assert r.status == "retained" and r.updated_round == 2
    aside = set_aside(r, 3, cooldown=2)
    assert aside.status == "set_aside" and aside.cooldown_until == 5
    assert set_aside(aside, 4, cooldown=1) is None and work(aside, 4) is None


def test_cooldown_blocks_revival_until_it_is_over():
    s = SearchState()
    h = put(s, set_aside(Hypothesis(text="bigger batch", status="working"), round=2, cooldown=3))
    assert revive(h, 4) is None and revivable(s, 4) == []
    assert revivable(s, 5) == [h]
    back = revive(h, 5)
    assert back.status == "revived" and back.cooldown_until is None
    assert work(back, 6).status == "working"


def test_archived_direction_is_never_revived():
    s = SearchState()
    h = put(s, archive(Hypothesis(text="grid search", status="working"), round=3))
    assert h.archived and h.status == "set_aside"
    assert revive(h, 100) is None and revivable(s, 100) == [] and work(h, 100) is None


def test_refinement_lineage_runs_from_the_original():
    s = SearchState()
    a = put(s, Hypothesis(text="add dropout", axis="regularisation", region="dropout"))
    b = put(s, refine(a, "dropout 0.1 on the attention only", round=2))
    c = put(s, refine(b, "dropout 0.1 on attention, none on MLP", round=3, region="targeted"))
    assert (b.parent, b.axis) == (a.id, "regularisation") and c.region == "targeted"
    assert [h.id for h in lineage(s, c.id)] == [a.id, b.id, c.id]


def test_a_repeated_observation_is_confirmed_not_duplicated():
    s = SearchState()
    o, new = observe(s, "Validation loss plateaus after step 200", "execution", "loss curve", node=2, round=1)
    assert new and o.provisional and o.times_seen == 1
    put(s, o)
    again, new = observe(s, "The validation loss plateaus after step 200.", "inspect", round=2)
    assert not new and again.id == o.id and again.times_seen == 2 and not again.provisional
    near, new = observe(s, "validation loss plateaus after step 200 again", "inspect")
    assert not new and near.id == o.id  # high word overlap, same numbers
    other, new = observe(s, "Validation loss plateaus after step 900", "inspect")
    assert new  # a different number is a different fact


def test_relate_updates_the_pair_instead_of_adding_a_second_record():
    s = SearchState()
    h = put(s, Hypothesis(text="h", status="working"))
    o = put(s, Observation(text="o", source="execution"))
    e = put(s, relate(s, o.id, h.id, "unassessed", round=1))
    e2 = relate(s, o.id, h.id, "support", round=2, note="loss fell " * 100)
    assert e2.id == e.id and e2.relation == "support" and len(e2.note) <= 300


def test_a_provisional_observation_never_refutes():
    s = SearchState()
    h = put(s, Hypothesis(text="cosine schedule helps", status="working"))
    o, _ = observe(s, "cosine schedule run diverged at step 50", "execution")
    o = put(s, o)
    put(s, relate(s, o.id, h.id, "oppose", round=1))
    st = standing(s, h.id)
    assert st.provisional.oppose == 1 and st.confirmed.oppose == 0
    assert not refuted(s, h.id)
    put(s, observe(s, "Cosine schedule run diverged at step 50", "inspect")[0])  # seen again: confirmed
    assert standing(s, h.id).confirmed.oppose == 1 and refuted(s, h.id)


def test_established_needs_confirmed_support_and_no_confirmed_opposition():
    s = SearchState()
    h = put(s, Hypothesis(text="wider layers help", status="working"))
    assert not established(s, h.id) and not refuted(s, h.id)  # unrefuted but unsupported
    sup = put(s, Observation(text="width 256 beat 128", source="comparison", provisional=False))
    put(s, relate(s, sup.id, h.id, "support", round=1))
    assert established(s, h.id)
    put(s, relate(s, put(s, Observation(text="width 512 overfit", source="inspect")).id, h.id, "oppose", 1))
    assert established(s, h.id)  # provisional opposition does not take it away
    opp = put(s, Observation(text="width 1024 diverged", source="execution", provisional=False))
    put(s, relate(s, opp.id, h.id, "oppose", round=2))
    assert not established(s, h.id) and refuted(s, h.id)


def test_unexplained_observations_are_those_no_active_hypothesis_supports():
    s = SearchState()
    working = put(s, Hypothesis(text="a", status="working"))
    aside = put(s, Hypothesis(text="b", status="set_aside"))
    o1, o2, o3 = (put(s, Observation(text=t, source="execution")) for t in ("x1", "x2", "x3"))
    put(s, relate(s, o1.id, working.id, "support", 1))
    put(s, relate(s, o2.id, aside.id, "support", 1))
    put(s, relate(s, o3.id, working.id, "oppose", 1))
    assert [o.id for o in unexplained(s)] == [o2.id, o3.id]


def test_map_merges_labels_and_reports_counts_best_and_last_round():
    s = SearchState()
    n1 = put(s, Node(status="valid", score=0.5, raw_score=0.5, round=2))
    n2 = put(s, Node(status="valid", score=0.8, raw_score=0.8, round=4))
    a = put(s, Hypothesis(text="a", axis="Learning rate", region="High", status="working", created_round=1))
    put(s, record_node(a, n1.id))
    b = Hypothesis(text="b", axis="learning_rates", region="high", status="retained", updated_round=3)
    put(s, record_node(record_node(b, n2.id), n1.id))
    put(s, Hypothesis(text="c", axis="width", region="", status="pending", created_round=5))
    rows = hypothesis_map(s)
    lr = next(r for r in rows if r.axis == "learning rate")
    assert (lr.region, lr.hypotheses, lr.nodes) == ("high", 2, 2)
    assert lr.statuses == {"working": 1, "retained": 1}
    assert (lr.best_node, lr.best_raw, lr.last_round) == (n2.id, 0.8, 4)
    assert rows[0].axis == "width"  # touched last
    assert [r.axis for r in under_explored(rows, 1)] == ["width"]


def test_under_explored_skips_fully_archived_cells():
    s = SearchState()
    put(s, archive(Hypothesis(text="a", axis="dead"), 1))
    put(s, Hypothesis(text="b", axis="alive"))
    assert [r.axis for r in under_explored(hypothesis_map(s), 5)] == ["alive"]


def _grow(n: int) -> SearchState:
    s = SearchState(meta={"round": n})
    for i in range(1, n + 1):
        node = put(s, Node(status="valid", score=i / n, raw_score=i / n, round=i))
        status = ("working", "retained", "set_aside", "pending")[i % 4]
        h = Hypothesis(
            text=f"idea {i} on axis {i % 37}", axis=f"axis {i % 37}", region=f"r{i % 5}", status=status
        )
        put(s, record_node(h.model_copy(update={"cooldown_until": i}), node.id))
        source = "probe" if i % 3 == 0 else "execution"
        put(
            s,
            Observation(
                text=f"observation number {i}", source=source, region=f"of r{i % 2}", provisional=i % 2 == 0
            ),
        )
    return s


def test_render_stays_within_budget_as_the_state_grows():
    sizes = {}
    for n in (5, 200, 2000):
        text = render_space(_grow(n), 400, count)
        sizes[n] = count(text)
        assert sizes[n] <= 400
        assert all(line.startswith(("## ", "- ")) for line in text.splitlines() if line)  # no line cut
    assert sizes[2000] <= sizes[200] * 1.1
    text = render_space(_grow(200), 400, count)
    for title in (
        "Hypothesis map",
        "Observation map",
        "Under-explored",
        "Set aside, may be revived",
        "Unexplained observations",
    ):
        assert title in text  # every section gets lines, not just the first
    assert "- o199: observation number 199" in text and "- h" in text


def test_render_of_an_empty_space_is_empty_and_a_tiny_budget_drops_whole_lines():
    assert render_space(SearchState(), 400, count) == ""
    text = render_space(_grow(50), 30, count)
    assert count(text) <= 30 and all(line.startswith(("## ", "- ")) for line in text.splitlines() if line)


def test_the_observation_map_counts_per_source_and_region():
    from arts.search.investigation.spacemap import observation_map

    lines = observation_map(_grow(12))  # ids 3, 6, 9, 12 probes; even ids provisional; region of r<id % 2>
    assert lines == [
        "- execution / r0: 4 obs, 4 unexplained, 0 confirmed",
        "- execution / r1: 4 obs, 4 unexplained, 4 confirmed",
        "- probe / r0: 2 obs, 2 unexplained, 0 confirmed",
        "- probe / r1: 2 obs, 2 unexplained, 2 confirmed",
    ]


def test_best_supported_prefers_unrefuted_then_score_then_support():
    s = SearchState()
    put(s, Node(status="seed", score=0.1, raw_score=0.1))
    hi = put(s, Node(status="valid", score=0.9, raw_score=0.9))
    mid = put(s, Node(status="valid", score=0.7, raw_score=0.7))
    put(s, Node(status="invalid"))
    assert best_supported(s).id == hi.id
    h = put(s, record_node(Hypothesis(text="trick", status="working"), hi.id))
    o = put(s, Observation(text="trick leaks the test split", source="inspect", provisional=False))
    put(s, relate(s, o.id, h.id, "oppose", 1))
    assert best_supported(s).id == mid.id  # a confirmed refutation demotes the higher score
    assert best_supported(SearchState()) is None


def test_one_comparison_naming_an_observation_for_several_hypotheses_does_not_confirm_it(tmp_path):
    """Confirmation needs an independent second sighting: the same comparison (same source, node and
    round) repeating it for four hypotheses counts once; a later round's sighting confirms it."""
    from arts.search.investigation.observations import record
    from arts.search.ledger import Ledger
    from arts.search.store import Store

    ledger = Ledger(Store.open(tmp_path / "run"))
    ids = {record(ledger, "X above 3 scores lower", "comparison", "comparison", None, 1) for _ in range(4)}
    (oid,) = ids
    o = ledger.state.observations[oid]
    assert o.provisional and o.times_seen == 1
    record(ledger, "X above 3 scores lower", "comparison", "comparison", None, 2)
    o = ledger.state.observations[oid]
    assert not o.provisional and o.times_seen == 2
