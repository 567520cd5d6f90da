"""Answers in parts and menus from the case material (`policy.answer_parts`), the compare-windows probe
(`tasks.windows`), and both in a diagnosis search driven through `arts search` with a scripted model.

The scripted model only drives the harness: which part a node writes, what its menus offer, the answer
assembled part by part. What the embedded model makes of them is measured with `arts bench`
(docs/diagnosis.md).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from arts.policy import answer_menus as am
from arts.policy import answer_parts as ap
from arts.policy.answer_schema import schema_model
from arts.search import assembly, diagnose
from arts.tasks import windows
from arts.tasks.base import BUILTIN_DIR, load_task

FAULTS = ["cpu_saturation", "memory_leak", "disk_full"]
INCIDENT = {
    "type": "object",
    "required": ["root_service", "fault", "evidence"],
    "additionalProperties": False,
    "properties": {
        "root_service": {"type": "string", "enum": ["api", "db", "cache", "queue"]},
        "fault": {"type": "string", "enum": FAULTS},
        "evidence": {"type": "string", "maxLength": 80},
    },
}
SCHEMA = {
    "type": "object",
    "required": ["incidents"],
    "$defs": {"incident": INCIDENT},
    "properties": {
        "incidents": {
            "type": "object",
            "required": ["a", "b"],
            "properties": {"a": {"$ref": "#/$defs/incident"}, "b": {"$ref": "#/$defs/incident"}},
        }
    },
}
MATERIAL = ["incidents/a/logs/api.txt", "incidents/a/logs/db.txt", "incidents/b/logs/cache.txt", "notes.md"]


def series(n: int, base: float, jump_at: int | None = None, to: float = 0.0, back_at: int | None = None):
    xs = [base + 0.01 * (i % 3) for i in range(n)]
    for i in range(jump_at or n, back_at or n):
        xs[i] = to
    return xs


def table(cols: dict[str, list[float]]) -> str:
    n = len(next(iter(cols.values())))
    rows = ["time," + ",".join(cols)] + [
        f"t{i:02d}," + ",".join(f"{c[i]:g}" for c in cols.values()) for i in range(n)
    ]
    return "\n".join(rows) + "\n"


def test_departures_tell_a_lasting_change_from_one_that_comes_back():
    text = table({"latency": series(40, 10, 20, 90), "cpu": series(40, 30, 15, 80, back_at=22)})
    found = {d.column: d for d in windows.departures("x.csv", text)}
    assert (found["latency"].at, found["latency"].back) == ("t20", None)
    assert (found["cpu"].at, found["cpu"].back) == ("t15", "t22")
    assert windows.departures("notes.txt", "not, a table\n") == []


def test_compare_lists_what_stays_out_earliest_first_then_what_came_back():
    files = {
        "db.csv": table({"err": series(40, 0.01, 25, 0.5)}),
        "api.csv": table({"err": series(40, 0.01, 27, 0.4)}),
        "batch.csv": table({"cpu": series(40, 20, 12, 90, back_at=20)}),
        "calm.csv": table({"err": series(40, 0.01)}),
    }
    lines = windows.compare(files).splitlines()
    assert lines[0].startswith("stays out") and lines[1].startswith("db.csv: err")
    assert lines[2].startswith("api.csv") and lines[3].startswith("back in range")
    assert lines[4].startswith("batch.csv: cpu") and lines[4].endswith("back at t20")
    assert "calm" not in windows.compare(files)
    assert "leaves the range" in windows.compare({"calm.csv": files["calm.csv"]})


def test_first_out_names_the_one_file_that_stays_out_earliest_and_no_file_on_a_tie():
    db, api = table({"err": series(40, 0.01, 25, 0.5)}), table({"err": series(40, 0.01, 27, 0.4)})
    early = table({"cpu": series(40, 20, 12, 90, back_at=20)})  # comes back: not a lasting change
    assert windows.first_out({"db.csv": db, "api.csv": api, "batch.csv": early}) == ("db.csv", "t25", ["err"])
    assert windows.first_out({"db.csv": db, "db2.csv": db}) is None
    assert windows.first_out({"batch.csv": early}) is None


def test_a_comparison_s_verdict_decides_the_menu_it_names_whatever_the_notes_say():
    """The verdict (the first file to stay out) is the tool's finding; it opposes a hypothesis naming
    another service, and the root menu keeps what it names though the model's note names api."""
    from arts.policy.investigator import Investigator, Tools
    from tests.doubles import ScriptedBackend

    verdict = "db.csv is the first to stay out of its usual range, at t3 (err)"
    tools = Tools(
        files=["incidents/a/logs/api.txt"],
        read=lambda path, start: "1: ERROR api timeout calling db, disk full",
        grep=lambda pattern, path: "1: ERROR api timeout calling db, disk full",
        folders=["incidents/a/metrics"],
        compare=lambda folder: (f"{verdict}\nstays out (earliest first):\ndb.csv: err 0 -> 1 at t3", "db"),
        words=["api", "db", "cache", "queue"],
    )
    backend = ScriptedBackend(
        [
            {"op": "compare", "folder": "incidents/a/metrics"},
            {"op": "read", "file": "incidents/a/logs/api.txt", "start": 1},
            {
                "op": "note",
                "observation": "1: ERROR api timeout calling db, disk full",
                "relation": "support",
            },
            {"op": "grep", "pattern": "ERROR", "file": "incidents/a/logs/api.txt"},
            {
                "root_service": "db",
                "fault": "disk_full",
                "evidence": "1: ERROR api timeout calling db, disk full",
            },
        ]
    )
    part = ap.split(SCHEMA, MATERIAL)[0]
    models = []

    def model(found):
        models.append(diagnose.noted_model(part.schema, found, "a"))
        return models[-1]

    result = Investigator(backend).run("suspect a.api", None, model, tools)
    tool = result.findings[0]
    assert (tool.by, tool.relation, tool.text) == ("compare", "oppose", verdict)
    menus = models[0].model_json_schema()["properties"]
    assert menus["root_service"].get("enum", [menus["root_service"].get("const")]) == ["db"]
    assert menus["fault"].get("enum", [menus["fault"].get("const")]) == ["disk_full"]  # the model's note
    assert result.answer["root_service"] == "db"


