"""The evaluator protocol (`arts.tasks.protocol`): a user's evaluator written as the README shows scores an
honest candidate and refuses a cheating one through `arts eval`; no process a child leaves outlives it; no
built-in's hidden file is in a wheel or an sdist."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from arts.search.cli.main import main
from arts.tasks.base import BUILTIN_DIR, builtin_names, load_task

ROOT = Path(__file__).resolve().parents[1]
README_EVALUATOR = re.search(r"```python\n# evaluate.py\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
TOML = """name = "protocol-test"
statement = "statement.md"
kind = "optimize"
editable = ["solution.py"]
material = ["evaluate.py"]
[metric]
name = "score"
direction = "maximize"
[evaluate]
command = ["python", "evaluate.py"]
timeout_s = 60
"""


def user_task(root: Path, solution: str) -> Path:
    """A task laid out as a new user would, with the README's evaluator."""
    assert README_EVALUATOR, "README.md lost its evaluator example"
    root.mkdir(parents=True)
    (root / "task.toml").write_text(TOML)
    (root / "statement.md").write_text("Return a number from answer().")
    (root / "evaluate.py").write_text(README_EVALUATOR.group(1))
    (root / "solution.py").write_text(solution)
    return root


def arts_eval(root: Path, capsys: pytest.CaptureFixture) -> dict:
    main(["eval", str(root), "--json"])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_the_readme_evaluator_scores_an_honest_candidate(tmp_path: Path, capsys: pytest.CaptureFixture):
    res = arts_eval(
        user_task(tmp_path / "task", "def answer():\n    print('working')\n    return 0.25\n"), capsys
    )
    assert res["valid"] and res["score"] == 0.25, res


@pytest.mark.parametrize(
    "solution",
    [
        "import os\nprint('0.99')\nos._exit(0)\n",  # prints a payload and leaves: nothing returned
        "def answer():\n    return float(open('../../evaluate.py').read().count('e'))\n",  # reads the evaluator
    ],
)
def test_the_readme_evaluator_refuses_a_cheat(solution: str, tmp_path: Path, capsys: pytest.CaptureFixture):
    res = arts_eval(user_task(tmp_path / "task", solution), capsys)
    assert not res["valid"] and res["score"] is None, res


def test_no_process_a_child_left_outlives_it(tmp_path: Path):
    marker = f"arts-leftover-{os.getpid()}"
    daemon = (
        "import os, sys\n"
        "def answer():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)', {marker!r}])\n"
        "    return 1.0\n"
    )
    root = user_task(tmp_path / "task", daemon)
    code = f"from arts.tasks import protocol; print(protocol.run_child({str(root / 'evaluate.py')!r}, 'solution.py', timeout_s=60))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "(b'1.0', '')" in out.stdout, out.stderr[-2000:]
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            alive += [pid] if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() else []
        except OSError:
            pass
    assert not alive, f"left running: {alive}"


def test_every_builtin_evaluator_uses_the_protocol():
    for name in builtin_names():
        task = load_task(BUILTIN_DIR / name)
        if task.config.kind == "optimize":
            assert "from arts.tasks import" in (task.root / "evaluate.py").read_text(), name


def _clean_copy(dest: Path) -> Path:
    """The source tree without build leftovers: a stale build/ folder would put its old files in a wheel."""
    leftovers = (".venv", ".git", "runs", "build", "*.egg-info", "__pycache__", ".*_cache")
    return Path(shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*leftovers), symlinks=True))


@pytest.mark.slow
def test_no_hidden_file_is_in_the_wheel(tmp_path: Path):
    src = _clean_copy(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(src)], check=True, timeout=600)  # fmt: skip
    (wheel,) = tmp_path.glob("arts-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert (
        "arts/tasks/protocol.py" in names and "arts/tasks/builtin/friedman-regression/data/train.npz" in names
    )
    for name in builtin_names():
        assert f"arts/tasks/builtin/{name}/make_hidden.py" in names, name
        for hidden in load_task(BUILTIN_DIR / name).hidden_files():
            assert f"arts/tasks/builtin/{name}/{hidden}" not in names
        assert not [n for n in names if n.startswith(f"arts/tasks/builtin/{name}/grader")], name


@pytest.mark.slow
def test_no_hidden_file_is_in_the_sdist(tmp_path: Path):
    build = f"from setuptools import build_meta; build_meta.build_sdist({str(tmp_path)!r})"
    src = _clean_copy(tmp_path / "src")
    subprocess.run([sys.executable, "-c", build], cwd=src, check=True, capture_output=True, timeout=600)
    (sdist,) = tmp_path.glob("arts-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert "tasks/builtin/friedman-regression/make_hidden.py" in names
    for name in builtin_names():
        for hidden in load_task(BUILTIN_DIR / name).hidden_files():
            assert f"tasks/builtin/{name}/{hidden}" not in names
        assert not [n for n in names if n.startswith(f"tasks/builtin/{name}/grader")], name


def test_hidden_files_are_built_outside_the_package_and_match_their_digests():
    for name in builtin_names():
        task = load_task(BUILTIN_DIR / name)
        assert task.config.hidden and not (task.root / "grader").exists(), name
        assert not task.hidden_root.is_relative_to(Path(sys.prefix).resolve()), name
        assert task.hidden_files() and all((task.hidden_root / p).is_file() for p in task.hidden_files())


def test_a_confined_fold_may_read_its_own_proc_entry_and_no_other(
    tmp_path: Path, capsys: pytest.CaptureFixture
):
    """scikit-learn's thread-pool control reads /proc/self/maps: a k-nearest-neighbours candidate was
    invalid ("Permission denied: '/proc/self/maps'") though nothing was wrong with it. Its own entry is
    readable now; the sandbox's init (pid 1), which is not the candidate, stays out of reach."""
    model = (BUILTIN_DIR / "friedman-regression" / "model.py").read_text()
    model = model.replace(
        "from sklearn.linear_model import LinearRegression",
        "from sklearn.neighbors import KNeighborsRegressor",
    )
    model = model.replace("LinearRegression()", "KNeighborsRegressor()")
    (tmp_path / "model.py").write_text(model)
    assert main(["eval", "friedman-regression", "--files", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and out["score"] > 0, out
    (tmp_path / "model.py").write_text(
        model.replace("def build", "open('/proc/1/maps').read()\n\n\ndef build", 1)
    )
    main(["eval", "friedman-regression", "--files", str(tmp_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert not out["valid"] and "Permission denied: '/proc/1/maps'" in out["message"], out
