"""The working copy of one run: what is written there before a command runs, and what must not survive.

A working copy is reused from run to run (a node's directory, an investigator's scratch copy), and the
previous program had write access to it. So every run starts by sweeping what that program could have
planted: the old result.json, .tmp/'s contents, __pycache__/ and stray code (*.py, *.so, *.pth neither
editable nor material: they could shadow the evaluator's imports). Then the editable files are written,
all material is copied in again (a run cannot rewrite the next run's evaluator) and, for the test split
only, the hidden files, owned by the run's uid so that the launcher (`tasks.launch`) can delete them
before the candidate starts; `remove_hidden` takes out what is left after the run. Root never follows a planted
symlink: files are unlinked and created with O_EXCL|O_NOFOLLOW. As root, the copy is handed to the run's
uid, with the material root-owned and read-only in sticky directories.

Not done here: choosing the uid or any limit (`tasks.isolation`), running anything (`tasks.process`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from arts.tasks.base import Task

CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pth", ".so")
"""Files that could shadow an import of the evaluator; swept unless editable or material."""


def remove(p: Path) -> None:
    """Remove a file, link or directory tree at p, never following a link; nothing if p is absent."""
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        p.unlink()
    elif p.exists():
        shutil.rmtree(p)


def _open_fresh(workdir: Path, rel: str, mode: int) -> int:
    """An fd on a new regular file at workdir/rel; whatever the program left on the way is removed first."""
    parent = workdir
    for part in Path(rel).parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            parent.unlink()
        parent.mkdir(exist_ok=True)
    remove(workdir / rel)
    return os.open(workdir / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)


def write_file(workdir: Path, rel: str, text: str) -> None:
    """Write `text` as a new regular file at workdir/rel, in a folder a program could have touched: what it
    left there (a link to the task's evaluator, a FIFO) is removed first, and no link on the way is followed."""
    with open(_open_fresh(workdir, rel, 0o644), "w", encoding="utf-8", errors="replace") as f:
        f.write(text)


def read_text(path: Path, limit: int = 1 << 20) -> str:
    """The last `limit` bytes of the regular file at `path`, decoded leniently; "" when it is absent, a link
    (never followed: a program may plant curves.jsonl -> /etc/shadow), a FIFO or anything but a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        f.seek(max(st.st_size - limit, 0))
        return f.read(limit).decode("utf-8", "replace")


def _copy_in(src: Path, workdir: Path, rel: str, trust_root_owned: bool) -> None:
    """Copy a task file in, read-only. As root an identical root-owned copy stays: the uid cannot alter it."""
    st = src.stat()
    mode = 0o555 if st.st_mode & 0o111 else 0o444
    with contextlib.suppress(OSError):
        old = os.lstat(workdir / rel)
        now = (old.st_size, old.st_mtime_ns, old.st_mode, old.st_uid, old.st_nlink)
        if trust_root_owned and now == (st.st_size, st.st_mtime_ns, stat.S_IFREG | mode, 0, 1):
            return
    with open(_open_fresh(workdir, rel, mode), "wb") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
        os.fchmod(out.fileno(), mode)
        os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))


def _sweep(workdir: Path, keep: set[str]) -> None:
    """Remove what must not survive into a run: the old result, temp files, bytecode and stray code."""
    remove(workdir / "result.json")
    tmp = workdir / ".tmp"
    if tmp.is_symlink() or not tmp.is_dir():
        remove(tmp)
        tmp.mkdir()
    for child in tmp.iterdir():
        remove(child)
    for dirpath, dirnames, filenames in os.walk(workdir):
        for d in [d for d in dirnames if d == "__pycache__"]:
            remove(Path(dirpath, d))
            dirnames.remove(d)
        for f in filenames:
            if f.endswith(CODE_SUFFIXES) and os.path.relpath(Path(dirpath, f), workdir) not in keep:
                os.unlink(Path(dirpath, f))


def _hand_over(workdir: Path, uid: int, fixed: set[str]) -> None:
    """Give the working copy to uid. Directories holding material stay root's, group-writable and sticky: the
    uid may add files there but not delete or rename root's. Material stays root-owned and read-only."""
    containers = {workdir} | {workdir / a for rel in fixed for a in Path(rel).parents if a != Path(".")}
    for dirpath, dirnames, filenames in os.walk(workdir):
        for p in (Path(dirpath, name) for name in dirnames + filenames):
            if p in containers or os.path.relpath(p, workdir) in fixed:
                continue
            st = os.lstat(p)
            if st.st_nlink > 1 and st.st_uid == 0 and not stat.S_ISDIR(st.st_mode):
                p.unlink()  # a hard link to a root file elsewhere: chown would hand that file over
            else:
                os.lchown(p, uid, uid)
    for d in containers:
        os.chown(d, 0, uid)
        os.chmod(d, 0o1770)


def prepare(task: Task, files: dict[str, str], workdir: Path, uid: int | None, with_hidden: bool) -> None:
    """Sweep `workdir`, write `files` (editable path -> text), copy the material (and, `with_hidden`, the
    hidden files) in read-only, and hand the copy to `uid` when there is one. Raises ValueError for a file
    path that leaves the working copy or names material."""
    material, hidden = [str(p) for p in task.material_files()], [str(p) for p in task.hidden_files()]
    for rel in files:
        if Path(rel).is_absolute() or ".." in Path(rel).parts or rel in ("", ".", *material, *hidden):
            raise ValueError(
                f"editable file {rel!r} must be a relative path in the working copy, not material"
            )
    remove_hidden(task, workdir)
    _sweep(workdir, {os.path.normpath(p) for p in [*files, *task.config.editable, *material, *hidden]})
    for rel, text in files.items():
        with open(_open_fresh(workdir, rel, 0o644), "w", encoding="utf-8") as f:
            f.write(text)
    for rel in material:
        _copy_in(task.root / rel, workdir, rel, trust_root_owned=uid is not None)
    for rel in hidden if with_hidden else []:  # a built-in's come from its cache (`tasks.hidden`)
        _copy_in(task.hidden_root / rel, workdir, rel, trust_root_owned=False)
    if uid is not None:  # hidden files go to the uid: the launcher deletes them before the candidate starts
        _hand_over(workdir, uid, set(material))


def discard_outputs(task: Task, files: dict[str, str], workdir: Path) -> None:
    """Delete everything a run wrote into `workdir` (after it passed its disk limit): all but the editable
    files and the material, never following a link."""
    keep = {os.path.normpath(p) for p in [*files, *task.config.editable, *map(str, task.material_files())]}
    for dirpath, dirnames, filenames in os.walk(workdir, topdown=False):
        for name in filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            if os.path.relpath(Path(dirpath, name), workdir) not in keep:
                os.unlink(Path(dirpath, name))
        for d in dirnames:
            with contextlib.suppress(OSError):  # a folder that still holds kept files stays
                if not Path(dirpath, d).is_symlink():
                    Path(dirpath, d).rmdir()


def remove_hidden(task: Task, workdir: Path) -> None:
    """Take the task's hidden files out of a working copy: they never stay there after a run."""
    for entry in task.config.hidden:
        remove(workdir / entry.rstrip("/"))
