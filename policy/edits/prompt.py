"""What the executor shows the model for one action: the prompt, and the window of the file it shows.

The 135M default edits only what it sees, and copies what stands last before its answer. So a prompt is
short and always in the same order: the task line, a line-numbered window of the focused file (grown
around the lines the hypothesis mentions when the file is long), the targets the offered actions can
name, the other editable files, instructions, what was tried, the last error, the offered actions, and
the hypothesis last. The action schema that goes with the prompt is built by the executor
(`policy.executor`) from `policy.edits.apply`; this module only writes text.
"""

from __future__ import annotations

import re

from arts.policy.base import Message
from arts.policy.call import chat
from arts.policy.edits.keywords import call_sites, call_source
from arts.policy.edits.swaps import swap_sites
from arts.policy.edits.targets import list_targets

SYSTEM = (
    "Implement the hypothesis exactly as given, not a substitute of your own. "
    "Answer with one edit action as JSON."
)
OP_HELP = {
    "set_constant": "set_constant: a constant's name and its new value (a Python literal)",
    "set_keyword": "set_keyword: a call, one of its keyword arguments and the new value",
    "swap_call": "swap_call: a call and what to call instead",
    "set_return": "set_return: a function and the new expression it returns",
    "replace_function": "replace_function: a function's name and its whole new body",
    "replace_lines": "replace_lines: first and last line to replace (as numbered above) and the new text",
    "write_file": "write_file: the whole content of the file",
    "read_file": "read_file: show another editable file",
}


def one_line(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs become one space), cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def window(text: str, hypothesis: str, budget: int) -> tuple[int, int]:
    """Lines (1-based, inclusive) of `text` to show within `budget` characters: everything if it fits,
    else a window grown around the line that mentions most of the hypothesis's identifiers."""
    lines = text.split("\n")
    sizes = [len(f"{i + 1} | {line}") + 1 for i, line in enumerate(lines)]
    if sum(sizes) <= budget:
        return 1, len(lines)
    words = set(re.findall(r"[A-Za-z_]\w{2,}", hypothesis))
    hits = [len(words & set(re.findall(r"\w+", line))) for line in lines]
    lo = hi = max(range(len(lines)), key=lambda i: (hits[i], -i))
    used = sizes[lo]
    while True:  # grow downwards first (a def's body follows it), then upwards
        if hi + 1 < len(lines) and used + sizes[hi + 1] <= budget:
            hi, used = hi + 1, used + sizes[hi + 1]
        elif lo > 0 and used + sizes[lo - 1] <= budget:
            lo, used = lo - 1, used + sizes[lo - 1]
        else:
            return lo + 1, hi + 1


def _calls(text: str, ops: list[str], only: set[str] | None) -> list[str]:
    """One line per call the offered ops can edit: its source, the keywords it takes, the siblings it
    may swap to (the first few)."""
    keyed = {s.name: s for s in call_sites(text)} if "set_keyword" in ops else {}
    swaps = {s.name: s for s in swap_sites(text)} if "swap_call" in ops else {}
    out = []
    for name in dict.fromkeys([*keyed, *swaps]):
        k, w = keyed.get(name), swaps.get(name)
        if only is not None and name not in only and not (k and set(k.menus) & only):
            continue
        line = f"{name}: {call_source(text, k or w)}"
        line += f" takes {', '.join(list(k.menus)[:8])}" if k else ""
        if w:
            line += f"; swaps to {', '.join(list(w.menu)[:6])}{', ...' if len(w.menu) > 6 else ''}"
        out.append(line)
    return out


def action_prompt(
    hypothesis: str,
    files: dict[str, str],
    focus: str,
    span: tuple[int, int],
    ops: list[str],
    only: set[str] | None = None,
    **ctx: str,
) -> list[Message]:
    """The short prompt of one action: task line, the focused file's window, targets, other files,
    instructions, the last error, the offered actions, and the hypothesis last (right before the answer,
    the 135M model copied the hypothesis's value in 3 of 8 samples; 0 of 8 with the hypothesis first)."""
    text, parts = files.get(focus, ""), []
    if ctx.get("task_summary"):
        parts.append(f"Task: {one_line(ctx['task_summary'], 300)}")
    if text.strip():
        lines = text.split("\n")
        shown = "\n".join(f"{n} | {lines[n - 1]}" for n in range(span[0], span[1] + 1))
        parts.append(f"File {focus} (lines {span[0]}-{span[1]} of {len(lines)}):\n{shown}")
    else:
        parts.append(f"File {focus} is empty: write it whole, from the task.")
    targets = list_targets(text) if focus.endswith(".py") else None
    consts = {k: v for k, v in (targets.constants if targets else {}).items() if only is None or k in only}
    if consts and "set_constant" in ops:
        parts.append("Constants: " + ", ".join(f"{k} = {one_line(v, 30)}" for k, v in consts.items()))
    calls = _calls(text, ops, only) if targets is not None else []
    if calls:
        parts.append("Calls:\n" + "\n".join(calls))
    functions = [f for f in (targets.functions if targets else []) if only is None or f in only]
    if functions and "replace_function" in ops:
        parts.append(f"Functions: {', '.join(functions)}")
    if functions and "set_return" in ops:
        rets = [
            f"{f} returns {one_line(b.strip().splitlines()[-1][7:], 60)}"
            for f, b in targets.functions.items()
            if f in functions and b.strip() and b.strip().splitlines()[-1].startswith("return ")
        ]
        if rets:
            parts.append("Returns: " + "; ".join(rets))
    others = [p for p in files if p != focus]
    if others:
        parts.append(f"Other editable files: {', '.join(others)}")
    if ctx.get("instructions"):
        parts.append(ctx["instructions"].strip())
    if ctx.get("tried"):
        parts.append(f"Tried before:\n{ctx['tried']}")
    if ctx.get("last_error"):
        parts.append(f"Last error: {ctx['last_error']}")
    parts.append("Actions:\n" + "\n".join(f"- {OP_HELP[op]}" for op in ops))
    parts.append(f"Hypothesis: {hypothesis.strip()}")
    return chat(SYSTEM, "\n\n".join(parts))
