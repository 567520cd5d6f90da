"""A round's experiments at once (`search.overlap`): one harness thread at a time, model calls batched
once every experiment not evaluating waits on the model, evaluations on W workers; and through
`arts search --workers`, every node committed, the batches recorded, no program evaluated twice."""

from __future__ import annotations

import json
import threading
import time

import pytest

from arts.policy.base import Completion, Request, Usage
from arts.search.batching import Batching as RunBatching
from arts.search.cli.main import main
from arts.search.overlap import Overlap
from arts.search.store import Store
from tests.doubles import BatchingRules, make_task


class Batching:
    """Answers each prompt with its own text; records every batch it decodes."""

    name = model_id = "batching"

    def __init__(self):
        self.batches: list[list[str]] = []
        self.calls: list[str] = []
        self.usage_sink = None

    def generate(self, prompt, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        self.calls.append(prompt)
        return [[Completion(text=prompt)]]

    def generate_each(self, requests: list[Request]) -> list[list[Completion]]:
        self.batches.append([r.prompt for r in requests])
        for r in requests:
            if self.usage_sink is not None:
                self.usage_sink(Usage(backend="b", model="b", purpose=r.prompt))
        return [[Completion(text=r.prompt)] for r in requests]


class Probe:
    """Counts the threads inside harness sections and evaluations at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.harness = self.most_harness = self.evaluating = self.most_evaluating = 0

    def step(self, kind: str, delta: int) -> None:
        with self.lock:
            setattr(self, kind, getattr(self, kind) + delta)
            most = f"most_{kind}"
            setattr(self, most, max(getattr(self, most), getattr(self, kind)))


def _job(overlap: Overlap, probe: Probe, i: int, seconds: float = 0.2):
    def section():
        probe.step("harness", 1)
        time.sleep(0.01)  # a harness section long enough to collide if two ran at once
        probe.step("harness", -1)

    def evaluation():
        probe.step("evaluating", 1)
        time.sleep(seconds)
        probe.step("evaluating", -1)
        return f"score {i}"

    def job():
        section()
        first = overlap.generate(Request(f"{i}-a"))[0].text
        section()
        score = overlap.evaluate(evaluation)
        section()
        second = overlap.generate(Request(f"{i}-b"))[0].text
        section()
        return first, score, second

    return job


def test_experiments_batch_their_model_calls_and_share_the_workers():
    backend, probe = Batching(), Probe()
    overlap = Overlap(backend, workers=2)
    out = overlap.run([_job(overlap, probe, i) for i in range(3)])
    assert out == [(f"{i}-a", f"score {i}", f"{i}-b") for i in range(3)]  # in job order
    assert backend.batches[0] == ["0-a", "1-a", "2-a"]  # all three asked together, in the picks' order
    assert sorted(p for b in backend.batches[1:] for p in b) == ["0-b", "1-b", "2-b"]
    assert probe.most_harness == 1  # the harness never ran in two threads at once
    assert probe.most_evaluating == 2  # two workers: two evaluations at once, never three
    assert overlap.batches == [len(b) for b in backend.batches]


def test_the_model_answers_while_an_evaluation_runs():
    """One experiment evaluates for long; the others' second calls do not wait for it."""
    backend, probe = Batching(), Probe()
    overlap = Overlap(backend, workers=3)
    slow = _job(overlap, probe, 0, seconds=1.5)
    t0 = time.perf_counter()
    marks = {}

    def quick(i):
        job = _job(overlap, probe, i, seconds=0.05)

        def timed():
            result = job()
            marks[i] = time.perf_counter() - t0
            return result

        return timed

    overlap.run([slow, quick(1), quick(2)])
    assert max(marks.values()) < 1.0  # done while experiment 0 was still evaluating (1.5 s)
    assert backend.batches[-1] == ["0-b"]  # the others' second calls were answered before it


def test_usage_records_of_a_batch_reach_the_sink_under_the_harness():
    backend = Batching()
    overlap = Overlap(backend, workers=2)
    seen = []
    backend.usage_sink = lambda u: seen.append((u.purpose, overlap.harness.locked()))
    overlap.run([_job(overlap, Probe(), i, 0.01) for i in range(2)])
    assert sorted(p for p, _ in seen) == ["0-a", "0-b", "1-a", "1-b"]
    assert all(locked for _, locked in seen)
    assert backend.usage_sink is not None and backend.usage_sink.__name__ == "<lambda>"  # restored


def test_a_failing_experiment_lets_the_others_finish_then_raises():
    backend, probe = Batching(), Probe()
    overlap = Overlap(backend, workers=2)

    def broken():
        overlap.generate(Request("x"))
        raise RuntimeError("executor crashed")

    ok = _job(overlap, probe, 1, 0.01)
    finished = []
    with pytest.raises(RuntimeError, match="executor crashed"):
        overlap.run([broken, lambda: finished.append(ok())])
    assert finished == [("1-a", "score 1", "1-b")]


def test_outside_a_batch_the_batched_backend_is_the_backend():
    backend = Batching()
    proxy = RunBatching().wrap(backend)
    assert proxy.generate("hi")[0][0].text == "hi" and proxy.name == "batching"
    assert backend.calls == ["hi"]


def test_inside_a_batch_only_its_own_backend_joins():
    backend, other = Batching(), Batching()
    batching = RunBatching()
    mine, theirs = batching.wrap(backend), batching.wrap(other)
    with batching.together(backend) as together:
        out = together([lambda: mine.generate("a"), lambda: mine.generate("b"), lambda: theirs.generate("c")])
    assert [o[0][0].text for o in out] == ["a", "b", "c"]
    assert backend.batches == [["a", "b"]] and other.calls == ["c"] and batching.batches == [2]


def search(tmp_path, monkeypatch, workers: int, evals: int = 9, sleep: float = 0.0, name: str = "run"):
    """`arts search --group 3 --workers W` of the rules backend, each evaluation first sleeping `sleep`
    seconds: (backend, run folder, stored state)."""
    backend = BatchingRules()

    def make(mc, sink, seed):
        backend.sink = sink
        return backend

    monkeypatch.setattr("arts.search.run.make_backend", make)
    task, run = tmp_path / "task", tmp_path / name
    if not task.exists():
        make_task(task)
        evaluate = task / "evaluate.py"
        evaluate.write_text(f"import time\ntime.sleep({sleep})\n" + evaluate.read_text())
    argv = ["search", str(task), "--run-dir", str(run), "--group", "3", "--budget.evals", str(evals)]
    assert main([*argv, "--workers", str(workers)]) == 0
    with Store.open(run, create=False) as store:
        return backend, run, store.load_state()


def test_arts_search_with_workers_runs_each_round_at_once(tmp_path, monkeypatch):
    backend, run, state = search(tmp_path, monkeypatch, workers=2)
    events = [e.payload for e in state.events.values() if e.kind == "overlap" and "workers" in e.payload]
    assert events and all(e["workers"] == 2 for e in events)
    assert max(max(e["batches"]) for e in events) == 3  # three executors asked together
    assert ["executor"] * 3 in backend.batch_purposes
    nodes = [n for n in state.nodes.values() if n.parent is not None]
    assert nodes and all(n.status in ("valid", "invalid") for n in nodes)  # every node committed
    ran = [json.dumps(n.files, sort_keys=True) for n in nodes if n.status == "valid"]
    assert len(ran) == len(set(ran))  # no program evaluated twice, even by experiments running together
    summary = json.loads((run / "summary.json").read_text())
    assert summary["evals"] <= 9 and summary["best"]["score"] > summary["baseline"]


def test_workers_1_runs_the_experiments_one_after_another(tmp_path, monkeypatch):
    backend, _, _ = search(tmp_path, monkeypatch, workers=1, evals=6)
    assert not any("executor" in b for b in backend.batch_purposes)  # each executor call alone


def test_attribution_and_comparison_are_asked_at_once(tmp_path, monkeypatch):
    """Neither reads the other's answer: the causes, the judge and the comparison decode as one batch,
    the critic (which reads the causes) after; the decisions still route and apply. The audits before
    the first round are independent too."""
    backend, _, state = search(tmp_path, monkeypatch, workers=1)
    assert ["causes", "judge", "compare"] in backend.batch_purposes
    assert ["critic"] in backend.batch_purposes
    steps = [e.payload.get("step") for e in state.events.values() if e.kind == "overlap"]
    assert "analysis" in steps and steps[0] == "audit"
    assert backend.batch_purposes[0] == ["audit", "audit"]  # the two audits, at once
    routed = [e.payload for e in state.events.values() if e.kind == "routing"]
    assert routed and all(e["ok"] for e in routed)
    compared = [e.payload for e in state.events.values() if e.kind == "comparison"]
    assert compared and all(e["ok"] for e in compared)


def test_attribution_starts_while_the_rounds_other_experiments_evaluate(tmp_path, monkeypatch):
    """A round's first failed node is settled once it and the nodes before it have committed: its
    causes are asked while a later experiment still evaluates, and the decisions are those the round
    would have made at its end."""
    _, _, state = search(tmp_path, monkeypatch, workers=2, evals=9, sleep=1.0)
    events = list(state.events.values())
    early = 0
    for i, e in enumerate(events):
        if e.kind != "routing" or not e.payload["ahead"]:
            continue
        start = max(j for j in range(i) if events[j].kind == "round_start")
        window = events[start:i]
        asked = min(j for j, w in enumerate(window) if w.kind == "usage" and w.payload["purpose"] == "causes")
        early += asked < max(j for j, w in enumerate(window) if w.kind == "eval")
    assert early >= 1  # asked before the round's last evaluation ended

    monkeypatch.setattr("arts.search.methods.arts.attribution_ahead", lambda run, followed: None)
    _, _, later = search(tmp_path, monkeypatch, workers=2, evals=9, sleep=1.0, name="at-the-end")

    def routed(s):  # keyed by what the node is: ids follow which of two workers commits first
        def key(n):
            return n.round, n.hypothesis, json.dumps(n.files, sort_keys=True)

        out = [
            (key(s.nodes[e.payload["node"]]), e.payload["decision"])
            for e in s.events.values()
            if e.kind == "routing"
        ]
        return sorted(out, key=lambda pair: json.dumps(pair, sort_keys=True))

    assert routed(state) == routed(later) and routed(state)
    assert not any(e.payload["ahead"] for e in later.events.values() if e.kind == "routing")
    assert {n.id: n.score for n in state.nodes.values()} == {n.id: n.score for n in later.nodes.values()}


def test_a_job_may_run_jobs_of_its_own_that_batch_with_the_others():
    """A nested `run`: the parent waits (it is no longer among those a batch waits for), its children
    and the other top-level job ask together; results come back in order."""
    backend = Batching()
    overlap = Overlap(backend, workers=1)

    def parent():
        first = overlap.generate(Request("p"))[0].text
        children = overlap.run(
            [lambda: overlap.generate(Request("c1"))[0].text, lambda: overlap.generate(Request("c2"))[0].text]
        )
        return first, children, overlap.generate(Request("p2"))[0].text

    def other():
        a = overlap.generate(Request("o1"))[0].text
        return a, overlap.generate(Request("o2"))[0].text

    out = overlap.run([parent, other])
    assert out == [("p", ["c1", "c2"], "p2"), ("o1", "o2")]
    assert backend.batches[0] == ["p", "o1"]
    assert sorted(backend.batches[1]) == ["c1", "c2", "o2"]  # the children with the other job
    assert backend.batches[2] == ["p2"]


def test_executors_of_one_move_on_one_parent_answer_from_disjoint_shares(tmp_path, monkeypatch):
    """Drawn `increase X` twice on the seed (and a third move), run at once by executors that all take
    the first menu entry: each `increase X` sees its own share of X's menu, so their first answers
    differ and none is refused as already being evaluated."""
    backend = BatchingRules()
    backend.rng.choice = lambda seq: seq[0]  # every answer: the first entry offered
    monkeypatch.setattr("arts.search.run.make_backend", lambda mc, sink, seed: backend)
    task = make_task(tmp_path / "task")
    run = tmp_path / "run"
    argv = ["search", str(task), "--run-dir", str(run), "--group", "3", "--budget.evals", "3", "--workers", "3",
            "--without", "attribution", "--without", "comparison"]  # fmt: skip
    assert main(argv) == 0
    with Store.open(run, create=False) as store:
        state = store.load_state()
    increases = [n for n in state.nodes.values() if n.hypothesis.startswith("increase X")]
    values = [n.transcript[0]["action"]["value"] for n in increases]
    assert len(values) >= 2 and len(set(values)) == len(values)
    assert all(len(n.transcript) == 1 for n in increases)  # no answer refused, none asked again
    events = [e.payload for e in state.events.values() if e.kind == "overlap" and "workers" in e.payload]
    assert events[0]["batches"][0] == 3


def test_a_share_is_every_kth_entry_and_never_empty():
    from arts.policy.edits.step_menus import step_menus

    files = {"s.py": "X = 1.0\n"}
    parts = [
        step_menus(files, files, None, {}, {}, ["set_constant"], True, (i, 3)).constants["X"]
        for i in range(3)
    ]
    whole = step_menus(files, files, None, {}, {}, ["set_constant"], True).constants["X"]
    assert sorted(v for p in parts for v in p) == sorted(whole) and all(parts)
    assert not set(parts[0]) & set(parts[1])
    one = step_menus(files, files, None, {}, {"X": 1}, ["set_constant"], True, (5, 6)).constants["X"]
    assert (
        one == step_menus(files, files, None, {}, {"X": 1}, ["set_constant"], True).constants["X"]
    )  # empty share: all


def test_a_bench_share_of_the_cores_sets_the_default_workers(monkeypatch):
    from arts.search.overlap import CORES_VAR, default_workers

    monkeypatch.setenv(CORES_VAR, "3")
    assert default_workers() == 3
    monkeypatch.setenv(CORES_VAR, "")
    assert default_workers() >= 1


def test_after_a_batch_the_threads_go_on_in_the_order_they_asked():
    """The thread that decodes a batch is the last to ask; it still goes on after the others, so calls
    that overlap without evaluations write the store in the same order every run."""

    def job(overlap: Overlap, order: list[int], i: int):
        def go():
            overlap.generate(Request(str(i)))
            order.append(i)
            overlap.generate(Request(f"{i}-again"))
            order.append(10 + i)

        return go

    for _ in range(20):
        overlap, order = Overlap(Batching(), workers=1), []
        overlap.run([job(overlap, order, i) for i in range(3)])
        assert order == [0, 1, 2, 10, 11, 12]


def test_mutate_with_workers_evaluates_a_rounds_edits_at_once(tmp_path):
    """No model: the round's edits are drawn first, then evaluated on the workers together."""
    task = make_task(tmp_path / "task")
    evaluate = task / "evaluate.py"
    evaluate.write_text("import time\ntime.sleep(1.0)\n" + evaluate.read_text())
    overlaps = {}
    for workers in (1, 2):
        run = tmp_path / f"run{workers}"
        argv = ["search", str(task), "--method", "mutate", "--run-dir", str(run), "--group", "2",
                "--budget.evals", "4", "--workers", str(workers)]  # fmt: skip
        assert main(argv) == 0
        with Store.open(run, create=False) as store:
            state = store.load_state()
        spans = sorted((e.ts - e.payload["wall_s"], e.ts) for e in state.events.values() if e.kind == "eval")
        assert len(spans) == 4
        overlaps[workers] = sum(a[1] > b[0] for a, b in zip(spans, spans[1:]))  # one began before one ended
        nodes = [n for n in state.nodes.values() if n.parent is not None]
        programs = [json.dumps(n.files, sort_keys=True) for n in nodes]
        assert len(nodes) == 4 and len(set(programs)) == 4  # four different edits, none evaluated twice
    assert overlaps[1] == 0 and overlaps[2] >= 1
