"""The built-in tasks' hidden files, built at first use into a private cache instead of being shipped.

A built-in task directory ships `make_hidden.py` in place of its `grader/` folder: a wheel or an sdist is
installed under the interpreter's prefix, which the sandbox binds read-only, so a hidden file shipped there
could be read by any candidate. `make_hidden.py` defines `build(dest)`, which writes the task's hidden
entries (test splits, truth, the grader) under `dest`, and `DIGESTS`, the sha256 of every file it writes:
a build that differs (another Python's documentation, another scikit-learn's dataset) is refused, so the
test split, and every score on it, is the one the task's references were measured on.

The cache is `$ARTS_CACHE/hidden` (default `$XDG_CACHE_HOME/arts`, else `~/.cache/arts`), private to the
user (0700), and never under the interpreter's prefix: nothing the sandbox binds holds it. One folder per
generator version (its source's digest); it is built in a temporary folder and renamed into place, so
concurrent first uses agree. Users' own tasks keep their hidden files in their directory; only built-in
tasks run a generator (it is code of this package, not the user's).

What it does not do: hide the generators themselves, which lie in the installed package like all of arts;
candidate code never reads that package (`tasks.confine` keeps it out of reach), and the evaluator that does
is the task's own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

GENERATOR = "make_hidden.py"
MANIFEST = ".digests.json"
"""In each built folder: the sha256 of every file, checked on each use, so a file deleted or altered in the
cache is built again rather than graded with."""


class HiddenBuildError(RuntimeError):
    """The hidden files could not be built; the message says why and what to do."""


def cache_dir() -> Path:
    """Where built hidden files live: `$ARTS_CACHE/hidden`, else the user's cache folder."""
    base = os.environ.get("ARTS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "arts"
    )
    return Path(base).resolve() / "hidden"


def _check_outside_interpreter(path: Path) -> None:
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if prefix and path.is_relative_to(os.path.realpath(prefix)):
            raise HiddenBuildError(
                f"the hidden-file cache {path} lies under the interpreter's prefix {prefix}, which the sandbox "
                "binds; set ARTS_CACHE to a folder outside it"
            )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(generator: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"arts_hidden_{name.replace('-', '_')}", generator)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _intact(out: Path) -> bool:
    """Whether `out` holds a finished build whose files all match its manifest."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
        return all(_digest(out / rel) == digest for rel, digest in manifest.items())
    except (OSError, ValueError, AttributeError):
        return False


def hidden_root(task_root: Path, name: str) -> Path:
    """The folder that holds `name`'s hidden entries: built from `task_root/make_hidden.py` on first use."""
    generator = task_root / GENERATOR
    out = cache_dir() / f"{name}-{_digest(generator)[:16]}"
    if _intact(out):
        return out
    shutil.rmtree(out, ignore_errors=True)
    _check_outside_interpreter(out)
    module = _load(generator, name)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(out.parent, 0o700)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out.parent))
    try:
        module.build(tmp)
        built = {str(p.relative_to(tmp)): _digest(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        if built != module.DIGESTS:
            wrong = sorted(
                k for k in built.keys() | module.DIGESTS.keys() if built.get(k) != module.DIGESTS.get(k)
            )
            raise HiddenBuildError(
                f"task {name!r}: the hidden files built here differ from the ones its scores were measured on "
                f"({', '.join(wrong)}); {getattr(module, 'NEEDS', 'reinstall arts')}"
            )
        (tmp / MANIFEST).write_text(json.dumps(built))
        try:
            os.rename(tmp, out)
        except OSError:  # another process built it first: its copy is the same
            if not out.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
