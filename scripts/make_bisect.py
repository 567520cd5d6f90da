"""Generator of the built-in diagnosis task `regression-bisect`: which commit of a short history broke a test.

Why a generator: a diagnosis task needs cases whose truth is known for certain and that a careful reader can
solve from the material alone, while shallow rules cannot. Each case is built from one integer seed
(`random.Random`, no numpy), so the committed task is reproduced byte for byte from its seed.

A case: one of the tiny programs of scripts/bisect_shop.py, bisect_grades.py and bisect_text.py, whose
tests all pass, then 5-8 commits of one edit each. One commit (the break) applies a fault of one of five
kinds (`KINDS`); the others are harmless: a comment, a docstring, a renamed local, a rewrite that computes the same, a new
function nothing calls. The material is each commit's message and unified diff, the tree after the last
commit and the test run there. Solvable by construction: the generator runs the tests after every commit
and keeps a draw only where they all pass before the break and only the fault's test fails from it on (so
undoing the diffs from the last tree and rerunning finds the break). Red herrings (`TRAPS`, each drawn with
its probability): the break's message reads as a tidy-up, a harmless commit after the break touches the file
the failure points at, and harmless commits gather on the files of the failure and of the fault. The fault
is often in a helper the traceback never shows (an assertion's traceback ends in the test).

What it is not: a model of real histories; every commit touches one file. The generator, its seeds and the
truth never enter the task material: the truth goes, as salted digests, into the task's make_hidden.py, which
builds grader/truth.json at first use (`arts.tasks.hidden`). task.toml, statement.md and the grader's text in
make_hidden.py (which holds the salt) are hand-written; this script reads the salt from there and copies
those files when it writes a case elsewhere.

    .venv/bin/python scripts/make_bisect.py [--seed 17] [--cases 4] [--out tasks/builtin/regression-bisect]
                                            [--truth-out truth.json]

`--truth-out` writes the plain truth (case -> commit, kind) outside the task folder, so that
tests/test_regression_bisect.py can score answers on a regenerated case without importing this script.
Commit files are `.txt` (a `git show`-like text): the package ships task material by suffix, and .txt is one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, `scripts.` still imports

from scripts import hidden_truth  # noqa: E402
from scripts.bisect_grades import GRADES  # noqa: E402
from scripts.bisect_shop import SHOP  # noqa: E402
from scripts.bisect_text import TEXT  # noqa: E402
from scripts.bisect_world import (  # noqa: E402
    COMMENTS,
    KINDS,
    Fault,
    Program,
    comment,
    diff,
    docstring,
    enclosing,
    functions,
    rename,
    render,
    replace_once,
    run_tests,
    shown_file,
)

DEFAULT_SEED = 17
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tasks" / "builtin" / "regression-bisect"
STATIC = ("task.toml", "statement.md")
GENERATOR = "make_hidden.py"
PROGRAMS = (SHOP, GRADES, TEXT)
TRAPS = {"tidy_message": 0.6, "late_touch": 0.5, "near_decoys": 0.7}
"""Red herrings and the probability each is drawn with."""
TIDY = (
    "refactor {fn}",
    "tidy {module}",
    "style: clean up {fn}",
    "simplify {fn}",
    "small cleanup in {module}",
)
DECOY_MESSAGES = {
    "comment": ("explain {fn}", "comment {fn}", "note the edge case in {fn}", "fix the comment in {fn}"),
    "docstring": ("document {fn}", "docs: {fn}"),
    "rename": ("rename {old} to {new} in {fn}", "refactor {fn}: clearer names"),
}


@dataclass(frozen=True)
class Commit:
    id: str
    message: str
    file: str
    diff: str


@dataclass(frozen=True)
class Case:
    id: str
    seed: int
    program: str
    fault: Fault
    commit: str
    """The breaking commit's id."""
    commits: list[Commit]
    files: dict[str, str]
    """The tree after the last commit."""
    output: str
    traps: list[str]


