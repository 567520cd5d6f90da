"""A node's folder on disk: its editable files written all or none, never through a planted link.

The folder is a view of the store (`runs/<id>/nodes/<node_id>/`); an evaluated program could write in it,
so every write here replaces rather than follows what it finds. Not done here: the records (the store).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from arts.search.state import Node


def _safe_relpath(node_id: int, name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or ".." in path.parts:
        raise ValueError(
            f"node {node_id}: file path {name!r} must be relative and stay inside the node directory; "
            "fix the path the executor wrote"
        )
    return path


def write_files(target: Path, node: Node) -> Path:
    """Write the node's editable files into its folder; returns the folder.

    The files are staged in a sibling folder first: a new folder appears by one rename (all files or
    none), an existing one gets each file replaced atomically (old or new content, never a torn file).
    """
    if not node.id:
        raise ValueError("add the node to the store before writing its files (it has no id yet)")
    paths = {_safe_relpath(node.id, name): text for name, text in node.files.items()}
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{node.id}-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it 0700; it may become the node folder itself
    try:
        for rel, text in paths.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_text(text, encoding="utf-8")
        if not target.exists():
            os.rename(staging, target)
            return target
        for rel in paths:
            _real_folders(target, rel)
            os.replace(staging / rel, target / rel)  # replaces a planted link, never follows it
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _real_folders(target: Path, rel: PurePosixPath) -> None:
    """Make the folders on the way to target/rel real ones: an evaluated program could write in a node's
    folder, and a link it planted there (`pkg -> /etc`) must not steer a write elsewhere."""
    folder = target
    for part in rel.parts[:-1]:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        folder.mkdir(exist_ok=True)
