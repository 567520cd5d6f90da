"""The world of scripts/make_bisect.py: programs, faults and harmless edits, and the means to check them.

A program (scripts/bisect_shop.py, bisect_grades.py, bisect_text.py) is a few pure-Python modules and a
test module. This module runs its tests in-process from sources held in memory (no file is written, nothing is
imported twice: each run loads fresh modules under a private finder and removes them after), renders the
failing test's output with a traceback in one fixed format (Python's own adds carets in some versions, which
would make the material depend on the interpreter), and makes the harmless edits of a history: a comment, a
docstring, a renamed local, a rewrite from the program's list.

What it does not do: sandbox the programs. They are this repository's own templates, not candidates' code.
"""

from __future__ import annotations

import difflib
import importlib.abc
import importlib.util
import linecache
import re
import sys
import traceback
from dataclasses import dataclass, field

KINDS = ("off_by_one", "wrong_constant", "swapped_arguments", "wrong_operator", "removed_guard")
"""The fault kinds, in the answer schema's order."""
COMMENTS = (
    "keep this in step with the tests",
    "inputs are checked by the caller",
    "order matters here",
    "cheap enough for small inputs",
    "TODO: cache this if it shows up in profiles",
    "the edge case is handled above",
    "rounding happens at the end, not here",
)


@dataclass(frozen=True)
class Fault:
    """The breaking change: `old` (once in `file`) becomes `new`; of `kind`; only `test` fails after it."""

    file: str
    old: str
    new: str
    kind: str
    test: str
    message: str
    """What an honest commit message would say."""


@dataclass(frozen=True)
class Edit:
    """A harmless change: `old` (once in `file`; empty: append `new`) becomes `new`."""

    file: str
    old: str
    new: str
    message: str


@dataclass(frozen=True)
class Program:
    name: str
    files: dict[str, str]
    """File -> source; the test module among them."""
    test_file: str
    faults: list[Fault]
    rewrites: list[Edit]
    renames: list[tuple[str, str, str, str]]
    """(file, function, local, new name)."""
    docs: dict[tuple[str, str], str] = field(default_factory=dict)
    """(file, function) -> a one-line docstring."""


@dataclass(frozen=True)
class Failure:
    frames: list[tuple[str, int, str, str]]
    """(file, line, function, source line), outermost first, the program's files only."""
    error: str
    """`Type: message` of the exception."""


class _Sources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `name` from `files[name + ".py"]`, compiled under that file name."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if f"{name}.py" in self.files else None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        file = f"{module.__name__}.py"
        module.__file__ = file
        exec(compile(self.files[file], file, "exec"), module.__dict__)


def run_tests(files: dict[str, str], test_file: str) -> dict[str, Failure | None]:
    """Every `test_*` function of `test_file`, in source order: name -> None (passed) or its failure."""
    names = [f.removesuffix(".py") for f in files]
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    finder = _Sources(files)
    sys.meta_path.insert(0, finder)
    for f, text in files.items():
        linecache.cache[f] = (len(text), None, text.splitlines(True), f)
    try:
        module = importlib.import_module(test_file.removesuffix(".py"))
        tests = sorted(
            (fn.__code__.co_firstlineno, name, fn)
            for name, fn in vars(module).items()
            if name.startswith("test_")
        )
        results: dict[str, Failure | None] = {}
        for _, name, fn in tests:
            try:
                fn()
                results[name] = None
            except Exception as e:  # a test's failure is data here
                frames = [
                    (s.filename, s.lineno, s.name, s.line)
                    for s in traceback.extract_tb(e.__traceback__)
                    if s.filename in files
                ]
                results[name] = Failure(frames, f"{type(e).__name__}: {e}")
        return results
    finally:
        sys.meta_path.remove(finder)
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)
        for f in files:
            linecache.cache.pop(f, None)


