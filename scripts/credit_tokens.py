"""The credit check of finished TTT runs over two token sets: the whole drawn candidate (as `arts credit`
scores it) and the move's tokens only (the parent, the verb and the target: what `ttt.grpo.train_on =
"move"` trains, `training.logprobs.move_positions`).

Each rewarded rollout sampled under a trained checkpoint is scored again, teacher-forced on its list's
tokens under its grammar and the run's temperature, under that checkpoint (`adapters/<k>`) and under the
base model; its shift is the difference, summed over the token set. The whole-candidate shift agrees with
the stored one (`stored`, the sampler's log-prob minus the base's), which checks the rescoring. A
candidate's move is a handful of its ~60 tokens; the rest (its stated probability, labels, free detail)
are not trained under `train_on = "move"` and move only as a side effect, so the two concordances say
whether the adapter ranked the moves it was trained on, apart from that drift.

With `--spellings MOVE`, no model call: how the runs' sampled lists spelled MOVE in tokens (each distinct
split of its text, with its count, and the tokenizer's own split).

Usage: OMP_NUM_THREADS=1 .venv/bin/python scripts/credit_tokens.py RUN_DIR... [--pairs] [--spellings "increase STEPS"]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arts.policy.backends.spelling import written  # noqa: E402
from arts.search.cli.runs import _load_run  # noqa: E402
from arts.search.config import ModelConfig  # noqa: E402
from arts.search.run import make_backend  # noqa: E402
from arts.training.checkpoint import checkpoint_path, read_state  # noqa: E402
from arts.training.credit import CreditAction, credit  # noqa: E402
from arts.training.logprobs import move_positions, score_targets, span_targets  # noqa: E402


def check(run: Path, show: bool) -> tuple[list[CreditAction], list[CreditAction]]:
    """(whole-candidate actions, move-token actions) of one run, for `training.credit.credit`."""
    state, _, model = _load_run(str(run))
    backend = make_backend(ModelConfig(model=model), lambda u: None, 0)
    temperature = read_state(checkpoint_path(run, 0)).get("temperature", 1.0)
    tok = backend.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    groups = defaultdict(list)
    for r in state.rollouts.values():
        trained = r.adapter and r.adapter != "adapters/0" and r.reward is not None
        if trained and r.tokens and len(r.span) == 2:
            groups[r.group].append(r)
    whole, move, loaded = [], [], set()
    for g, members in sorted(groups.items()):
        if len({m.reward for m in members}) < 2:
            continue  # no pair
        for m in members:
            name = m.adapter.replace("/", "_")
            if name not in loaded:
                backend.load_adapter(name, run / m.adapter)
                loaded.add(name)
            targets = span_targets(backend, m.json_schema or {}, m.tokens, [(0, len(m.tokens))])
            prompt = backend.encode_prompt(m.prompt)
            with backend._adapter(None):
                base = score_targets(backend.model, prompt, targets, pad, temperature)[0]
            with backend._adapter(name):
                adapted = score_targets(backend.model, prompt, targets, pad, temperature)[0]
            s, e = m.span
            at = move_positions(tok, m.tokens, (s, e))
            whole.append(CreditAction(g, m.reward, math.fsum(adapted[s:e]), math.fsum(base[s:e])))
            move.append(
                CreditAction(g, m.reward, math.fsum(adapted[i] for i in at), math.fsum(base[i] for i in at))
            )
            if show:
                stored = m.old_logprob - math.fsum(base[s:e]) if m.old_logprob is not None else math.nan
                print(f"  group {g} {m.adapter} reward {m.reward:+.2f}: whole {whole[-1].shift:+.3f} "
                      f"(stored {stored:+.3f}), move {move[-1].shift:+.3f} "
                      f"{tok.decode([m.tokens[i] for i in at])!r}")  # fmt: skip
    return whole, move


def spellings(runs: list[Path], move: str) -> None:
    """Print each token split of `move` in the runs' sampled lists (each list once), most frequent first."""
    from transformers import AutoTokenizer

    from arts.policy.backends.weights import resolve_model

    counts, lists, tok = Counter(), 0, None
    for run in runs:
        state, _, model = _load_run(str(run))
        tok = tok or AutoTokenizer.from_pretrained(resolve_model(model))
        for tokens in {tuple(r.tokens) for r in state.rollouts.values() if r.tokens}:
            lists += 1
            pieces = [tok.decode([t]) for t in tokens]
            for i, j in written(pieces, move):
                counts[tuple(pieces[i:j])] += 1
    print(f"{lists} lists; {sum(counts.values())} writings of {move!r} in {len(counts)} spellings")
    for split, n in counts.most_common():
        print(f"  {n:4d}  {'·'.join(split)!r}")
    if tok is not None:
        print(
            f"  the tokenizer's own: {'·'.join(tok.decode([t]) for t in tok.encode(move, add_special_tokens=False))!r}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--pairs", action="store_true", help="print each scored action")
    ap.add_argument("--spellings", metavar="MOVE", help="count MOVE's token splits in the lists; no scoring")
    args = ap.parse_args()
    if args.spellings:
        spellings(args.runs, args.spellings)
        return 0
    for run in args.runs:
        whole, move = check(run, args.pairs)
        for what, actions in (("whole candidate", whole), ("move tokens", move)):
            result = credit(actions)
            print(f"{run.name}  {what}: {result.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
