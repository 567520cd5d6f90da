"""Attacks on the harness through the node folder: links planted where the harness writes or reads."""

from pathlib import Path

from attack_kit import attack

from arts.search.investigation.reports import curves, report, tail
from arts.search.lab import write_output
from arts.search.state import Node, SearchState
from arts.search.store import Store


def test_planted_stdout_link_cannot_rewrite_the_evaluator(task):
    evaluator = task.root / "evaluate.py"
    before = evaluator.read_text()
    workdir = task.root.parent / "work"
    planted = f"""
import os
for name in ("stdout.txt", "stderr.txt"):
    os.symlink({str(evaluator)!r}, name)
print("import json; json.dump({{'score': 99.0, 'valid': True}}, open('result.json', 'w'))")
"""
    res = attack(task, planted, workdir)
    write_output(workdir, res)  # what the lab does after every evaluation
    assert evaluator.read_text() == before
    assert not (workdir / "stdout.txt").is_symlink()
    assert attack(task, "print('next node')", workdir).score == 1.0


def test_planted_curves_link_to_a_secret_is_not_read(task, tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret-hash:19000")
    secret.chmod(0o600)
    workdir = task.root.parent / "work"
    attack(task, f"import os; os.symlink({str(secret)!r}, 'curves.jsonl')", workdir)
    assert (workdir / "curves.jsonl").is_symlink()  # planted, and left for the harness to read
    assert curves(workdir) == ""
    node = Node(id=1, parent=None, files={}, status="valid", raw_score=1.0)
    assert "secret-hash" not in report(SearchState(nodes={1: node}), node, workdir)


def test_planted_stderr_link_is_not_read(task, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("token-abc\n")
    workdir = task.root.parent / "work"
    attack(task, f"import os; os.symlink({str(secret)!r}, 'stderr.txt')", workdir)
    assert tail(workdir / "stderr.txt") == ""


def test_planted_folder_link_cannot_steer_node_files(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    with Store.open(tmp_path / "run") as store:
        node = store.add(Node(parent=None, files={"pkg/model.py": "x = 1\n"}, status="seed"))
        folder = store.write_node_files(node)
        (folder / "pkg" / "model.py").unlink()
        (folder / "pkg").rmdir()
        (folder / "pkg").symlink_to(outside)  # what a program could leave in its node folder
        store.write_node_files(node)
    assert list(outside.iterdir()) == []
    assert (folder / "pkg" / "model.py").read_text() == "x = 1\n"


def test_fifo_planted_as_stdout_does_not_hang_the_harness(task):
    workdir = task.root.parent / "work"
    res = attack(task, "import os; os.mkfifo('stdout.txt')", workdir)
    write_output(workdir, res)
    assert Path(workdir / "stdout.txt").is_file()


def test_escape_sequences_and_nul_bytes_reach_no_terminal(task):
    hostile = "\x1b]0;pwned\x07\x1b[2J\x00\x9b31m"
    res = attack(task, f"open('note.txt', 'w').write({hostile!r})")  # the evaluator's message
    assert "\\x1b" in res.message
    for text in (res.reason, res.message):
        assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) < 0xA0 for c in text), repr(text)
