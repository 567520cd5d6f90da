"""What the rest of a case says about the series a comparison found first out of range (`tasks.windows`):
the lines of other files that name its entity in the few minutes before it left its range (a change
log's deploy of it), and the lines at the most severe level of its own file, from then on, whose kind no
other file of its folder has (its log's own errors, not the timeouts its callers echo). A read-only probe after
`compare`: each line it returns is part of the comparison's verdict, so that a model too small to map a
log line to a cause still answers with what the material names (`search.diagnose.noted_model`).

Row labels are clock times (`HH:MM` or `HH:MM:SS`, as minutes) or plain numbers; a line's label is its
first field (before a space or a comma). Measured on 60 generated incidents of incident-rca
(`scripts/onset_faults.py`, docs/diagnosis.md).

Text only, no model, nothing run: the caller hands in the file contents (material it is allowed to read).
"""

from __future__ import annotations

import re

BEFORE = 5.0
"""How far before the first-out row a line that names the entity counts (minutes, or rows of a numeric label)."""
MAX_OWN = 3
"""Own lines returned: the most frequent distinct ones."""
SEVERITY = ("FATAL", "CRITICAL", "ERROR", "WARNING", "WARN", "NOTICE", "INFO", "DEBUG")
"""Log levels, most severe first: a file's own lines are read at the most severe level it shows."""

_LABEL = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}))?(?=[\s,]|$)|^\s*(-?\d+(?:\.\d+)?)(?=[\s,])")


def label(line: str) -> float | None:
    """A line's leading time or number (a clock time in minutes); None when it has none."""
    m = _LABEL.match(line)
    if m is None:
        return None
    if m.group(4) is not None:
        return float(m.group(4))
    return int(m.group(1)) * 60 + int(m.group(2)) + int(m.group(3) or 0) / 60


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _inside(path: str, folder: str) -> bool:
    return bool(folder) and path.startswith(folder.rstrip("/") + "/")


def _names(line: str, entity: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(entity)}(?![\w-])", line, re.IGNORECASE) is not None


def before(texts: dict[str, str], entity: str, at: str, skip: str = "") -> list[tuple[str, str]]:
    """(file, line) of every line outside `entity`'s own files and the folder `skip` that names `entity`
    and is labelled within `BEFORE` of the row label `at`, at or before it, in file order."""
    t = label(at)
    if t is None:
        return []
    out = []
    for path, text in texts.items():
        if _stem(path) == entity or _inside(path, skip):
            continue
        for line in text.splitlines():
            when = label(line)
            if when is not None and t - BEFORE <= when <= t and _names(line, entity):
                out.append((path, line.strip()))
    return out


def template(line: str) -> str:
    """A line without its label and with every number masked: what two lines of one kind share."""
    body = _LABEL.sub("", line, count=1)
    return re.sub(r"\d+(?:\.\d+)?", "#", body).strip(" ,")


def own(texts: dict[str, str], entity: str, at: str, skip: str = "") -> list[tuple[str, str]]:
    """(file, line) of `entity`'s own file outside `skip`: its lines from the row label `at` on whose
    template no other file of that folder has, at the most severe level among them (`SEVERITY`; all when
    none shows one), the most frequent `MAX_OWN` kinds (the first line of each)."""
    t = label(at)
    mine = [p for p in texts if _stem(p) == entity and not _inside(p, skip)]
    if t is None or not mine:
        return []
    path = mine[0]
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    elsewhere = {
        template(line)
        for p, text in texts.items()
        if p != path and (p.rsplit("/", 1)[0] if "/" in p else "") == folder
        for line in text.splitlines()
    }
    fresh = [
        line.strip()
        for line in texts[path].splitlines()
        if (when := label(line)) is not None and when >= t and template(line) not in elsewhere
    ]
    level = next((w for w in SEVERITY if any(re.search(rf"\b{w}\b", line) for line in fresh)), None)
    kinds: dict[str, list[str]] = {}
    for line in fresh:
        if level is None or re.search(rf"\b{level}\b", line):
            kinds.setdefault(template(line), []).append(line)
    ranked = sorted(kinds.values(), key=lambda lines: -len(lines))  # stable: the earliest of equals first
    return [(path, lines[0]) for lines in ranked[:MAX_OWN]]


def lines(texts: dict[str, str], entity: str, at: str, folder: str) -> list[str]:
    """The verdict lines after the first-out one: what names `entity` just before `at`, then its own file's
    lines from `at` on; `folder` is the compared one, left out of both."""
    out = [f"{_stem(p)} names {entity} before {at}: {line}" for p, line in before(texts, entity, at, folder)]
    return out + [f"only {entity}'s log, from {at}: {line}" for _, line in own(texts, entity, at, folder)]
