"""One experiment on an `answer`-kind task: the investigator reads the case, notes findings, and updates
the answer.

The search sees no score here. The investigator's tools act on a read-only copy of the case material in
the sandbox (`tasks.readonly`); its findings become observations with evidence relations to the
hypothesis it tested (`search.dual.after_node`), which are the quality signal; the node's only file is the
deliverable, decoded under the task's answer schema so that it is always well formed. Only the hidden
`[test]` command grades it, at the end of the run.

An answer with one entry per case folder (`policy.answer_parts`) is written a part at a time: each
experiment takes one part (the one its hypothesis names, else the one investigated least), sees only that
part's material and tables, and chooses from menus of what that material and its own notes name. It
starts from the assembled answer: per part, the entry of the best-supported experiment on it (notes that
support, less those that oppose; the newest of equals), which is also the run's final answer
(`search.assembly`). Not done here: grading, or choosing what to investigate.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

from arts.policy import answer_menus, answer_parts
from arts.policy.answer_schema import schema_model
from arts.policy.investigator import Finding, Investigator, Tools
from arts.search import assembly
from arts.search.assembly import answer_file, current_answer, material_paths, material_texts
from arts.search.render import task_line
from arts.search.state import Node
from arts.tasks import history, onset, windows
from arts.tasks.base import Task
from arts.tasks.readonly import NO_MATCH, grep_lines, read_lines

MAX_FILES = 40
"""Material files offered to one investigation (an enum in its grammar): a part's, or the first of all."""


def _levels(texts: dict[str, str], limit: int = 3) -> list[str]:
    """Words written in capitals (4+ letters) on three or more lines of the texts, rarest first: a log's
    levels (ERROR before WARN before INFO), the grep patterns that split lines by what they report."""
    counts = Counter(
        w for t in texts.values() for line in t.splitlines() for w in set(re.findall(r"\b[A-Z]{4,}\b", line))
    )
    return [w for w, n in sorted(counts.items(), key=lambda kv: (kv[1], kv[0])) if n >= 3][:limit]


def table_folders(paths: list[str]) -> list[str]:
    """Folders holding two or more CSV files: what `compare` compares."""
    folders = [p.rsplit("/", 1)[0] for p in paths if p.endswith(".csv") and "/" in p]
    return sorted(f for f in set(folders) if folders.count(f) >= 2)


def _compare(task: Task, allowed: list[str], folder: str) -> tuple[str, str | None, int]:
    """The folder's comparison (`tasks.windows`), led by its verdict where one file's series stays out of
    range before every other's: which of its columns (a cpu that stays out names cpu_saturation), then what
    the other files say of that file's entity around then (`tasks.onset`: a deploy of it just before, its
    log's own errors). (output, that file's name without its extension or None, verdict lines at its head)."""
    csvs = [p for p in allowed if p.endswith(".csv") and p.rsplit("/", 1)[0] == folder]
    tables = {p.rsplit("/", 1)[1]: t for p, t in material_texts(task, csvs).items()}
    output, first = windows.compare(tables), windows.first_out(tables)
    if first is None:
        return output, None, 0
    stem, texts = first[0].rsplit(".", 1)[0], material_texts(task, allowed)
    verdict = [
        f"{first[0]} is the first to stay out of its usual range, at {first[1]} ({', '.join(first[2])})",
        *onset.lines(texts, stem, first[1], folder),
    ]
    return "\n".join([*verdict, output]), stem, len(verdict)


def noted_model(menu: dict, found: list[Finding], name: str) -> type:
    """The part's answer model after the notes: menus narrowed to what the notes name (with the file each
    is about), save notes that oppose and notes that a grep found nothing (they name what is absent). A
    menu that a tool's verdict names (`Finding.by`) keeps what the verdict names, whatever the hypothesis
    and the other notes said: the first of the verdict's lines that names any of a menu's values decides
    it (the first-out file's line decides the root; a deploy of it, later, the fault, not the deploy's
    other services). Free strings to the lines noted."""
    kept = [
        f"{f.text} ({f.region})" for f in found if f.relation != "oppose" and not f.text.startswith(NO_MATCH)
    ]
    schema = answer_menus.narrowed(menu, " ".join(kept), by_mention=True)
    settled: set[int] = set()
    for verdict in (f.text for f in found if f.by):  # in order: a menu an earlier line decided stays so
        decided = answer_menus.narrowed(menu, verdict, by_mention=True)
        menus = zip(*(answer_menus.enums(s) for s in (menu, decided, schema)))
        for i, (whole, ruled, enum) in enumerate(menus):
            if i not in settled and len(ruled["enum"]) < len(whole["enum"]):
                enum["enum"] = ruled["enum"]
                settled.add(i)
    return schema_model(answer_menus.quoting(schema, [f.text for f in found]), name=f"Answer_{name}")


