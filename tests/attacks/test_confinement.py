"""Attacks on the host through what the sandbox lets a candidate see: other tasks' hidden files, the source
tree, scratch space that outlives the run, other processes. The candidate sees a minimal filesystem."""

import socket
import uuid
from pathlib import Path

from attack_kit import attack

import arts.tasks
from arts.tasks.base import BUILTIN_DIR, load_task

PROBE = """
import os
found = []
for path in {paths!r}:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        found.append(path)
    except OSError:
        pass
open("note.txt", "w").write(" ".join(found) or "nothing")
"""


def test_other_tasks_hidden_files_are_out_of_reach(task, bwrap):
    rca, friedman = (
        load_task(BUILTIN_DIR / name).hidden_root for name in ("incident-rca", "friedman-regression")
    )
    paths = [str(rca / "grader/truth.json"), str(friedman / "grader"), str(friedman.parent)]
    assert attack(task, PROBE.format(paths=paths)).message == "nothing"


def test_source_tree_and_git_objects_are_out_of_reach(task, bwrap):
    repo = Path(arts.tasks.__file__).resolve().parents[1]
    paths = [str(repo / ".git"), str(repo / "tasks"), str(repo / "search"), "/home", "/etc/passwd", "/var"]
    assert attack(task, PROBE.format(paths=paths)).message == "nothing"


def test_scratch_space_does_not_outlive_the_run(task, bwrap):
    name = f"arts-attack-{uuid.uuid4().hex}"
    planted = f"""
import os
made = []
for d in ("/tmp", "/var/tmp", "/run/lock", "/dev/shm"):
    try:
        open(os.path.join(d, {name!r}), "w").write("left behind")
        made.append(d)
    except OSError:
        pass
open("note.txt", "w").write(" ".join(made))
"""
    attack(task, planted)
    assert not [d for d in ("/tmp", "/var/tmp", "/run/lock", "/dev/shm") if Path(d, name).exists()]


def test_host_processes_are_invisible(task, bwrap):
    spy = """
import os
lines = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        lines.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
    except OSError:
        pass
open("note.txt", "w").write(str(len(lines)) + "|" + "|".join(lines))
"""
    count, _, cmdlines = attack(task, spy).message.partition("|")
    # bubblewrap's init, the launcher running the evaluator, the candidate: nothing of the host
    assert "-m pytest" not in cmdlines and int(count) <= 3, cmdlines


def test_network_is_unreachable(task, bwrap):
    dial = """
import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    open("note.txt", "w").write("connected")
except OSError as e:
    open("note.txt", "w").write(type(e).__name__)
"""
    assert attack(task, dial).message != "connected"


def test_loopback_is_up_and_private(task, bwrap):
    server = socket.create_server(("127.0.0.1", 0))
    name = f"arts-attack-{uuid.uuid4().hex}"
    host_abstract = socket.socket(socket.AF_UNIX)
    host_abstract.bind("\0" + name)
    host_abstract.listen()
    probe = f"""
import socket
notes = []
own = socket.create_server(("127.0.0.1", 0))
socket.create_connection(own.getsockname(), timeout=1).close()
notes.append("self")
for target in [("127.0.0.1", {server.getsockname()[1]})]:
    try:
        socket.create_connection(target, timeout=1)
        notes.append("host")
    except OSError as e:
        notes.append(type(e).__name__)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect("\\0{name}")
    notes.append("host-abstract")
except OSError as e:
    notes.append(type(e).__name__)
open("note.txt", "w").write(" ".join(notes))
"""
    try:
        res = attack(task, probe)
    finally:
        server.close()
        host_abstract.close()
    notes = res.message.split()
    assert notes[0] == "self" and "host" not in notes and "host-abstract" not in notes, res.message
