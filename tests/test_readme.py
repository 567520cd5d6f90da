"""The README's five-minute path, as a new user follows it: the worked task folder it writes checks and
evaluates, and the pages it links exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from arts.search.cli.main import main
from arts.search.store import Store

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def readme_task(root: Path) -> Path:
    """The task folder the README's five-minute path writes, written under `root`."""
    five = README.split("## Five minutes", 1)[1].split("\n## ", 1)[0]
    make = next(b for b in re.findall(r"```bash\n(.*?)```", five, re.S) if "mkdir my-task" in b)
    evaluator = re.search(r"```python\n(# evaluate.py\n.*?)```", five, re.S).group(1)
    subprocess.run(["bash", "-euc", make], cwd=root, check=True)
    (root / "my-task" / "evaluate.py").write_text(evaluator)
    return root / "my-task"


def test_the_readmes_own_task_example_checks_and_evaluates_its_seed(tmp_path, capsys):
    readme_task(tmp_path)
    assert main(["tasks", "check", str(tmp_path / "my-task")]) == 0, capsys.readouterr().err
    assert "seed evaluated: score = 0.25" in capsys.readouterr().out


def test_the_readmes_task_offers_moves_and_its_search_makes_valid_nodes(tmp_path, rules):
    """Its program is one `return 0.25`: the number it returns is a target the small profile moves (before,
    the menus were empty and the embedded model's free hypotheses were all invalid)."""
    task = readme_task(tmp_path)
    assert main(["search", str(task), "--evals", "4", "--run-dir", str(tmp_path / "run"), "-q"]) == 0
    made = [
        n for n in Store.open_readonly(tmp_path / "run").load_state().nodes.values() if n.parent is not None
    ]
    assert made and all(n.status == "valid" for n in made), [n.reason for n in made]
    assert all(re.match(r"(increase|decrease) answer", n.hypothesis) for n in made)


def test_every_page_the_readme_links_exists_and_none_points_outside_the_project():
    for page in re.findall(r"\]\((docs/[\w.-]+\.md)\)", README):
        assert (ROOT / page).is_file(), page
    assert "DESIGN.md" not in README
    assert "--report-to" in README and "--report-to" in (ROOT / "docs/cli.md").read_text()


def test_the_demo_writes_its_run_outside_the_checkout():
    demo = (ROOT / "scripts/demo.sh").read_text()
    assert 'RUN="runs/' not in demo and "arts/demo-runs" in demo