def test_an_answer_splits_into_the_entries_named_as_material_folders():
    parts = ap.split(SCHEMA, MATERIAL)
    assert [(p.name, p.path, p.folder) for p in parts] == [
        ("a", ("incidents", "a"), "incidents/a/"),
        ("b", ("incidents", "b"), "incidents/b/"),
    ]
    assert parts[0].schema["properties"]["fault"]["enum"] == FAULTS  # the reference is resolved
    assert ap.split(SCHEMA, ["notes.md"]) == []  # no folder per entry: the answer is written whole


def test_menus_keep_the_entities_a_part_holds_and_the_values_its_notes_name():
    part = ap.split(SCHEMA, MATERIAL)[0]
    menu = am.narrowed(part.schema, "api.txt db.txt: ERROR", whole="api db cache queue", entities_only=True)
    assert menu["properties"]["root_service"]["enum"] == ["api", "db"]
    assert menu["properties"]["fault"]["enum"] == FAULTS  # not named in the material: left whole
    noted = am.narrowed(menu, "db.txt: ERROR write failed, disk usage 99%")
    assert noted["properties"]["root_service"]["enum"] == ["db"]
    assert noted["properties"]["fault"]["enum"] == ["disk_full"]  # named by its word "disk"
    assert am.narrowed(menu, "nothing here")["properties"]["root_service"]["enum"] == ["api", "db"]
    quoted = am.quoting(noted, ["db.txt: ERROR write failed", "x" * 200])
    assert quoted["properties"]["evidence"]["enum"] == ["db.txt: ERROR write failed"]  # fits maxLength
    model = schema_model(quoted)
    assert model.model_validate(ap.minimal(quoted)).root_service == "db"