def _decoy(rng: random.Random, program: Program, text: str, file: str) -> tuple[str, str] | None:
    """One harmless edit of `file`: (new text, commit message), or None where the draw does not apply."""
    fn = rng.choice(functions(text) or [""])
    kind = rng.choice(("comment", "docstring", "rename", "rewrite", "rewrite"))
    if kind == "comment":
        new = comment(text, fn, rng.randrange(8), rng.choice(COMMENTS))
    elif kind == "docstring":
        new = docstring(text, fn, program.docs[(file, fn)]) if (file, fn) in program.docs else None
    elif kind == "rename":
        options = [r for r in program.renames if r[0] == file]
        if not options:
            return None
        _, fn, old, name = rng.choice(options)
        new = rename(text, fn, old, name)
        return (
            None if new is None else (new, rng.choice(DECOY_MESSAGES[kind]).format(fn=fn, old=old, new=name))
        )
    else:
        options = [e for e in program.rewrites if e.file == file]
        if not options:
            return None
        edit = rng.choice(options)
        new = replace_once(text, edit.old, edit.new)
        return None if new is None else (new, edit.message)
    return None if new is None else (new, rng.choice(DECOY_MESSAGES[kind]).format(fn=fn))


def _draw(rng: random.Random, program: Program, case_id: str, seed: int) -> Case | None:
    """One history, or None where it breaks the rules the module docstring states (the caller draws again)."""
    fault = rng.choice(program.faults)
    n = rng.randint(5, 8)
    brk = rng.randint(1, n)
    traps = [t for t, p in TRAPS.items() if rng.random() < p]
    broken = {**program.files, fault.file: replace_once(program.files[fault.file], fault.old, fault.new)}
    shown = shown_file(run_tests(broken, program.test_file)[fault.test], program.test_file)
    sources = sorted(f for f in program.files if f != program.test_file)
    files, states, commits, touched = dict(program.files), [dict(program.files)], [], False
    for k in range(1, n + 1):
        if k == brk:
            file, text = fault.file, replace_once(files[fault.file], fault.old, fault.new)
            fn = enclosing(files[file], fault.old) or file.removesuffix(".py")
            template = rng.choice(TIDY) if "tidy_message" in traps else fault.message
            message = template.format(fn=fn, module=file.removesuffix(".py"))
        else:
            for _ in range(30):
                # after the break, the file the failure points at is touched only where the trap is drawn
                avoid = {shown} if k > brk and "late_touch" not in traps else set()
                if k > brk and "late_touch" in traps and not touched:
                    file = shown
                elif "near_decoys" in traps and rng.random() < 0.5 and {fault.file, shown} - avoid:
                    file = rng.choice(sorted({fault.file, shown} - avoid - {program.test_file}))
                else:
                    file = rng.choice(sorted(set(sources) - avoid))
                made = _decoy(rng, program, files[file], file)
                if made and (k > brk or replace_once(made[0] if file == fault.file else files[fault.file],
                                                     fault.old, fault.new)):  # fmt: skip
                    break
            else:
                return None
            text, message = made
            touched = touched or (k > brk and file == shown)
        if text is None:
            return None
        commits.append(Commit(f"{k:02d}", message, file, diff(file, files[file], text)))
        files[file] = text
        states.append(dict(files))
    for k, state in enumerate(states):
        failing = [t for t, f in run_tests(state, program.test_file).items() if f is not None]
        if failing != ([fault.test] if k >= brk else []):
            return None
    results = run_tests(files, program.test_file)
    return Case(case_id, seed, program.name, fault, f"{brk:02d}", commits, files,
                render(results, program.test_file), traps)  # fmt: skip


def generate_case(seed: int, case_id: str = "c1") -> Case:
    """One case from one seed: same seed, same case, byte for byte."""
    rng = random.Random(seed)
    program = rng.choice(PROGRAMS)
    for _ in range(200):
        case = _draw(rng, program, case_id, seed)
        if case is not None:
            return case
    raise RuntimeError(f"seed {seed}: no valid history of {program.name} in 200 draws; check its edits")


