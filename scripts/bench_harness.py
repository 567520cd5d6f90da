"""What the harness itself costs per round, against one model call: prompt rendering on trees of growing
size (the prompt must stop growing past the budget) and store writes.

    .venv/bin/python scripts/bench_harness.py [--nodes 10 200 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, `tests.` still imports

from arts.search.render import RenderConfig, render_state  # noqa: E402
from arts.search.store import Store  # noqa: E402
from tests.doubles import tree  # noqa: E402  (the synthetic tree tests/test_render.py checks)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10, 200, 2000])
    args = ap.parse_args(argv)
    from transformers import AutoTokenizer

    from arts.policy.backends.weights import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(None))
    count = lambda t: len(tok.encode(t))  # noqa: E731 - the real tokenizer, as the backend counts
    cfg = RenderConfig()
    print(f"{'nodes':>6} {'prompt tokens':>14} {'render ms':>10}")
    for n in args.nodes:
        s = tree(n)
        t0 = time.perf_counter()
        text, _ = render_state(s, "task statement " * 60, cfg, count)
        ms = (time.perf_counter() - t0) * 1000
        print(f"{n:>6} {count(text):>14} {ms:>10.2f}")
    with tempfile.TemporaryDirectory() as d, Store.open(Path(d)) as store:
        node = tree(2).nodes[2].model_copy(update={"id": 0})
        t0 = time.perf_counter()
        for _ in range(500):
            store.add(node)
        print(f"store.add(Node): {(time.perf_counter() - t0) / 500 * 1e6:.0f} us per node")


if __name__ == "__main__":
    main()
