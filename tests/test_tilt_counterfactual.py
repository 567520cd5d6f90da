"""`scripts/tilt_counterfactual.py`: the paying class's expected draws at other tilts, from stored draws."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from arts.search.config import SearchConfig, to_toml
from arts.search.ledger import Ledger
from arts.search.store import Store

ROOT = Path(__file__).resolve().parents[1]


def test_a_tilt_moves_the_expected_draws_toward_what_the_adapter_raised(tmp_path):
    run = tmp_path / "run"
    cfg = SearchConfig(task="probe-ridge", scientist={"candidates": 2, "tilt": 1.0})
    run.mkdir()
    (run / "config.toml").write_text(to_toml(cfg))
    cands = [  # two lists of two: the paying verb raised by the adapter, a decoy's decrease not of the class
        {"hypothesis": "decrease PENALTY_AGE", "probability": 0.5, "stated_probability": 0.5},
        {"hypothesis": "increase PENALTY_AGE", "probability": 0.5, "stated_probability": 0.5},
        {"hypothesis": "decrease PIVOT_EPS", "probability": 0.5, "stated_probability": 0.5},
        {"hypothesis": "increase PENALTY_SIZE", "probability": 0.5, "stated_probability": 0.5},
    ]
    with Store.open(run) as store:
        Ledger(store).event("draw", round=2, drawn=[[0, 0.5, False], [3, 0.5, False]], candidates=cands,
                            move_log_ratios=[1.0, 0.0, 2.0, 0.0])  # fmt: skip
    out = subprocess.run([sys.executable, "scripts/tilt_counterfactual.py", str(run), "--tilts", "0", "2"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout  # fmt: skip
    at2 = math.exp(2) / (math.exp(2) + 1)
    assert "lists 2  writing 1  drawn 1" in out
    assert "t=0: 0.50" in out and f"t=2: {at2:.2f}" in out
