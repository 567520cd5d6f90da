"""The truth a task generator writes into its task's make_hidden.py (incident-rca, regression-bisect): the
hidden grader's salt is read from there, and the truth and its sha256 are replaced there, without running it."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path


def assignment(source: str, name: str, where: Path) -> ast.Assign:
    """The top-level assignment `name = ...` of a Python source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [name]:
            return node
    raise ValueError(f"{where} defines no {name} = '...'; restore it")


def grader_salt(where: Path) -> str:
    """The salt of the hidden grader: `SALT` in the grader text (TEST_PY) of make_hidden.py at `where`."""
    grader = ast.literal_eval(assignment(where.read_text(), "TEST_PY", where).value)
    return ast.literal_eval(assignment(grader, "SALT", where).value)


def with_truth(source: str, truth: str, where: Path) -> str:
    """make_hidden.py's source with TRUTH_JSON, and its sha256 in DIGESTS, set to `truth`: the assignment's
    lines are replaced whole, whichever quotes a formatter gave them."""
    node = assignment(source, "TRUTH_JSON", where)
    old = ast.literal_eval(node.value)
    lines = source.splitlines(True)
    new = [*lines[: node.lineno - 1], f'TRUTH_JSON = """\\\n{truth}"""\n', *lines[node.end_lineno :]]
    sha = [hashlib.sha256(t.encode()).hexdigest() for t in (old, truth)]
    return "".join(new).replace(*sha)
