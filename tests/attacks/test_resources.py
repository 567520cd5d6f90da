"""Attacks on the machine's resources: memory spread over many processes, disk filled past the cap."""

from attack_kit import attack, make_task

SPREAD = """
import subprocess, sys
hog = "b = bytearray(200 << 20); import time; time.sleep(3)"
procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(5)]
held = sum(p.wait() == 0 for p in procs)
open("note.txt", "w").write(f"held {held}")
"""


def test_memory_limit_covers_the_whole_process_tree(tmp_path, rooted):
    task = make_task(tmp_path / "task", memory_mb=512, timeout=20)
    res = attack(task, SPREAD)
    assert not (res.valid and res.message == "held 5"), res  # five times 200 MiB under a 512 MiB cap
    if not res.valid:
        assert "memory limit" in res.reason or "status" in res.reason, res.reason


FILL = """
import os
written, errors = 0, []
for d in ("/tmp",):
    for i in range(12):
        try:
            with open(os.path.join(d, f"fill{i}"), "wb") as f:
                for _ in range(64):
                    f.write(b"x" * (1 << 20))
            written += 64
        except OSError as e:
            errors.append(type(e).__name__)
            break
    for i in range(12):
        try:
            os.unlink(os.path.join(d, f"fill{i}"))
        except OSError:
            pass
open("note.txt", "w").write(f"{written} {errors}")
"""


def test_private_tmp_is_capped(tmp_path, bwrap):
    task = make_task(tmp_path / "task", memory_mb=256, timeout=20)
    res = attack(task, FILL)  # 768 MiB into a /tmp of 256 MiB (a tmpfs: the memory cgroup counts it too)
    assert not res.valid or int(res.message.split()[0]) <= 256, (res.reason, res.message)


def test_one_huge_file_is_refused(task):
    big = "open('big', 'wb').write(b'x' * (300 << 20))"
    res = attack(task, big)
    assert not res.valid  # RLIMIT_FSIZE: 256 MiB per file


def test_disk_limit_stops_many_files_and_deletes_them(tmp_path):
    task = make_task(tmp_path / "task", disk_mb=64, timeout=20)
    fill = """
import time
for i in range(40):  # 40 files of 16 MiB, each under the per-file cap: 640 MiB against a 64 MiB limit
    with open(f"fill{i}", "wb") as f:
        f.write(b"x" * (16 << 20))
    time.sleep(0.02)
"""
    workdir = tmp_path / "work"
    res = attack(task, fill, workdir)
    assert not res.valid and res.reason.startswith("disk limit exceeded"), res.reason
    assert not list(workdir.glob("fill*"))
