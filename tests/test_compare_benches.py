"""`scripts/compare_benches.py`: the committed probe-jacobi warm-start table gives the figure docs/benchmark.md
quotes, and a wrong argument says how to write it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compare_benches.py"
TABLE = ROOT / "docs" / "bench-probes" / "jacobi-warm" / "runs.csv"


def test_the_committed_warm_start_table_gives_the_quoted_difference():
    out = subprocess.run([sys.executable, str(SCRIPT), f"{TABLE}:arts-warm", f"{TABLE}:arts"],
                         capture_output=True, text=True, cwd=ROOT, check=True)  # fmt: skip
    assert "10 runs, IQM 0.029 [0.005, 0.057]" in out.stdout
    assert "A - B: 0.010 [-0.019, 0.040], not significant" in out.stdout


def test_a_method_without_runs_is_named():
    out = subprocess.run([sys.executable, str(SCRIPT), f"{TABLE}:nope", f"{TABLE}:arts"],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert out.returncode != 0 and "no finished run of method 'nope'" in out.stderr
