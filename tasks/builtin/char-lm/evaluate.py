"""Score a character-level language model by its bits per character after a fixed training budget.

Trust boundary: training and inference run in a child process (`python evaluate.py --child`) in a
scratch directory holding only `model.py` and this file. The child trains `build_model()` for STEPS
Adam steps on data/train.txt and returns, on a stdout channel that the candidate's prints cannot reach,
its raw logits for the evaluation windows chosen here, plus its training-loss curve. This parent never
imports the candidate (nor torch): it computes the log-softmax and the loss at its own targets, and
checks causality with probe windows whose later characters it has scrambled (a prediction must not
change when only later characters do). The loss curve is the child's word; it is shown in curves.jsonl
and never scored.
Not prevented here: a module built to recognise the probes, or one that tampers with the training loop
it runs inside (say, raising STEPS); the hidden test split and a reading of the code are the guards.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np

from arts.tasks import protocol

VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))  # 96 characters; any other reads as "?"
STEPS = 300  # optimizer steps: the training budget
LOG_EVERY = 25  # steps between training-loss points in curves.jsonl
GRAD_CLIP = 1.0  # gradient-norm clip applied at every step
EVAL_LEN = 128  # characters per evaluation window; each window predicts its next 128 characters
EVAL_BATCH = 64  # evaluation windows per forward pass
N_PROBES = 16  # causality probes: windows whose tail is scrambled
PROBE_TOL = 1e-3  # how far a probe's log-probabilities before the scrambled tail may move
SEED = 0
CHILD_TIMEOUT_S = 100  # under the task's 120 s, so a slow candidate still gets a clear result.json
EDITABLE = "model.py"


def read_ids(path: str) -> np.ndarray:
    """Character ids (indices into VOCAB) of a text file next to this one."""
    lut = np.full(256, VOCAB.index("?"), dtype=np.int64)
    lut[[ord(c) for c in VOCAB]] = np.arange(len(VOCAB))
    text = (Path(__file__).resolve().parent / path).read_text()
    return lut[np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8)]


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def check_output(out: dict[str, np.ndarray], n_windows: int) -> str:
    """Why the child's logits or curve cannot be used, or ""."""
    logits, curve = out["logits"], out["curve"]
    if logits.shape != (n_windows, EVAL_LEN, len(VOCAB)):
        return f"logits of shape {logits.shape} for {n_windows} windows of {EVAL_LEN}; forward() must return (B, T, vocab_size)"
    if not np.isfinite(logits).all():
        return "the logits contain NaN or inf (did training diverge? try a lower LR)"
    steps = np.arange(LOG_EVERY, STEPS + 1, LOG_EVERY)
    if curve.shape != (len(steps), 2) or (curve[:, 0] != steps).any() or not np.isfinite(curve).all():
        return "the training-loss curve is malformed or not finite (did training diverge? try a lower LR)"
    return ""


def lookahead(logp: np.ndarray, rows: np.ndarray, cuts: np.ndarray) -> str:
    """Why the model is not causal, judged by the probes that follow the real windows in `logp`, or ""."""
    n = len(logp) - len(rows)
    for k, (row, cut) in enumerate(zip(rows, cuts, strict=True)):
        moved = np.abs(logp[n + k, :cut] - logp[row, :cut]).max()
        if moved > PROBE_TOL:
            return (
                f"the model looks ahead: its predictions for positions < {cut} of window {row} moved by "
                f"{moved:.3g} when only later characters changed; position t may use only ids <= t "
                "(no bidirectional layers, a causal mask in attention)"
            )
    return ""


def score(eval_path: str, name: str) -> tuple[float | None, str, dict]:
    """Train in the child, then score bits per character on `eval_path`: (bpc or None, message, metrics)."""
    ids = read_ids(eval_path)
    n = (len(ids) - 1) // EVAL_LEN
    inputs, targets = ids[: n * EVAL_LEN].reshape(n, EVAL_LEN), ids[1 : n * EVAL_LEN + 1].reshape(n, EVAL_LEN)
    rng = np.random.default_rng(SEED)
    rows, cuts = rng.choice(n, N_PROBES, replace=False), rng.integers(1, EVAL_LEN, N_PROBES)
    probes = inputs[rows].copy()
    for probe, cut in zip(probes, cuts, strict=True):
        probe[cut:] = rng.integers(0, len(VOCAB), EVAL_LEN - cut)
    buf = io.BytesIO()
    np.savez(buf, train=read_ids("data/train.txt"), windows=np.concatenate([inputs, probes]))
    payload, why = protocol.run_child(__file__, EDITABLE, buf.getvalue(), timeout_s=CHILD_TIMEOUT_S)
    if payload is None:
        return None, why, {}
    try:
        out = dict(np.load(io.BytesIO(payload), allow_pickle=False))
        why = check_output(out, n + N_PROBES)
    except (OSError, ValueError, KeyError) as e:
        why = f"the child's output could not be read: {e}"
    if why:
        return None, why, {}
    logp = log_softmax(out["logits"].astype(np.float64))
    why = lookahead(logp, rows, cuts)
    if why:
        return None, why, {}
    bpc = float(-np.take_along_axis(logp[:n], targets[..., None], axis=-1).mean() / math.log(2))
    metrics = {name: bpc, "train_bpc": [float(v) / math.log(2) for v in out["curve"][:, 1]]}
    return bpc, f"{bpc:.4f} bits per character on {n * EVAL_LEN} characters after {STEPS} steps", metrics


def train_and_predict(
    model: ModuleType, train: np.ndarray, windows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Train build_model() for STEPS steps on random CONTEXT-long slices of `train`; logits for `windows`."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    net = model.build_model(len(VOCAB))
    opt = torch.optim.Adam(net.parameters(), lr=model.LR)
    text, offsets = torch.from_numpy(train), torch.arange(model.CONTEXT + 1)
    curve = []
    for step in range(1, STEPS + 1):
        starts = torch.from_numpy(rng.integers(0, len(train) - model.CONTEXT - 1, model.BATCH))
        chunk = text[starts[:, None] + offsets]
        loss = F.cross_entropy(net(chunk[:, :-1]).reshape(-1, len(VOCAB)), chunk[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), GRAD_CLIP)
        opt.step()
        if step % LOG_EVERY == 0:
            curve.append((step, loss.item()))
    net.eval()
    with torch.no_grad():
        batches = np.array_split(windows, -(-len(windows) // EVAL_BATCH))
        logits = [net(torch.from_numpy(b)).float().numpy() for b in batches]
    return np.concatenate(logits), np.array(curve, dtype=np.float64)


def child(payload: bytes) -> bytes:
    data = np.load(io.BytesIO(payload), allow_pickle=False)
    import model

    logits, curve = train_and_predict(model, data["train"], data["windows"])
    buf = io.BytesIO()
    np.savez(buf, logits=logits, curve=curve)
    return buf.getvalue()


def validate() -> tuple[float | None, str, dict]:
    """The validation score; its training curve goes to curves.jsonl for the scientist."""
    bpc, message, metrics = score("data/val.txt", "val_bpc")
    if bpc is not None:
        points = [
            {"step": int(s), "train_bpc": v}
            for s, v in zip(range(LOG_EVERY, STEPS + 1, LOG_EVERY), metrics["train_bpc"], strict=True)
        ]
        lines = [*points, {"step": STEPS, "val_bpc": bpc}]
        Path("curves.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return bpc, message, metrics


if __name__ == "__main__":
    protocol.main(validate, child)
