"""Does the embedded model map a fault's log signature to the fault's name? For each fault of incident-rca,
its root log's signature line (`scripts/incident_lines.py`, numbers filled in) is shown in a short prompt
that lists the six names; each name is scored by its log-probability after the line minus its
log-probability after "(none)" (so that a name the model favours anyway does not win), and the best is
compared with the truth. Chance is 1 in 6.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/signature_names.py [--with-support]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incident_lines import ROOT_LINES  # noqa: E402

from arts.policy.backends.weights import resolve_model  # noqa: E402

FILL = {"p": "87", "n": "1200", "v": "v3.6.0", "peer": "elasticsearch", "s": "search", "x": "cart"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--with-support", action="store_true", help="the first supporting line too")
    args = p.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(None)
    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path).eval()
    names = list(ROOT_LINES)

    def logprob(text: str, name: str) -> float:
        prompt = (f"<|im_start|>user\nLog:\n{text}\nWhich fault? One of: {', '.join(names)}.<|im_end|>\n"
                  "<|im_start|>assistant\nFault: ")  # fmt: skip
        a = tok(prompt, return_tensors="pt").input_ids
        b = tok(name, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.no_grad():
            logits = model(torch.cat([a, b], 1)).logits.log_softmax(-1)
        return sum(logits[0, a.shape[1] - 1 + i, b[0, i]].item() for i in range(b.shape[1]))

    right = 0
    for fault, (signature, support) in ROOT_LINES.items():
        text = signature.format(**FILL) + ("\n" + support[0].format(**FILL) if args.with_support else "")
        scores = {n: logprob(text, n) - logprob("(none)", n) for n in names}
        best = max(scores, key=scores.get)
        right += best == fault
        print(f"{fault:26s} -> {best:26s} " + " ".join(f"{n[:8]}={v:+.1f}" for n, v in scores.items()))
    print(f"right: {right} of {len(names)}")


if __name__ == "__main__":
    main()