def investigate(
    task: Task,
    investigator: Investigator,
    node: Node,
    parent: Node,
    workdir: Path,
    seed: int,
    nodes: list[Node] | None = None,
    looks: bool = True,
) -> tuple[Node, list[Finding]]:
    """Run the investigator on `node.hypothesis` from the parent's answer (the assembled answer of a part-wise
    task, given the run's `nodes`); fill the node in and return it with the findings (which the round turns
    into observations). Without `looks` it answers without a look at the material (an ablation)."""
    schema = task.answer_schema()
    if schema is None:
        node.status, node.reason = "invalid", "the task declares no [answer] schema; add one to task.toml"
        return node, []
    name, nodes = answer_file(task), nodes or []
    schema_file = task.config.answer.schema_path if task.config.answer else ""
    material = [p for p in material_paths(task) if p != schema_file]  # the menus' source, not evidence
    parts, summary = answer_parts.split(schema, material), task_line(task.statement)
    start = current_answer(parent.files, name)
    part = assembly.pick_part(parts, node.hypothesis, nodes) if parts else None
    if part is not None:
        start = assembly.assembled(nodes, parts, name) or start
        for other in parts:  # before any part was written: the simplest entry each schema accepts
            if answer_parts.get(start, other.path) is None:
                start = answer_parts.put(start, other.path, answer_parts.minimal(other.schema))
        files = [
            p for p in material if p.startswith(part.folder) or not any(p.startswith(q.folder) for q in parts)
        ]
        texts = material_texts(task, files)
        seen = "\n".join(texts.values())
        menu = answer_menus.narrowed(
            part.schema, seen, "\n".join(material_texts(task, material).values()), True
        )
        said = answer_menus.words(seen)
        entities = [v for e in answer_menus.enums(menu) for v in e["enum"] if v.lower() in said]
        words = [*_levels(texts), *dict.fromkeys(entities)]
        model = (
            (lambda found: noted_model(menu, found, part.name))
            if investigator.config.menus_from_notes
            else schema_model(menu, name=f"Answer_{part.name}")
        )
        given, summary = answer_parts.get(start, part.path), f"Part {part.name} ({part.folder}). {summary}"
    else:
        files, words, model = material, [], schema_model(schema)
        said = answer_menus.words("\n".join(material_texts(task, files[:MAX_FILES]).values()))
        given = start
    case, files = workdir / "case", files[:MAX_FILES]
    tables, histories = table_folders(files), history.history_folders(files)
    tools = Tools(
        files=files,
        read=lambda path, start: read_lines(task, case, path, start),
        grep=lambda pattern, path: grep_lines(task, case, pattern, path),
        folders=tables,
        compare=(lambda folder: _compare(task, files, folder)) if tables else None,
        histories=histories,
        bisect=(lambda folder: history.bisect(task, material_texts(task, files), folder, workdir / "history"))
        if histories
        else None,
        words=words[:12],
        vocabulary=frozenset(said),
    )
    try:
        result = investigator.run(node.hypothesis, given, model, tools, summary, seed, None if looks else 0)
    finally:
        shutil.rmtree(case, ignore_errors=True)
        shutil.rmtree(workdir / "history", ignore_errors=True)
    node.transcript = ([{"step": "part", "part": part.name}] if part else []) + result.transcript
    node.tokens_prompt, node.tokens_completion = result.prompt_tokens, result.completion_tokens
    if result.answer is None:
        node.status, node.reason = "invalid", result.reason or "no answer was written"
        return node, result.findings
    answer = answer_parts.put(start, part.path, result.answer) if part else result.answer
    node.files = {**parent.files, name: json.dumps(answer, indent=1, ensure_ascii=False) + "\n"}
    node.status = "valid"
    node.metrics = {"findings": len(result.findings)}
    return node, result.findings
