"""What `arts search` prints while it runs, and the copy of it kept in `runs/<id>/arts.log`.

A round spends most of its time inside model calls (75-126 s for one proposal with the 135M model on a
laptop CPU); without a sign of life a user cannot tell a slow run from a hung one. So the console shows
the phase the round is in (plan, propose, execute i/N, attribute, compare, update) with the seconds spent
in it, refreshed while the call runs (a rich live line, on a terminal only). Log lines (one per node, per
audit, ...) print above it. Three levels: `-q` prints only the final result, the default adds progress,
`-v` adds the model's free text (which for a 135M model is often noise) and the libraries' progress bars.
The log file gets everything at every level, each line stamped with the clock time and the seconds since
the start (`arts status` reads the last line to say what a run is doing, and for how long).

The library talks to it through `Run.log(text)` and `Run.phase(name)`; `said(text)` marks the model's own
words. A plain `print` works as a log too (phases and said-text are then dropped or printed as lines).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path
from typing import IO, Any


def quiet_libraries(verbose: bool) -> None:
    """Library progress bars, logs and deprecation warnings off unless asked (`-v`): set before
    transformers and datasets load."""
    if verbose:
        return
    # a library's deprecation notices are for its callers' authors, not for someone running a search
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for key, value in (
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TQDM_DISABLE", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1"),
        ("DATASETS_VERBOSITY", "error"),
    ):
        os.environ.setdefault(key, value)


class _PhaseLine:
    """The live line: rich renders it on every refresh, so the seconds count up during a long call."""

    def __init__(self, console: Console):
        self.console = console

    def __rich__(self) -> Any:
        from rich.text import Text

        c = self.console
        if not c.current:
            return Text("")
        now = time.time()
        # a Text, not markup: a line printed with markup off re-renders this line with markup off too
        return Text.assemble((f"{now - c.t0:6.0f}s  ", "dim"), (c.current, "bold"), f"  {now - c.since:.0f}s")


class Console:
    """A log callable with phases. `verbosity`: -1 quiet, 0 normal, 1 verbose."""

    def __init__(self, verbosity: int = 0, stream: IO[str] | None = None, live: bool | None = None):
        self.verbosity = verbosity
        self.stream = stream or sys.stdout
        self.t0 = self.since = time.time()
        self.current = ""
        self._file: IO[str] | None = None
        self._dir: Path | None = None
        self._pending: list[str] = []
        self._live: Any = None
        self.tracking: Any = None
        """`--report-to`'s `search.trackers.Reporting`, which the run's live update feeds; None: off."""
        tty = getattr(self.stream, "isatty", lambda: False)()
        if verbosity >= 0 and (tty if live is None else live):
            from rich.console import Console as RichConsole
            from rich.live import Live

            rich_console = RichConsole(file=self.stream, highlight=False, force_terminal=True)
            self._live = Live(_PhaseLine(self), console=rich_console, refresh_per_second=2, transient=True)
            self._live.start()

    # -- the log file ----------------------------------------------------------------------------------
    def attach(self, run_dir: Path) -> None:
        """Write to `run_dir/arts.log` (appending: a resumed run continues the same file) once the run
        has made its directory: a start that fails before that leaves no folder behind."""
        self._dir = run_dir

    def _record(self, text: str) -> None:
        now = time.time()
        self._pending.append(
            f"{time.strftime('%H:%M:%S', time.localtime(now))} {now - self.t0:8.1f}s  {text}\n"
        )
        if self._file is None and self._dir is not None and self._dir.is_dir():
            self._file = (self._dir / "arts.log").open("a", encoding="utf-8", buffering=1)
        if self._file is not None:
            self._file.writelines(self._pending)
            self._pending.clear()

    # -- what the library calls ------------------------------------------------------------------------
    def __call__(self, text: str) -> None:
        """A progress line: printed unless quiet, always recorded."""
        self._record(text)
        if self.verbosity >= 0:
            self._print(text)

    def said(self, text: str) -> None:
        """The model's own free text: printed only with -v, always recorded."""
        self._record(f"model: {text}")
        if self.verbosity >= 1:
            self._print(f"  model: {text}")

    def phase(self, name: str, round: int | None = None) -> None:
        """The step the round is in now; shown live with its elapsed seconds."""
        label = f"round {round}: {name}" if round else name
        if label == self.current:
            return
        done = f" (previous took {time.time() - self.since:.1f}s)" if self.current else ""
        self.current, self.since = label, time.time()
        self._record(f"phase {label}{done}")
        if self.verbosity >= 1 and self._live is None:
            self._print(f"  [{label}]")

    def result(self, text: str) -> None:
        """The final line: printed at every level."""
        self._record(text)
        self._print(text)

    def _print(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        self.current = ""
        if self._file is not None:
            self._file.close()
            self._file = None


def drawn_line(round: int, drawn: list[tuple[Any, float]]) -> str:
    """The round's drawn actions as the grammar forced them (verb, target, parent, stated probability);
    a 135M model's free text after the target is left to `said` (shown under -v)."""
    from arts.policy.edits.moves import directed_target

    parts = []
    for c, p in drawn:
        move = directed_target(c.hypothesis)
        what = f"{move[0]} {move[1]}" if move else f"{c.axis or 'free'} hypothesis"
        parts.append(f"{what} on node {c.parent} (p={p:.2f})")
    return f"round {round}: drew " + "; ".join(parts)


def routes_line(round: int, decisions: dict[int, Any]) -> str:
    """Failure attribution's routed actions (forced by the routing table): node → action."""
    routes = ", ".join(
        f"node {n} → {d.action}" + (" (clamped)" if d.clamped else "") for n, d in decisions.items()
    )
    return f"round {round}: attribution routes {routes}"