def render(results: dict[str, Failure | None], test_file: str) -> str:
    """The test run as test_output.txt shows it: one line per test, then each failure's traceback."""
    lines = [f"$ python -m pytest {test_file}", ""]
    lines += [f"{test_file}::{name} {'PASSED' if f is None else 'FAILED'}" for name, f in results.items()]
    for name, failure in results.items():
        if failure is None:
            continue
        lines += ["", f"____ {name} ____", "Traceback (most recent call last):"]
        for file, line, function, source in failure.frames:
            lines += [f'  File "{file}", line {line}, in {function}', f"    {source}"]
        lines.append(failure.error)
    failed = sum(f is not None for f in results.values())
    lines += ["", f"{failed} failed, {len(results) - failed} passed"]
    return "\n".join(lines) + "\n"


def shown_file(failure: Failure, test_file: str) -> str:
    """The program file a failure points at: the innermost frame outside the test module, else the module of
    the `module.function(` its message names (a failed assertion's only frame is the test's own)."""
    inner = [f for f, *_ in failure.frames if f != test_file]
    if inner:
        return inner[-1]
    named = re.search(r"(\w+)\.\w+\(", failure.error)
    return f"{named.group(1)}.py" if named else test_file


def diff(file: str, before: str, after: str) -> str:
    """The unified diff of one file, as `git diff` would show it (a/ and b/ prefixes, 3 lines of context)."""
    return "".join(
        difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{file}", f"b/{file}")
    )


def function_span(text: str, fn: str) -> tuple[int, int] | None:
    """[first, end) line indices of the top-level `def fn(`, or None."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"def {fn}(")), None)
    if start is None:
        return None
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines)
    )
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end


def functions(text: str) -> list[str]:
    return re.findall(r"^def (\w+)\(", text, flags=re.M)


def enclosing(text: str, old: str) -> str | None:
    """The top-level function whose lines hold the first occurrence of `old` (None: module level)."""
    at = text.count("\n", 0, text.index(old))
    for fn in functions(text):
        first, end = function_span(text, fn)
        if first <= at < end:
            return fn
    return None


def replace_once(text: str, old: str, new: str) -> str | None:
    """`text` with its one `old` replaced (empty `old`: `new` appended), or None where `old` is not there once."""
    if not old:
        defined = re.search(r"^def (\w+)\(", new, flags=re.M)
        return None if defined and defined.group(1) in functions(text) else text + new
    return text.replace(old, new) if text.count(old) == 1 else None


def rename(text: str, fn: str, old: str, new: str) -> str | None:
    """`old` renamed `new` inside function `fn`, or None where it does not occur or `new` already does."""
    span = function_span(text, fn)
    if span is None:
        return None
    lines = text.splitlines(True)
    body = "".join(lines[span[0] : span[1]])
    if not re.search(rf"\b{old}\b", body) or re.search(rf"\b{new}\b", body):
        return None
    return "".join([*lines[: span[0]], re.sub(rf"\b{old}\b", new, body), *lines[span[1] :]])


def comment(text: str, fn: str, pick: int, words: str) -> str | None:
    """A `# words` line above body line number `pick` (modulo the body's statements) of `fn`."""
    span = function_span(text, fn)
    if span is None:
        return None
    lines = text.splitlines(True)
    body = [
        i for i in range(span[0] + 1, span[1]) if re.match(r"\s+(?!else|elif|except|#|\"\"\")\S", lines[i])
    ]
    if not body:
        return None
    at = body[pick % len(body)]
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return "".join([*lines[:at], f"{indent}# {words}\n", *lines[at:]])


def docstring(text: str, fn: str, words: str) -> str | None:
    """A one-line docstring for `fn`, or None where it has one."""
    span = function_span(text, fn)
    if span is None:
        return None
    lines = text.splitlines(True)
    if lines[span[0] + 1].lstrip().startswith('"""'):
        return None
    return "".join([*lines[: span[0] + 1], f'    """{words}"""\n', *lines[span[0] + 1 :]])
