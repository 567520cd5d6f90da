"""Hostile candidate programs against the sandbox. Each test in this folder is one attack with its expected
verdict: the attack fails (no escape, no false score) and the evaluation still ends with a clear result."""

from pathlib import Path

import pytest
from attack_kit import make_task

from arts.tasks.base import Task
from arts.tasks.isolation import probe


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path / "task")


@pytest.fixture
def bwrap() -> None:
    """Skip unless runs are isolated by bubblewrap here (the attacks below need its namespaces)."""
    if not probe().bwrap:
        pytest.skip(f"needs bubblewrap with user namespaces; here: {probe().level} ({probe().note})")


@pytest.fixture
def rooted() -> None:
    """Skip unless runs get a uid and a memory cgroup of their own (root)."""
    if not (probe().uid_drop and probe().memory_tree):
        pytest.skip(f"needs root with a memory cgroup; here: {probe().level} ({probe().note})")
