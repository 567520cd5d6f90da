"""The run store: round trips, rebuilding the state, crash safety (SIGKILL) and the one-writer lock."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from arts.search.state import Event, Evidence, Hypothesis, Insight, Node, Observation, Rollout, SearchState
from arts.search.store import Store, StoreError, StoreLocked, StoreVersionError
from arts.search.store_schema import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = "x = 1  # padding to a realistic program size\n" * 110  # ~5 KB


def samples() -> list:
    """One record of every kind, with non-default values in every field."""
    return [
        Node(
            parent=None,
            depth=1,
            round=2,
            hypothesis="larger step",
            axis="optimiser",
            files={"solution.py": PAYLOAD, "pkg/util.py": "y = 2\n"},
            status="valid",
            score=-1.5,
            raw_score=1.5,
            metrics={"loss": 0.25, "curve": [1, 2]},
            reason="",
            eval_s=1.25,
            exec_s=3.5,
            tokens_prompt=100,
            tokens_completion=40,
            transcript=[{"tool": "write_file", "path": "solution.py"}],
            rollout=7,
            adapter="step-3",
            created=123.5,
        ),
        Hypothesis(
            text="h", axis="a", region="r", parent=2, status="set_aside", cooldown_until=5, cites=[1, 2]
        ),
        Observation(text="o", source="inspect", region="r", node=1, provisional=False, times_seen=3, round=4),
        Evidence(observation=1, hypothesis=1, relation="oppose", round=2, note="contradicts"),
        Insight(text="i", kind="audit", node=None, active=False, round=1),
        Rollout(
            round=1,
            group=3,
            prompt=[{"role": "user", "content": "state"}],
            candidates=[{"hypothesis": "h", "probability": 0.4}],
            drawn=0,
            probability=0.4,
            action="expand 1: h",
            node=1,
            reward=0.7,
            old_logprob=-2.5,
            adapter=None,
            json_schema={"type": "object"},
        ),
        Event(ts=1.0, kind="round_start", payload={"round": 1}),
    ]


def test_round_trip_every_kind(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        for record in samples():
            stored = store.add(record)
            assert stored.id == 1 and record.id == 0
            assert store.get(type(record), 1) == stored
            assert store.all(type(record)) == [stored]
            assert store.count(type(record)) == 1


def test_load_state_equals_what_was_written(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        stored = [store.add(r) for r in samples()]
        child = store.add(Node(parent=1, status="valid", score=2.0))
        store.set_meta("task", {"name": "circle-packing-26"})
    with Store.open(tmp_path, create=False) as store:  # a fresh process would see the same
        state = store.load_state()
    expected = SearchState(
        **{name: {r.id: r} for name, r in zip(list(SearchState.model_fields)[:7], stored, strict=True)},
        meta={"schema_version": SCHEMA_VERSION, "task": {"name": "circle-packing-26"}},
    )
    expected.nodes[child.id] = child
    assert state == expected
    assert state.children(1) == [child] and state.best() == child
    assert [n.id for n in state.valid_nodes()] == [1, 2]


def test_ids_are_assigned_in_order_per_kind(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        ids = [store.add(Node(round=i)).id for i in range(5)]
        assert ids == [1, 2, 3, 4, 5]
        assert store.add(Insight(text="first")).id == 1
        assert [n.round for n in store.all(Node)] == [0, 1, 2, 3, 4]
        assert [e.id for e in (store.log_event("a"), store.log_event("b", n=1, kind="x"))] == [1, 2]
        assert [e.kind for e in store.events(since_id=1)] == ["b"]
        assert store.events(kind="b")[0].payload == {"n": 1, "kind": "x"}


def test_concurrent_adds_from_threads_get_distinct_ids(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store, ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(lambda i: store.add(Node(round=i)).id, range(200)))
        assert sorted(ids) == list(range(1, 201))
        assert {n.id: n.round for n in store.all(Node)} == dict(zip(ids, range(200), strict=True))


def test_update_get_and_filters(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        root = store.add(Node(status="seed", score=1.0))
        kid = store.add(Node(parent=root.id, depth=1))
        kid.status, kid.score = "valid", 3.0
        store.update(kid)
        assert store.get(Node, kid.id).score == 3.0
        assert store.all(Node, parent=None) == [root]
        assert store.all(Node, status="valid", parent=root.id) == [kid]
        assert store.all(Node, depth=1) == [kid]  # not an indexed column: json_extract
        store.add(Insight(text="a", active=False))
        assert [i.text for i in store.all(Insight, active=False)] == ["a"]
        with pytest.raises(ValueError, match="no field 'colour'"):
            store.all(Node, colour="red")
        with pytest.raises(KeyError, match="no nodes row with id 99"):
            store.get(Node, 99)
        with pytest.raises(KeyError):
            store.update(Node(id=99))
        with pytest.raises(ValueError, match="already stored"):
            store.add(kid)
        with pytest.raises(ValueError, match="managed by the store"):
            store.set_meta("schema_version", 2)
        assert store.get_meta("missing", 5) == 5


def test_non_finite_score_is_rejected() -> None:
    with pytest.raises(ValueError):
        Node(score=float("nan"))


def test_write_node_files(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        node = store.add(samples()[0])
        folder = store.write_node_files(node)
        assert folder == tmp_path / "nodes" / "1" == store.node_dir(1)
        assert (folder / "solution.py").read_text() == PAYLOAD
        assert (folder / "pkg/util.py").read_text() == "y = 2\n"
        (folder / "result.json").write_text("{}")  # what the sandbox leaves is kept on a rewrite
        store.write_node_files(node.model_copy(update={"files": {"solution.py": "new\n"}}))
        assert (folder / "solution.py").read_text() == "new\n" and (folder / "result.json").exists()
        assert sorted(p.name for p in folder.parent.iterdir()) == ["1"]  # no staging left behind
        with pytest.raises(ValueError, match="stay inside the node directory"):
            store.write_node_files(node.model_copy(update={"files": {"../escape.py": ""}}))


def _spawn(code: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )


def test_reopen_after_writer_sigkilled_mid_loop(tmp_path: Path) -> None:
    proc = _spawn(f"""
        from arts.search.state import Node
        from arts.search.store import Store
        store = Store.open({str(tmp_path)!r})
        i = 0
        while True:
            i += 1
            store.add(Node(round=i, files={{"solution.py": "x" * 5000}}))
            print(i, flush=True)
    """)
    assert proc.stdout is not None
    committed = 0
    try:
        while committed < 300:
            committed = int(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-loop: the writer never gets to close the store
        proc.wait(timeout=10)
    with Store.open(tmp_path, create=False) as store:
        nodes = store.all(Node)
    with sqlite3.connect(tmp_path / "arts.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    assert len(nodes) >= committed  # every add that returned survived
    assert [n.id for n in nodes] == list(range(1, len(nodes) + 1))
    assert all(n.round == n.id and n.files["solution.py"] == "x" * 5000 for n in nodes)


def _hold_lock(run_dir: Path) -> subprocess.Popen[str]:
    proc = _spawn(f"""
        import time
        from arts.search.store import Store
        store = Store.open({str(run_dir)!r})
        print("ready", flush=True)
        time.sleep(60)
    """)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_second_process_gets_store_locked_with_pid(tmp_path: Path) -> None:
    proc = _hold_lock(tmp_path)
    try:
        with pytest.raises(StoreLocked, match=f"in use by process {proc.pid} "):
            Store.open(tmp_path)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_lock_released_after_holder_sigkilled(tmp_path: Path) -> None:
    proc = _hold_lock(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with Store.open(tmp_path) as store:
        assert store.count(Node) == 0
    assert (tmp_path / "lock").read_text().strip() == str(os.getpid())


def test_lock_is_per_open_store_and_freed_by_close(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    with pytest.raises(StoreLocked, match=str(os.getpid())):
        Store.open(tmp_path)
    store.close()
    Store.open(tmp_path).close()


def _set_version(run_dir: Path, version: int) -> None:
    with sqlite3.connect(run_dir / "arts.db") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.close()


def test_schema_version_mismatch(tmp_path: Path) -> None:
    Store.open(tmp_path).close()
    _set_version(tmp_path, SCHEMA_VERSION + 1)
    with pytest.raises(StoreVersionError, match="newer arts.*upgrade arts"):
        Store.open(tmp_path)
    _set_version(tmp_path, 0)
    with pytest.raises(StoreVersionError, match="cannot migrate"):
        Store.open(tmp_path)
    Store.open(tmp_path / "other").close()  # the lock was released on the failed opens
    _set_version(tmp_path, SCHEMA_VERSION)
    Store.open(tmp_path).close()


def test_open_without_create_needs_an_existing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no run store"):
        Store.open(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
