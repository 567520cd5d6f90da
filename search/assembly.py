"""A diagnosis answer assembled part by part: which part an experiment takes, and the run's answer.

For an answer split into parts (`policy.answer_parts`), each experiment writes one part
(`search.diagnose`). Here: the part a node wrote (`part_of`), its support (notes that support its
hypothesis, less those that oppose), the part the next experiment takes (the one its hypothesis names,
else the one investigated least), and the assembled answer (per part, the best-supported entry, the newest
of equals), which every experiment starts from and which is the run's final answer (`final_node`).
"""

from __future__ import annotations

import json
import re

from arts.policy import answer_menus, answer_parts
from arts.policy.answer_parts import Part
from arts.search.state import Node
from arts.tasks.base import Task


def answer_file(task: Task) -> str:
    answer = task.config.answer
    return answer.file if answer is not None else task.config.editable[0]


def material_paths(task: Task) -> list[str]:
    """The material's text files, relative to the task directory (whatever the working directory is: a
    check against the working directory once offered the investigator no file at all)."""
    root = task.root.resolve()
    paths = [str(p.relative_to(root)) for p in (root / f for f in task.material_files()) if p.is_file()]
    return [p for p in sorted(paths) if not p.endswith((".npz", ".npy", ".pt", ".bin", ".gz", ".zip"))]


def current_answer(files: dict[str, str], name: str) -> dict | None:
    try:
        value = json.loads(files.get(name) or "null")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def material_texts(task: Task, paths: list[str]) -> dict[str, str]:
    out = {}
    for rel in paths:
        try:
            out[rel] = (task.root / rel).read_text(errors="replace")
        except OSError:
            continue
    return out


def part_of(node: Node) -> str | None:
    """The answer part a node's investigation wrote (None for a whole answer, or a node of no investigation)."""
    first = node.transcript[0] if node.transcript else {}
    return first.get("part") if isinstance(first, dict) else None


def support(node: Node) -> int:
    """Notes of the node's investigation that support its hypothesis, less those that oppose it."""
    rel = [t.get("action", {}).get("relation") for t in node.transcript if t.get("op") == "note"]
    return rel.count("support") - rel.count("oppose")


def assembled(nodes: list[Node], parts: list[Part], name: str) -> dict | None:
    """The answer built from each part's best-supported valid experiment (newest of equals), whole: a part
    no experiment wrote holds the simplest entry its schema accepts (a grader refuses a missing one); None
    before any part was written."""
    answer, written = None, False
    for part in parts:
        done = [n for n in nodes if n.status == "valid" and part_of(n) == part.name]
        best = max(done, key=lambda n: (support(n), n.id)) if done else None
        entry = answer_parts.get(current_answer(best.files, name), part.path) if best else None
        written |= entry is not None
        answer = answer_parts.put(
            answer, part.path, answer_parts.minimal(part.schema) if entry is None else entry
        )
    return answer if written else None


def pick_part(parts: list[Part], hypothesis: str, nodes: list[Node]) -> Part:
    """The part the hypothesis names first ("suspect c4.07, unlike c1": c4), else the part with fewest
    experiments (the first of equals) among those no tool's verdict settled (`settled`) while one is open:
    a free hypothesis that names no part (the capable profile's) goes where the case is still open."""
    said = re.findall(r"[a-z0-9][a-z0-9_-]*", hypothesis.lower())
    named = [p for p in parts if p.name.lower() in said]
    if named:
        return min(named, key=lambda p: said.index(p.name.lower()))
    counts = {p.name: 0 for p in parts}
    for n in nodes:
        if (k := part_of(n)) in counts:
            counts[k] += 1
    done = {part_of(n) for n in nodes if n.status == "valid" and settled(n)}
    return min([p for p in parts if p.name not in done] or parts, key=lambda p: counts[p.name])


def final_answer(task: Task, nodes: list[Node]) -> dict | None:
    """The run's answer for a part-wise task: each part's best-supported entry; None for a whole answer."""
    schema = task.answer_schema()
    parts = answer_parts.split(schema, material_paths(task)) if schema else []
    return assembled(nodes, parts, answer_file(task)) if parts else None


def final_node(lab, task: Task, nodes: list[Node]) -> Node | None:
    """The node that holds the run's answer for a part-wise task (`final_answer`): the newest valid node
    that holds it, else a node the lab adds for it (no model call, no evaluation); None for a whole answer
    or before any part was written."""
    answer = final_answer(task, nodes)
    if answer is None:
        return None
    name = answer_file(task)
    valid = sorted((n for n in nodes if n.status == "valid"), key=lambda n: n.id, reverse=True)
    for n in valid:
        if current_answer(n.files, name) == answer:
            return n
    if not valid:
        return None
    newest = valid[0]
    node = lab.begin(newest, "the best-supported entry of each part", "answer")
    node.files = {**newest.files, name: json.dumps(answer, indent=1, ensure_ascii=False) + "\n"}
    node.status, node.transcript = "valid", [{"step": "assembled", "answer": answer}]
    lab.ledger.update(node)
    lab.ledger.store.write_node_files(node)
    return node


def settled(node: Node) -> bool:
    """Whether a tool's verdict in the node's investigation named what its part's answer is (a bisect that
    blamed one commit): rerun on the same material, it would say the same."""
    return any(t.get("by") and t.get("op") == "note" for t in node.transcript)


def suspects(task: Task, nodes: list[Node], per_part: int = 8) -> dict[str, tuple[str, ...]]:
    """A diagnosis's directed moves for the small profile's scientist: `suspect <part>.<entity>` for the
    entities of each part's first entity menu that its material names (a service of this incident, a
    commit of this case), interleaved across parts, the parts investigated least first. A hypothesis is
    then always grounded: one of these, never free words ("falsehood", "list hypothesis" were the 135M
    default's). A part a tool's verdict settled (`settled`) leaves the menus while another part is open."""
    schema = task.answer_schema()
    material = [
        p for p in material_paths(task) if task.config.answer is None or p != task.config.answer.schema_path
    ]
    parts = answer_parts.split(schema, material) if schema else []
    if not parts:
        return {}
    whole = "\n".join(material_texts(task, material).values())
    counts = {p.name: sum(part_of(n) == p.name for n in nodes) for p in parts}
    done = {part_of(n) for n in nodes if n.status == "valid" and settled(n)}
    parts = [p for p in parts if p.name not in done] or parts
    said, menus = answer_menus.words(whole), []
    for part in sorted(parts, key=lambda p: counts[p.name]):
        text = "\n".join(material_texts(task, [p for p in material if p.startswith(part.folder)]).values())
        menu = answer_menus.narrowed(part.schema, text, whole, entities_only=True)
        first = next(
            (e["enum"] for e in answer_menus.enums(menu) if answer_menus.entities(e["enum"], said)), []
        )
        menus.append([f"{part.name}.{v}" for v in first[:per_part]])
    moves: dict[str, tuple[str, ...]] = {}
    for rank in range(per_part):  # interleaved: each part's first suspect, then each part's second, ...
        moves.update((name, ("suspect",)) for menu in menus if rank < len(menu) for name in [menu[rank]])
    return moves
