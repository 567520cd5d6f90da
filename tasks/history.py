"""Test at each commit: where in a program's history a failing test starts to fail. A probe an investigator
runs over case material that holds a history (which change broke the test?), as `git bisect` does, so that
a model too small to read seven diffs still sees which commit the test itself blames.

A history is a material folder with `commits/<NN>.txt` (oldest first by name; each holds a unified diff,
after any message), the program's files after the last commit (under the folder, e.g. `src/`), and the
failing test named by a line `<module>.py::<test> FAILED` in a text file of the folder (pytest's own
output). The tool undoes the diffs from the final tree (`whatthepatch`), newest first, writes every state
into a sandboxed working copy and calls the test there once per state (`tasks.isolation`: own uid, no
network, time and memory limits: the case's program is code nobody here has read). Its output leads with
the verdict, one line that names only the commit it blames, so that a note quoting it names that commit.

Not done: histories whose diffs do not undo cleanly (the output says which commit and stops), tests that
take arguments (fixtures), or more than one failing test (the first named is used).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import whatthepatch

from arts.tasks.base import CommandConfig, Task
from arts.tasks.isolation import lease, plan_for
from arts.tasks.process import execute
from arts.tasks.workcopy import prepare

FAILED = re.compile(r"^(?P<module>[\w/.-]+)\.py::(?P<test>\w+) FAILED\b", re.M)
TIMEOUT_S = 10
MEMORY_MB = 512
STATES = "states"
"""Where in the working copy each state of the program is written (`states/<k>/`: after k commits)."""


class HistoryError(ValueError):
    """A history the tool cannot replay; the message says what is wrong with it."""


@dataclass(frozen=True)
class History:
    folder: str
    """The case folder, relative to the task directory."""
    commits: list[tuple[str, str]]
    """(id, text) of each commit, oldest first; the id is the file name without `.txt`."""
    tree: dict[str, str]
    """The program after the last commit: path relative to its source folder -> text."""
    source: str
    """The folder under `folder` that holds the program (`src`), or "" for the folder itself."""
    module: str
    test: str


def history_folders(paths: list[str]) -> list[str]:
    """Material folders that hold a history: `<folder>/commits/<NN>.txt` files, two or more."""
    found = [p.rsplit("/commits/", 1)[0] for p in paths if re.search(r"(^|/)commits/[^/]+\.txt$", p)]
    return sorted(f for f in set(found) if found.count(f) >= 2 and not f.endswith(".txt"))


def load(texts: dict[str, str], folder: str) -> History:
    """The history of `folder` from the material's texts (path relative to the task -> text)."""
    inside = {p[len(folder) + 1 :]: t for p, t in texts.items() if p.startswith(folder + "/")}
    commits = sorted(
        (p[len("commits/") : -4], t) for p, t in inside.items() if re.fullmatch(r"commits/[^/]+\.txt", p)
    )
    failed = next((m for t in inside.values() if (m := FAILED.search(t))), None)
    if len(commits) < 2 or failed is None:
        raise HistoryError(
            f"{folder} holds no history to replay: it needs commits/<NN>.txt files (unified diffs) and a "
            "test output with a line '<module>.py::<test> FAILED'"
        )
    module = failed.group("module").rsplit("/", 1)[-1]
    where = [p for p in inside if p.rsplit("/", 1)[-1] == f"{module}.py" and not p.startswith("commits/")]
    if not where:
        raise HistoryError(f"{folder}: the failing test's module {module}.py is not in the material")
    source = where[0].rsplit("/", 1)[0] if "/" in where[0] else ""
    prefix = f"{source}/" if source else ""
    tree = {p[len(prefix) :]: t for p, t in inside.items() if p.startswith(prefix) and p.endswith(".py")}
    tree = {p: t for p, t in tree.items() if not p.startswith("commits/")}
    return History(folder, commits, tree, source, module, failed.group("test"))


def states(history: History) -> list[dict[str, str]]:
    """The program before the first commit, after the first, ..., after the last (len = commits + 1)."""
    tree, out = dict(history.tree), [dict(history.tree)]
    for cid, text in reversed(history.commits):
        diffs = list(whatthepatch.parse_patch(text))
        if not diffs:
            raise HistoryError(f"{history.folder}: commit {cid} holds no unified diff")
        for diff in diffs:
            path = (diff.header.new_path or diff.header.old_path or "").removeprefix("b/")
            if path not in tree:
                raise HistoryError(f"{history.folder}: commit {cid} changes {path}, which the program lacks")
            try:
                lines = whatthepatch.apply_diff(diff, tree[path].splitlines(), reverse=True)
            except Exception as e:  # whatthepatch's HunkApplyException, or a malformed hunk
                raise HistoryError(f"{history.folder}: commit {cid} does not undo on {path} ({e})") from e
            tree[path] = "\n".join(lines) + "\n"
        out.insert(0, dict(tree))
    return out


def bisect(task: Task, texts: dict[str, str], folder: str, workdir: Path) -> tuple[str, str | None]:
    """Run the failing test at every state of `folder`'s history in the sandbox: (`report`'s output, the
    commit its verdict blames, None when no single commit broke the test)."""
    history = load(texts, folder)
    trees = states(history)
    files = {f"{STATES}/{k}/{p}": t for k, tree in enumerate(trees) for p, t in tree.items()}
    Path(workdir).mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir).resolve()
    cfg = CommandConfig(command=["python"], timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB, max_procs=4)
    results: list[str] = []
    with lease() as uid:
        prepare(task, files, workdir, uid, with_hidden=False)
        for k in range(len(trees)):
            code = (
                f"import sys; sys.path.insert(0, {f'{STATES}/{k}'!r}); import {history.module} as m; "
                f"m.{history.test}()"
            )
            o = execute([sys.executable, "-B", "-c", code], cfg, workdir, plan_for(task, cfg, workdir, uid))
            if o.stopped:
                results.append(f"stopped ({o.stopped})")
            elif o.returncode == 0:
                results.append("passes")
            else:
                last = [line for line in o.stderr.strip().splitlines() if line.strip()]
                results.append("fails" + (f" ({last[-1].split(':', 1)[0]})" if last else ""))
    return report(history, results)


def report(history: History, results: list[str]) -> tuple[str, str | None]:
    """The tool's output: the verdict, which names only the commit it blames (a note that quotes a line
    here then names no other commit), and how many states passed and failed; and the blamed commit."""
    ids, test, blamed = [cid for cid, _ in history.commits], history.test, None
    passing = [r == "passes" for r in results]
    first = passing.index(False) if False in passing else None
    if first is None:
        verdict = f"{test} passes at every commit here: the history does not reproduce the failure"
    elif first == 0:
        verdict = f"{test} already fails before the first commit: the break is older than this history"
    elif any(passing[first:]):
        verdict = f"{test} fails and passes again along the history: no single commit broke it"
    else:
        blamed = ids[first - 1]
        verdict = f"commit {blamed} is the first after which {test} fails; it passed before"
    fails = [r for r in results if r != "passes"]
    how = sorted(set(fails))
    counts = f"{test} ({history.module}.py) passed at {len(results) - len(fails)} of {len(results)} states"
    return "\n".join([verdict, counts + (f", then {', '.join(how)}" if how else "")]), blamed
