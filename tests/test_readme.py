"""The README's five-minute path, as a new user follows it: the worked task folder it writes checks and
evaluates, and the pages it links exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from arts.search.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_readmes_own_task_example_checks_and_evaluates_its_seed(tmp_path, capsys):
    five = README.split("## Five minutes", 1)[1].split("\n## ", 1)[0]
    make = next(b for b in re.findall(r"```bash\n(.*?)```", five, re.S) if "mkdir my-task" in b)
    evaluator = re.search(r"```python\n(# evaluate.py\n.*?)```", five, re.S).group(1)
    subprocess.run(["bash", "-euc", make], cwd=tmp_path, check=True)
    (tmp_path / "my-task" / "evaluate.py").write_text(evaluator)
    assert main(["tasks", "check", str(tmp_path / "my-task")]) == 0, capsys.readouterr().err
    assert "seed evaluated: score = 0.25" in capsys.readouterr().out


def test_every_page_the_readme_links_exists_and_none_points_outside_the_project():
    for page in re.findall(r"\]\((docs/[\w.-]+\.md)\)", README):
        assert (ROOT / page).is_file(), page
    assert "DESIGN.md" not in README
    assert "--report-to" in README and "--report-to" in (ROOT / "docs/cli.md").read_text()


def test_the_demo_writes_its_run_outside_the_checkout():
    demo = (ROOT / "scripts/demo.sh").read_text()
    assert 'RUN="runs/' not in demo and "arts/demo-runs" in demo
