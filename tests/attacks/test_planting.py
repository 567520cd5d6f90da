"""Attacks on the next evaluation through files a candidate leaves in its working copy or its scratch
space: startup hooks of the interpreter (sitecustomize, usercustomize, .pth files in the user site that
HOME points at), modules that shadow the evaluator's imports, a preloaded library. The next run's evaluator
is the task's own: it scores the honest solution 1.0."""

import sys

import pytest
from attack_kit import attack

HOOK = "import json\njson.dump({'score': 2.9, 'valid': True}, open('result.json', 'w'))\n"
USER_SITE = f".local/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
PLANTS = {
    "sitecustomize": {"sitecustomize.py": HOOK},
    "usercustomize": {f"{USER_SITE}/usercustomize.py": HOOK},
    "user-site-pth": {
        f"{USER_SITE}/evil.pth": "import os; exec(open('hook.txt').read())\n",
        "hook.txt": HOOK,
    },
    "tmpdir-pth": {".tmp/evil.pth": "import os\n", ".tmp/subprocess.py": HOOK},
    "shadowed-stdlib": {"subprocess.py": HOOK, "json/__init__.py": HOOK},
    "preload-library": {"evil.so": "not a library", ".pythonrc.py": HOOK},
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_planted_startup_hook_does_not_reach_the_next_run(task, kind):
    files = PLANTS[kind]
    plant = "import os\n" + "".join(
        f"os.makedirs(os.path.dirname({rel!r}) or '.', exist_ok=True)\nopen({rel!r}, 'w').write({text!r})\n"
        for rel, text in files.items()
    )
    workdir = task.root.parent / "work"
    attack(task, plant, workdir)
    res = attack(task, "print('honest')", workdir)
    assert res.valid and res.score == 1.0, res
    assert not [rel for rel in files if rel.endswith((".py", ".pth", ".so")) and (workdir / rel).exists()]


def test_environment_hooks_set_by_the_candidate_do_not_reach_the_evaluator(task):
    env = """
import os, subprocess, sys
os.environ.update(PYTHONSTARTUP="hook.py", LD_PRELOAD="/nonexistent.so", PYTHONPATH=".")
open("hook.py", "w").write("raise SystemExit('hooked')")
"""
    workdir = task.root.parent / "work"
    attack(task, env, workdir)
    assert attack(task, "print('honest')", workdir).score == 1.0
