"""Score a packing of 26 circles in the unit square by the sum of their radii.

Trust boundary: the candidate's `pack()` runs in a child process (`python evaluate.py --child`) in a
scratch directory holding only `solution.py` and this file, and sends its raw centres and radii back as
JSON on a stdout channel that its own prints cannot reach. This parent never imports the candidate: it
checks shapes, finiteness, every wall and every pair itself, and alone writes `result.json`.
Not prevented here: a child that deliberately reaches outside its scratch directory (for example via
/proc) to tamper with files; the sandbox's process limits are the guard there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

N_CIRCLES = 26
TOLERANCE = 1e-9  # how far a circle may cross a wall or another circle (rounding slack)
CHILD_TIMEOUT_S = 50  # under the task's 60 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


def run_child(stdin: bytes = b"") -> tuple[bytes | None, str]:
    """Run this file's child side on the candidate in a scratch directory: (payload, "") or (None, why)."""
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as scratch:
        for name in (Path(__file__).name, EDITABLE):
            shutil.copy(here / name, scratch)
        try:
            proc = subprocess.run(
                [sys.executable, Path(__file__).name, "--child"],
                cwd=scratch,
                input=stdin,
                capture_output=True,
                timeout=CHILD_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return None, f"the candidate ran past {CHILD_TIMEOUT_S} s and was stopped"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return (
            None,
            f"the candidate crashed (exit code {proc.returncode}): {err[-1] if err else 'no error output'}",
        )
    if not proc.stdout:
        return None, "the candidate exited without returning anything (sys.exit or os._exit in the program?)"
    return proc.stdout, ""


def reserve_stdout() -> BinaryIO:
    """Keep the real stdout for the payload; whatever the candidate prints goes to stderr instead."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return channel


def write_result(score: float | None, message: str, metrics: dict | None = None) -> None:
    """Write result.json; a missing score means the candidate is invalid."""
    out = Path("result.json")
    out.unlink(missing_ok=True)
    valid = score is not None
    out.write_text(json.dumps({"score": score, "valid": valid, "metrics": metrics or {}, "message": message}))


def check_packing(centers: np.ndarray, radii: np.ndarray, tol: float) -> str:
    """Why the packing is infeasible, or "" if every circle lies in the square and no two overlap."""
    if centers.shape != (N_CIRCLES, 2) or radii.shape != (N_CIRCLES,):
        return f"expected centres of shape ({N_CIRCLES}, 2) and radii of shape ({N_CIRCLES},), got {centers.shape} and {radii.shape}"
    if not (np.isfinite(centers).all() and np.isfinite(radii).all()):
        return "the centres or radii contain NaN or inf"
    if (radii < 0).any():
        return f"circle {int(np.argmin(radii))} has a negative radius {radii.min():.3g}"
    wall = np.minimum(centers, 1 - centers).min(axis=1) - radii
    if (wall < -tol).any():
        i = int(np.argmin(wall))
        return f"circle {i} crosses a wall of the unit square by {-wall[i]:.3g} (tolerance {tol:g})"
    gap = np.linalg.norm(centers[:, None] - centers[None], axis=-1) - radii[:, None] - radii[None]
    gap[np.diag_indices(N_CIRCLES)] = np.inf
    if (gap < -tol).any():
        i, j = np.unravel_index(int(np.argmin(gap)), gap.shape)
        return f"circles {i} and {j} overlap by {-gap[i, j]:.3g} (tolerance {tol:g})"
    return ""


def score(tol: float = TOLERANCE) -> tuple[float | None, str, dict]:
    """Run the candidate and check its packing: (sum of radii or None, message, metrics)."""
    payload, why = run_child()
    if payload is None:
        return None, why, {}
    try:
        data = json.loads(payload)
        centers = np.asarray(data["centers"], dtype=float)
        radii = np.asarray(data["radii"], dtype=float)
    except (ValueError, KeyError, TypeError) as e:
        return None, f"pack() returned something that is not two numeric arrays: {e}", {}
    why = check_packing(centers, radii, tol)
    if why:
        return None, why, {}
    total = float(radii.sum())
    return (
        total,
        f"{N_CIRCLES} circles fit (tolerance {tol:g}); sum of radii {total:.6f}",
        {"sum_of_radii": total},
    )


def _child() -> None:
    channel = reserve_stdout()
    from solution import pack

    centers, radii = pack()
    data = {
        "centers": np.asarray(centers, dtype=float).tolist(),
        "radii": np.asarray(radii, dtype=float).tolist(),
    }
    channel.write(json.dumps(data).encode())


def main() -> None:
    Path("result.json").unlink(missing_ok=True)
    write_result(*score())


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        _child()
    else:
        main()