def test_minimal_and_put_make_a_whole_answer_before_every_part_is_written():
    parts = ap.split(SCHEMA, MATERIAL)
    answer = ap.put(None, parts[1].path, {"root_service": "cache", "fault": "memory_leak", "evidence": "x"})
    answer = ap.put(answer, parts[0].path, ap.minimal(parts[0].schema))
    schema_model(SCHEMA).model_validate(answer)
    assert ap.get(answer, parts[1].path)["root_service"] == "cache"


def test_material_is_found_whatever_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # the check once ran against the working directory: no file, ever
    paths = diagnose.material_paths(load_task(BUILTIN_DIR / "incident-rca"))
    assert "incidents/i1/logs/gateway.txt" in paths and len(paths) > 40


def test_a_search_writes_one_part_per_node_and_answers_with_each_parts_best(tmp_path: Path, rules):
    """Through `arts search` on incident-rca with a scripted model: every node takes the incident its
    hypothesis names, compares its metrics first and sees only its own files; every answer is whole, and
    the final one holds, per incident, the entry of its best-supported node."""
    from arts.search.cli.main import main
    from arts.search.store import Store

    run = tmp_path / "run"
    assert main(["search", "incident-rca", "--group", "2", "--rounds", "3", "--run-dir", str(run), "-q"]) == 0
    with Store.open_readonly(run) as store:
        state = store.load_state()
    done = sorted((n for n in state.nodes.values() if assembly.part_of(n)), key=lambda n: n.id)
    named = [n.hypothesis.split()[1].split(".")[0] for n in done]  # "suspect i2.cart": i2
    assert [assembly.part_of(n) for n in done] == named and len(set(named)) >= 2
    model = schema_model(load_task(BUILTIN_DIR / "incident-rca").answer_schema())
    for n in done:
        assert n.transcript[1]["op"] == "compare" and "stays out" in n.transcript[1]["output"]
        files = [e["action"]["file"] for e in n.transcript if e.get("op") in ("read", "grep")]
        assert all(f.startswith(f"incidents/{assembly.part_of(n)}/") for f in files)
        model.model_validate_json(n.files["answer.json"])  # whole, though one part was written
    answer = json.loads((run / "best" / "answer.json").read_text())
    task = load_task(BUILTIN_DIR / "incident-rca")
    assert answer == assembly.final_answer(task, list(state.nodes.values()))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best"]["test_score"] is not None


def test_the_investigator_compares_first_once_then_offers_the_files_the_comparison_named():
    from arts.policy.investigator import Investigator, Tools, named_first
    from tests.doubles import ScriptedBackend

    files = ["incidents/a/alert.txt", "incidents/a/logs/api.txt", "incidents/a/logs/db.txt"]
    compared: list[str] = []
    tools = Tools(
        files=files,
        read=lambda path, start: f"{start}: ERROR disk full",
        grep=lambda pattern, path: "3: ERROR write failed, disk full",
        folders=["incidents/a/metrics"],
        compare=lambda folder: (
            compared.append(folder) or "stays out (earliest first):\ndb.csv: err 0 -> 1 at t3"
        ),
        words=["ERROR", "db"],
    )
    backend = ScriptedBackend(
        [
            {"op": "compare", "folder": "incidents/a/metrics"},
            {"op": "note", "observation": "db.csv: err 0 -> 1 at t3", "relation": "support"},
            {"op": "grep", "pattern": "ERROR", "file": "incidents/a/logs/db.txt"},
            {"op": "note", "observation": "3: ERROR write failed, disk full", "relation": "support"},
            {"root_service": "db", "fault": "disk_full", "evidence": "3: ERROR write failed, disk full"},
        ]
    )
    part = ap.split(SCHEMA, MATERIAL)[0]
    menus = []

    def model(found):
        menus.append(
            am.quoting(am.narrowed(part.schema, " ".join(f.text for f in found)), [f.text for f in found])
        )
        return schema_model(menus[-1])

    result = Investigator(backend).run("db failed", None, model, tools, "Find the root.")
    assert compared == ["incidents/a/metrics"] and result.answer["fault"] == "disk_full"
    first, second = (c["schema"].model_json_schema() for c in backend.calls[:2])
    assert "CompareAction" in json.dumps(first)  # the overview first, and nothing else
    assert "ReadAction" not in json.dumps(first)
    assert "CompareAction" not in json.dumps(second)  # once
    assert "ERROR" in json.dumps(backend.calls[2]["schema"].model_json_schema())  # a level word to grep
    assert menus[0]["properties"]["root_service"]["enum"] == ["db"]
    assert menus[0]["properties"]["fault"]["enum"] == ["disk_full"]
    assert named_first(files, "db.csv: err at t3") == [files[2], files[0], files[1]]


