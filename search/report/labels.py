"""What a node is at a glance: its move (verb and target) and how it compares with the seed.

The tree and the node table label every node with these, so a reader sees "swap LinearRegression → Ridge,
2.656, worse than the seed" without opening anything. A move comes from the node's hypothesis: a directed
one (`policy.edits.moves.directed_target`, "increase MARGIN ...") or a typed edit written as JSON
(`policy.edits.actions`, what the baseline methods record); anything else shows its first words.
The comparison is in the task's direction: the store's `score` is direction-normalised (higher is better),
so a minimise task's 4.96 against a 2.65 seed is worse.
"""

from __future__ import annotations

import json

from arts.policy.edits.moves import directed_target
from arts.search.state import Node


def _short(x: object, n: int = 18) -> str:
    s = str(x)
    return s if len(s) <= n else s[: n - 1] + "…"


def move_label(hypothesis: str, limit: int = 30) -> str:
    """A short verb-and-target label for a hypothesis ("increase X", "swap Ridge → Lasso"); "seed" for none."""
    text = hypothesis.strip()
    if not text:
        return "seed"
    if text.startswith("{"):
        try:
            a = json.loads(text)
        except ValueError:
            a = None
        if isinstance(a, dict) and "op" in a:
            label = {
                "set_constant": lambda: f"set {a.get('name')} = {_short(a.get('value'))}",
                "set_keyword": lambda: f"tune {a.get('call')} {a.get('keyword')}={_short(a.get('value'))}",
                "swap_call": lambda: f"swap {a.get('call')} → {a.get('to')}",
                "set_return": lambda: f"rewrite {a.get('function')} return",
                "replace_function": lambda: f"rewrite {a.get('name')}",
                "replace_lines": lambda: (
                    f"edit {a.get('file', '')} lines {str(a.get('start', '')).split('|')[0].strip()}"
                ),
                "write_file": lambda: f"write {a.get('file')}",
            }.get(a["op"], lambda: str(a["op"]))()
            return _short(label, limit)
    if (move := directed_target(text)) is not None:
        return _short(f"{move[0]} {move[1]}", limit)
    return _short(" ".join(text.split()[:5]), limit)


def verdict(node: Node, seed: Node | None) -> str:
    """'seed', 'better', 'same' or 'worse' (than the seed, in the task's direction), 'invalid' or 'pending'."""
    if node.parent is None:
        return "seed"
    if node.status == "pending":
        return "pending"
    if node.score is None:
        return "invalid"
    if seed is None or seed.score is None:
        return "better"  # the seed has no score: any measured node improves on it
    tol = 1e-9 * max(1.0, abs(seed.score))  # the same program measured twice differs in the last bits
    if node.score > seed.score + tol:
        return "better"
    return "worse" if node.score < seed.score - tol else "same"


COLOURS = {
    "seed": "#5b7fb8",
    "better": "#1a9850",
    "same": "#9a9a9a",
    "worse": "#d73027",
    "invalid": "#ffffff",
    "pending": "#ffffff",
}
"""Fill per verdict: green better, red worse, grey unchanged, blue the seed; invalid and pending are hollow
(a dark red cross and a dashed outline)."""


def shade(node: Node, seed: Node | None, lo: float, hi: float) -> str:
    """The verdict's colour, deeper the further the score is from the seed (lo/hi: the worst and best
    scores of the run, direction-normalised)."""
    v = verdict(node, seed)
    if v not in ("better", "worse") or seed is None or seed.score is None or node.score is None:
        return COLOURS[v]
    far = (hi - seed.score) if v == "better" else (seed.score - lo)
    t = 0.35 + 0.65 * min(1.0, abs(node.score - seed.score) / (far or 1.0))
    base = (26, 152, 80) if v == "better" else (215, 48, 39)
    return "#" + "".join(f"{round(255 + (c - 255) * t):02x}" for c in base)
