"""Directed moves: what a small model's hypothesis may name, how they are shared over the K candidates
of a proposal, and how a hypothesis names one (`policy.scientist` builds the grammar from them)."""

from __future__ import annotations

import re

Moves = dict[str, tuple[str, ...]]
"""Targets of directed hypotheses, most promising first: a name and the verbs it takes (`increase`,
`decrease` for a numeric constant; `rewrite` for a function; `tune` for a keyword argument of a call;
`swap` for a call whose callee has siblings, named as in `policy.edits.keywords` (`np.mean`, `Ridge#2`))."""


def spread(moves: Moves, k: int) -> list[Moves]:
    """The moves shared out over K candidates: with at least K targets, candidate i leads with target i and
    the rest are dealt round-robin (so every target is offered and the first K lead), except that the
    first swap among the leads is a share of its own; with fewer, candidate i gets target i mod T.

    Why a swap alone: the 135M default picks `increase`/`decrease` over any other verb in its share. On
    breast-cancer-tree, once the tree's numeric keywords moved like constants, `swap
    DecisionTreeClassifier` led candidate 0 with `min_samples_leaf` behind it, and no run of 3 proposed
    the swap (best 0.915-0.925, against 0.942-0.955 for `mutate`, whose random swaps reach ensembles).
    Only one: on diabetes-knn, with every leading swap alone, the scaler's and the regressor's swaps took
    two of four candidates each round and `n_neighbors`, the move that pays there, was tried once. The
    next round's first swap is another one (`search.methods.targets.by_promise` puts a tested one back)."""
    names = list(moves)
    if not names:
        return []
    if len(names) < k:
        return [{names[i % len(names)]: moves[names[i % len(names)]]} for i in range(k)]
    groups = [[n] for n in names[:k]]
    alone = next((i for i, n in enumerate(names[:k]) if moves[n] == ("swap",)), None)
    others = [i for i in range(k) if i != alone]
    for j, n in enumerate(names[k:]):
        groups[others[j % len(others)]].append(n)
    return [{n: moves[n] for n in g} for g in groups]


DIRECTED = re.compile(
    r"\b(increase|decrease|rewrite|tune|swap|probe|suspect)\s+(\w+(?:[.-]\w+)*(?:#\d+)?)", re.IGNORECASE
)
"""A directed hypothesis's verb and target, wherever they stand (an edited hypothesis may lead with
other words)."""


def directed_target(hypothesis: str) -> tuple[str, str] | None:
    """The verb (lower case) and target a directed hypothesis names: `increase BATCH ...` gives
    ("increase", "BATCH"); None when it names none."""
    m = DIRECTED.search(hypothesis)
    return (m.group(1).lower(), m.group(2)) if m else None