def test_without_observations_the_investigator_answers_without_looking():
    from arts.policy.investigator import Investigator, Tools
    from tests.doubles import ScriptedBackend

    backend = ScriptedBackend([{"root_service": "api", "fault": "memory_leak", "evidence": "guess"}])
    tools = Tools(files=["x.txt"], read=lambda p, s: "", grep=lambda p, f: "")
    part = ap.split(SCHEMA, MATERIAL)[0]
    result = Investigator(backend).run("api", None, schema_model(part.schema), tools, steps=0)
    assert [c["purpose"] for c in backend.calls] == ["answer"] and not result.findings


def test_tasks_check_shows_the_parts_their_menus_and_what_a_comparison_reads(capsys):
    from arts.search.cli.main import main

    assert main(["tasks", "check", "incident-rca"]) == 0
    out = capsys.readouterr().out
    assert "answer: 4 parts, one per folder (incidents/i1/" in out
    assert "i1: 17 files, menus 7/16 6/6 7/16, compare incidents/i1/metrics" in out  # 7 of 16 services


def test_the_capable_profile_investigates_freely_and_answers_from_the_parts_material(tmp_path: Path, rules):
    """`--profile capable` on incident-rca through `arts search`: free grep patterns and notes (no Literal
    menus), no forced comparison, and answer menus of the part's material, not of its notes."""
    from arts.search.cli.main import main
    from arts.search.store import Store

    run = tmp_path / "run"
    args = ["search", "incident-rca", "--profile", "capable", "--group", "2", "--rounds", "2"]
    assert main([*args, "--run-dir", str(run), "-q"]) == 0
    steps = [s for p, s in rules.schemas if p == "investigate"]
    answers = [s for p, s in rules.schemas if p == "answer"]
    assert steps and answers
    first = json.dumps(steps[0].model_json_schema())
    assert "ReadAction" in first and "GrepAction" in first  # the model picks its first look
    grep = steps[0].model_json_schema()["$defs"]["GrepAction"]["properties"]["pattern"]
    assert "enum" not in grep and "const" not in grep  # any pattern
    menu = answers[0].model_json_schema()
    roots = json.dumps(menu)
    assert '"mysql"' in roots and '"redis"' not in roots  # i1's services only (mysql is in i1, redis not)
    with Store.open_readonly(run) as store:
        state = store.load_state()
    done = sorted((n for n in state.nodes.values() if n.parent is not None), key=lambda n: n.id)
    assert all(n.status == "valid" for n in done)
    assert [assembly.part_of(n) for n in done][:4] == ["i1", "i2", "i3", "i4"]  # free hypotheses: least seen


def test_a_small_scientist_s_diagnosis_hypotheses_are_suspects_named_in_the_material(tmp_path: Path, rules):
    """Small profile, through `arts search`: every hypothesis is `suspect <part>.<entity>` (never free
    words), the entity one its part's material names, and the node investigates the part it names."""
    from arts.search.cli.main import main
    from arts.search.store import Store

    run = tmp_path / "run"
    assert main(["search", "incident-rca", "--group", "2", "--rounds", "2", "--run-dir", str(run), "-q"]) == 0
    with Store.open_readonly(run) as store:
        state = store.load_state()
    moves = assembly.suspects(load_task(BUILTIN_DIR / "incident-rca"), [])
    assert "i1.mysql" in moves and "i1.redis" not in moves  # i1's services only
    texts = [h.text for h in state.hypotheses.values()]
    assert texts and all(t.startswith("suspect i") for t in texts)
    for n in state.nodes.values():
        if assembly.part_of(n):
            assert n.hypothesis.split()[1].split(".")[0] == assembly.part_of(n)


