"""Attacks on the disk through the working copy: inodes (many empty files), sparse files whose blocks
are not allocated yet, hard links, deep folders. Each is counted (apparent size, one inode per entry),
the run is invalid, and what it wrote is gone from the node folder."""

from attack_kit import attack, make_task

from arts.tasks.process import FILES_LIMIT


def _flood(tmp_path, code: str, disk_mb: int = 1024):
    task = make_task(tmp_path / "task", disk_mb=disk_mb, timeout=30)
    workdir = tmp_path / "work"
    res = attack(task, code, workdir)
    left = sorted(p.name for p in workdir.iterdir())
    return res, left


def test_two_hundred_thousand_empty_files_are_refused_and_removed(tmp_path):
    code = "import os\nos.mkdir('f')\nfor i in range(200_000):\n    open(f'f/{i}', 'w').close()\n"
    res, left = _flood(tmp_path, code)
    assert not res.valid and f"more than {FILES_LIMIT} files" in res.reason, res.reason
    assert "f" not in left


def test_inode_flood_written_faster_than_a_check_is_refused(tmp_path):
    code = f"import os\nos.mkdir('f')\nfor i in range({FILES_LIMIT + 500}):\n    os.mknod(f'f/{{i}}')\n"
    res, left = _flood(tmp_path, code)
    assert not res.valid and "files" in res.reason, res.reason
    assert "f" not in left


def test_two_gibibytes_of_sparse_files_are_counted_and_removed(tmp_path):
    code = "import os\nfor i in range(9):\n    os.truncate(open(f's{i}', 'w').name, 255 << 20)\n"
    res, left = _flood(tmp_path, code)
    assert not res.valid and res.reason.startswith("disk limit exceeded"), res.reason
    assert not [n for n in left if n[0] == "s" and n[1:].isdigit()], left


def test_sparse_files_in_the_scratch_folder_are_counted(tmp_path):
    code = "import os\nfor i in range(5):\n    os.truncate(open(f'.tmp/s{i}', 'w').name, 250 << 20)\n"
    res, _ = _flood(tmp_path, code, disk_mb=512)
    assert not res.valid and res.reason.startswith("disk limit exceeded"), res.reason
    assert not list((tmp_path / "work").glob(".tmp/s*"))


def test_hard_link_flood_counts_each_entry(tmp_path):
    code = f"import os\nopen('a', 'w').close()\nos.mkdir('l')\nfor i in range({FILES_LIMIT + 10}):\n    os.link('a', f'l/{{i}}')\n"
    res, left = _flood(tmp_path, code)
    assert not res.valid and "files" in res.reason and "l" not in left, res.reason


def test_deep_folders_count_as_entries(tmp_path):
    code = f"import os\nfor i in range({FILES_LIMIT // 50 + 10}):\n    os.makedirs(f'd/{{i}}/a/b/c/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5/6/7/8/9/A/B/C/D/E/F/G/H/I/J/K/L/M/N')\n"
    res, left = _flood(tmp_path, code)
    assert not res.valid and "files" in res.reason and "d" not in left, res.reason
