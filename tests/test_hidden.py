"""Built-in tasks' hidden files (`arts.tasks.hidden`): built at first use into a private cache, refused when
a build differs from the files the task's scores were measured on, never under the interpreter's prefix."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from arts.tasks.hidden import HiddenBuildError, hidden_root

GENERATOR = """
from pathlib import Path
TEXT = {text!r}
NEEDS = "install the version the task was measured with"
DIGESTS = {{"grader/truth.txt": {digest!r}}}
def build(dest: Path) -> None:
    (dest / "grader").mkdir()
    (dest / "grader" / "truth.txt").write_text(TEXT)
"""


def task_root(tmp_path: Path, text: str, digest_of: str) -> Path:
    root = tmp_path / "task"
    root.mkdir()
    digest = hashlib.sha256(digest_of.encode()).hexdigest()
    (root / "make_hidden.py").write_text(GENERATOR.format(text=text, digest=digest))
    return root


def test_hidden_files_are_built_once_into_a_private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTS_CACHE", str(tmp_path / "cache"))
    root = task_root(tmp_path, "7", "7")
    out = hidden_root(root, "t")
    assert (out / "grader" / "truth.txt").read_text() == "7" and out.is_relative_to(tmp_path / "cache")
    assert (out.parent.stat().st_mode & 0o777) == 0o700 and (out.stat().st_mode & 0o077) == 0
    (out / "grader" / "mark").write_text("")
    assert hidden_root(root, "t") == out and (out / "grader" / "mark").exists()  # built once
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary folder left


def test_a_build_that_differs_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(HiddenBuildError, match=r"differ .*grader/truth.txt.*install the version"):
        hidden_root(task_root(tmp_path, "8", "7"), "t")
    assert not list((tmp_path / "cache" / "hidden").iterdir())


def test_a_cache_under_the_interpreter_prefix_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTS_CACHE", str(Path(sys.prefix) / "arts-cache-never-made"))
    with pytest.raises(HiddenBuildError, match="set ARTS_CACHE"):
        hidden_root(task_root(tmp_path, "7", "7"), "t")
    assert not (Path(sys.prefix) / "arts-cache-never-made").exists()


def test_a_cached_file_deleted_or_altered_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTS_CACHE", str(tmp_path / "cache"))
    root = task_root(tmp_path, "7", "7")
    out = hidden_root(root, "t")
    (out / "grader" / "truth.txt").write_text("0")  # altered: a grader would read the wrong truth
    assert (hidden_root(root, "t") / "grader" / "truth.txt").read_text() == "7"
    (out / "grader" / "truth.txt").unlink()
    assert (hidden_root(root, "t") / "grader" / "truth.txt").read_text() == "7"