def write_case_folder(case: Case, out: Path) -> None:
    """The case's material, and nothing of its truth, under `out` (e.g. cases/c1)."""
    for sub in ("commits", "src"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for c in case.commits:
        (out / "commits" / f"{c.id}.txt").write_text(f"commit {c.id}\n\n    {c.message}\n\n{c.diff}")
    for file, text in sorted(case.files.items()):
        (out / "src" / file).write_text(text)
    (out / "test_output.txt").write_text(case.output)


def answer_schema(cases: list[Case]) -> dict:
    """JSON schema of answer.json: every value a grammar-constrained model can write is a valid one."""
    ids = [c.id for c in cases]
    verdict = {
        c.id: {
            "type": "object",
            "properties": {
                "commit": {"type": "string", "enum": [k.id for k in c.commits]},
                "kind": {"type": "string", "enum": list(KINDS)},
            },
            "required": ["commit", "kind"],
            "additionalProperties": False,
        }
        for c in cases
    }
    return {
        "title": "regression-bisect answer",
        "type": "object",
        "properties": {
            "cases": {"type": "object", "properties": verdict, "required": ids, "additionalProperties": False}
        },
        "required": ["cases"],
        "additionalProperties": False,
    }


def digest(salt: str, case: str, value: str) -> str:
    """What grader/truth.json stores instead of a value; the grader computes the same from the answer."""
    return hashlib.sha256(f"{salt}:{case}:{value}".encode()).hexdigest()


def grader_salt(task_dir: Path = DEFAULT_OUT) -> str:
    """The salt of the hidden grader in the task's make_hidden.py."""
    return hidden_truth.grader_salt(task_dir / GENERATOR)


def write_case(out: Path, seed: int = DEFAULT_SEED, cases: int = 4) -> list[Case]:
    """The whole task directory: the cases, answer_schema.json and the truth in make_hidden.py are generated;
    task.toml, statement.md and the rest of make_hidden.py are hand-written, copied from the built-in task."""
    out = Path(out)
    shutil.rmtree(out / "cases", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    generator = (DEFAULT_OUT / GENERATOR).read_text()
    if out.resolve() != DEFAULT_OUT.resolve():
        for rel in STATIC:
            shutil.copyfile(DEFAULT_OUT / rel, out / rel)
    made = [generate_case(seed * 1000 + k, f"c{k}") for k in range(1, cases + 1)]
    for case in made:
        write_case_folder(case, out / "cases" / case.id)
    (out / "answer_schema.json").write_text(json.dumps(answer_schema(made), indent=2) + "\n")
    salt = grader_salt(DEFAULT_OUT)
    truth = {
        c.id: {"commit": digest(salt, c.id, c.commit), "kind": digest(salt, c.id, c.fault.kind)} for c in made
    }
    truth_json = json.dumps(truth, indent=2) + "\n"
    (out / GENERATOR).write_text(hidden_truth.with_truth(generator, truth_json, DEFAULT_OUT / GENERATOR))
    return made


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="task seed; case k uses seed*1000+k")
    p.add_argument("--cases", type=int, default=4, help="how many cases the task holds")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="task directory to (re)write")
    p.add_argument("--truth-out", type=Path, help="also write the plain truth here (keep it out of --out)")
    args = p.parse_args(argv)
    if args.truth_out is not None and args.truth_out.resolve().is_relative_to(args.out.resolve()):
        p.error(f"--truth-out {args.truth_out} is inside --out {args.out}: the truth would be task material")
    made = write_case(args.out, args.seed, args.cases)
    if args.truth_out is not None:
        truth = {c.id: {"commit": c.commit, "kind": c.fault.kind} for c in made}
        args.truth_out.write_text(json.dumps(truth, indent=2) + "\n")
    print(f"wrote {args.out}: {', '.join(f'{c.id} ({c.program}, {len(c.commits)} commits)' for c in made)}")


if __name__ == "__main__":
    main()