def test_the_final_answer_is_whole_when_a_part_was_never_investigated():
    """A grader refuses an answer missing an incident: a part no node wrote holds its simplest entry."""
    from arts.search.state import Node

    task = load_task(BUILTIN_DIR / "incident-rca")
    entry = {"root_service": "mysql", "fault": "disk_full", "ruled_out": [], "evidence": "x"}
    files = {"answer.json": json.dumps({"incidents": {"i2": entry}})}
    nodes = [
        Node(id=1, status="seed"),
        Node(id=2, parent=1, status="valid", files=files, transcript=[{"part": "i2"}]),
    ]
    answer = assembly.final_answer(task, nodes)
    assert answer["incidents"]["i2"] == entry and set(answer["incidents"]) == {"i1", "i2", "i3", "i4"}
    schema_model(task.answer_schema()).model_validate(answer)
    assert assembly.final_answer(task, nodes[:1]) is None


def test_a_hypothesis_that_names_no_part_goes_to_the_least_seen_part_no_verdict_settled():
    """The capable profile's free hypotheses: i1 seen once and settled by a comparison's verdict, i2 seen
    once and open, i3 seen twice; "check the cache" goes to i2, and to i1 once every part is settled."""
    from arts.search.state import Node

    def node(i: int, part: str, by: str = "") -> Node:
        steps = [{"step": "part", "part": part}, *([{"op": "note", "by": by}] if by else [])]
        return Node(id=i, parent=1, status="valid", transcript=steps)

    parts = ap.split(SCHEMA, MATERIAL)
    parts = [*parts, dataclasses.replace(parts[1], name="c", folder="incidents/c/")]
    nodes = [node(2, "a", by="compare"), node(3, "b"), node(4, "c"), node(5, "c")]
    assert assembly.pick_part(parts, "check the cache", nodes).name == "b"
    assert assembly.pick_part(parts, "suspect a.db", nodes).name == "a"  # a part it names, settled or not
    settled_all = [node(2, "a", "compare"), node(3, "b", "compare"), node(4, "c", "bisect")]
    assert assembly.pick_part(parts, "check the cache", settled_all).name == "a"


def test_without_observations_a_diagnosis_answers_every_part_unseen(tmp_path: Path, rules):
    """`arts search --without observations` (the bench's arts-no-observations) on incident-rca: no step
    looks at the material; each node only answers its part."""
    from arts.search.cli.main import main

    run = tmp_path / "run"
    args = ["search", "incident-rca", "--without", "observations", "--group", "2", "--rounds", "2"]
    assert main([*args, "--run-dir", str(run), "-q"]) == 0
    assert "investigate" not in rules.purposes and rules.purposes.count("answer") >= 4
    assert json.loads((run / "summary.json").read_text())["best"]["test_score"] is not None


def test_notes_that_oppose_or_found_nothing_do_not_narrow_a_menu():
    from arts.policy.investigator import Finding

    part = ap.split(SCHEMA, MATERIAL)[0]
    notes = [
        Finding(
            text="no line of incidents/a/logs/api.txt matches 'cache'",
            region="incidents/a/logs/api.txt",
            relation="neutral",
        ),
        Finding(text="queue.csv: err 0 -> 1 at t3", region="incidents/a/metrics", relation="oppose"),
        Finding(text="3: ERROR write failed", region="incidents/a/logs/db.txt", relation="support"),
    ]
    menu = diagnose.noted_model(part.schema, notes, "a").model_json_schema()
    assert menu["properties"]["root_service"]["const"] == "db"  # named by the file its note is about
