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

import numpy as np

from arts.tasks import protocol

N_CIRCLES = 26
TOLERANCE = 1e-9  # how far a circle may cross a wall or another circle (rounding slack)
CHILD_TIMEOUT_S = 50  # under the task's 60 s, so a hung candidate still gets a clear result.json
EDITABLE = "solution.py"


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
    payload, why = protocol.run_child(__file__, EDITABLE, timeout_s=CHILD_TIMEOUT_S)
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


def child(payload: bytes) -> bytes:
    from solution import pack

    centers, radii = pack()
    data = {
        "centers": np.asarray(centers, dtype=float).tolist(),
        "radii": np.asarray(radii, dtype=float).tolist(),
    }
    return json.dumps(data).encode()


if __name__ == "__main__":
    protocol.main(score, child)
