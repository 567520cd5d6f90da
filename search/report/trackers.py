"""`--report-to`: a run's figures in the experiment tracker a user already uses.

The store holds every figure (each TTT update's loss, mean reward, clip fraction, KL and gradient norm;
the best score and evaluations after each round); a tracker gets a copy as the run goes: `search/*` at
each round, `ttt/*` at each update (its step is the update's number). tensorboard writes into
`runs/<id>/tensorboard/`, trackio and wandb into their own projects (`arts`), and `module:attr` names a
factory `(run_dir, config) -> object with log(metrics, step) and close()` for any other.

Not done here: reading anything back, or installing the trackers (each is an optional package; a
missing one is named with its pip command before the search starts).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any, Protocol

UPDATE_FIGURES = ("loss", "reward_mean", "clip_fraction", "kl", "kl_old", "entropy", "steps", "grad_norm")
"""The fields of an `update` event that go to a tracker as `ttt/<name>`."""


class Tracker(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class _TensorBoard:
    def __init__(self, run_dir: Path, config: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        self.writer.add_text("config", f"```\n{config}\n```")

    def log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _Trackio:
    def __init__(self, run_dir: Path, config: dict[str, Any]):
        import trackio

        self.trackio = trackio
        trackio.init(project="arts", name=run_dir.name, config=config)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.trackio.log(metrics, step=step)

    def close(self) -> None:
        self.trackio.finish()


class _Wandb:
    def __init__(self, run_dir: Path, config: dict[str, Any]):
        import wandb

        self.run = wandb.init(project="arts", name=run_dir.name, config=config, dir=str(run_dir))

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


TRACKERS = {"tensorboard": (_TensorBoard, "tensorboard"), "trackio": (_Trackio, "trackio"),
            "wandb": (_Wandb, "wandb")}  # fmt: skip
"""name → (factory, the pip package it needs)."""


def open_tracker(name: str, run_dir: Path, config: dict[str, Any]) -> Tracker:
    """The tracker called `name` (or `module:attr`), started for this run."""
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)(run_dir, config)
    if name not in TRACKERS:
        raise ValueError(f"--report-to {name!r}: give one of {', '.join(TRACKERS)} or module:attr")
    factory, package = TRACKERS[name]
    try:
        return factory(run_dir, config)
    except ImportError:
        raise ValueError(f"--report-to {name} needs the {package} package: pip install {package}") from None


def update_metrics(payload: dict[str, Any]) -> dict[str, float]:
    """An `update` event's figures, as tracker metrics."""
    return {f"ttt/{k}": float(payload[k]) for k in UPDATE_FIGURES if isinstance(payload.get(k), (int, float))}


class Reporting:
    """Sends a run's new figures to its tracker, opened on first use (once the run has its folder)."""

    def __init__(self, name: str, run_dir: Path, config: dict[str, Any]):
        if name in TRACKERS and importlib.util.find_spec(TRACKERS[name][1]) is None:
            package = TRACKERS[name][1]
            raise ValueError(f"--report-to {name} needs the {package} package: pip install {package}")
        if ":" not in name and name not in TRACKERS:
            raise ValueError(f"--report-to {name!r}: give one of {', '.join(TRACKERS)} or module:attr")
        self.name, self.run_dir, self.config = name, run_dir, config
        self.tracker: Tracker | None = None
        self.sent = 0
        """The id of the last `update` event sent."""

    def send(self, state: Any, round: int) -> None:
        if self.tracker is None:
            self.tracker = open_tracker(self.name, self.run_dir, self.config)
        for e in sorted(state.events.values(), key=lambda e: e.id):
            if e.kind == "update" and e.id > self.sent:
                self.tracker.log(update_metrics(e.payload), step=int(e.payload.get("k", 0)))
                self.sent = e.id
        best = state.best()
        evals = sum(e.kind == "eval" for e in state.events.values())
        figures = {"search/evals": float(evals)}
        if best is not None and best.raw_score is not None:
            figures["search/best"] = float(best.raw_score)
        self.tracker.log(figures, step=round)

    def finish(self) -> None:
        """The figures of the last round (the run's end writes no live update), then close."""
        from arts.search.store import Store

        with Store.open_readonly(self.run_dir) as store:
            state = store.load_state()
        self.send(state, int(state.meta.get("round", 0)))
        if self.tracker is not None:
            self.tracker.close()
