"""What a directed hypothesis may name, most promising first (the `small` profile's target ordering).

A 135M scientist writes useful hypotheses only when the grammar hands it real targets of the best program:
each numeric constant with the directions whose value menu still holds a program not yet evaluated,
each function whose return the executor can set, and each keyword argument of a call whose menu still
holds a program not yet evaluated (`tune k`), and each call whose callee has a sibling not yet
evaluated (`swap c`). The order matters because each of the K candidates gets
its own share (`policy.moves.spread`): targets whose latest test raised the best score lead, then
untested ones, then the least recently tested. Not done here: the grammar itself (`policy.scientist`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from arts.policy.edits.apply import constant_menus, return_menus
from arts.policy.edits.keywords import keyword_menus, numeric_keywords
from arts.policy.edits.moves import Moves, directed_target
from arts.policy.edits.swaps import swap_menus
from arts.policy.edits.targets import list_targets, number, return_functions
from arts.search.render import VALUE_CHARS
from arts.search.state import Node, SearchState

KNOBS_SHOWN = 8
"""How many of the best node's named constants the prompt lists."""


def knobs(node: Node, limit: int = KNOBS_SHOWN) -> str:
    """The named constants of a node's program: what a small model can cite in a concrete hypothesis."""
    pairs = [(k, v) for text in node.files.values() for k, v in list_targets(text).constants.items()][:limit]
    return "\n".join(f"- {k} = {v[:VALUE_CHARS]}" for k, v in pairs)


def example(state: SearchState, rng: random.Random) -> str | None:
    """A concrete hypothesis about a real target of the best node, drawn at random each round: a numeric
    constant, or else a function that ends in a one-line return, or else a keyword argument of a call
    (the 135M model copies the example's form, so it must name something that exists); None when the
    program has none of these."""
    best = state.best()
    files = best.files if best else {}
    pairs = [(k, v) for text in files.values() for k, v in list_targets(text).constants.items()]
    numeric = [(k, v) for k, v in pairs if v.replace(".", "", 1).replace("-", "", 1).isdigit()]
    if numeric:
        name, value = rng.choice(numeric)
        return f"change {name} from {value} to a better value"
    returns = [f for text in files.values() for f in return_functions(text)]
    if returns:
        name, params = rng.choice(returns)
        return f"make {name} return a better expression of {', '.join(params)}"
    calls = keyword_menus({p: t for p, t in files.items() if p.endswith(".py")})
    if calls:
        call = rng.choice(sorted(calls))
        keyword = rng.choice(sorted(calls[call]))
        return f"set {keyword} of {call} to {calls[call][keyword][0]}"
    return None


def targets(state: SearchState, known: Callable[[dict[str, str]], str | None]) -> Moves | None:
    """The moves left at the best node, most promising first; None when the program has constants,
    keyword arguments or calls with menus but every entry of every menu has run (nothing is left)."""
    best = state.best()
    if best is None:
        return {}
    files = {p: t for p, t in best.files.items() if p.endswith(".py")}

    def fresh(edited: dict[str, str]) -> bool:
        return not known({**best.files, **edited})

    names = list(constant_menus(files))
    up = constant_menus(files, fresh, dict.fromkeys(names, 1))
    down = constant_menus(files, fresh, dict.fromkeys(names, -1))
    moves: Moves = {}
    for name in names:
        verbs = (("increase",) if up[name] else ()) + (("decrease",) if down[name] else ())
        if verbs:
            moves[name] = verbs
    orders = return_menus(files, fresh)  # a settable return: rewritable while its menu holds a new one
    for text in files.values():
        moves.update((name, ("rewrite",)) for name, _ in return_functions(text) if orders.get(name, True))
    # a swap before the keywords of its call: their menus are those of the callee in place
    moves.update((call, ("swap",)) for call in swap_menus(files, fresh) if call not in moves)
    tunable = keyword_menus(files, fresh)
    bases = numeric_keywords(files)
    for call, menus in tunable.items():
        for k, menu in menus.items():
            if k not in moves:
                moves[k] = _keyword_verbs(menu, bases.get((call, k)))
    if (names or orders or keyword_menus(files) or swap_menus(files)) and not moves:
        return None
    return by_promise(moves, list(state.nodes.values()))


def _keyword_verbs(menu: list[str], value: int | float | None) -> tuple[str, ...]:
    """A numeric keyword moves like a constant, `increase` and `decrease` while its fresh menu holds a
    number on that side (the executor then takes the compass's next step, `policy.edits.step_menus`); any
    other keyword, or one whose fresh menu holds only words, is tuned. On diabetes-knn, tuning, the 135M
    default lowered `n_neighbors` from 3 to 1 (by its digits) in one of 3 runs and never moved it in
    another; the third raised it to 6 and reached 0.489, against the seed's 0.338."""
    if value is None:
        return ("tune",)
    numbers = [v for x in menu if (v := number(x)) is not None]
    verbs = (("increase",) if any(v > value for v in numbers) else ()) + (
        ("decrease",) if any(v < value for v in numbers) else ()
    )
    return verbs or ("tune",)


def by_promise(moves: Moves, nodes: list[Node]) -> Moves:
    """`moves` reordered, most promising first: targets whose latest round of directed tests raised the
    best score of the rounds before, then untested ones, then the rest, least recently tested first
    (program order breaks ties), and last those whose every valid test scored exactly as its parent did
    (inert knobs: on digits the 135M default spent 9 of 16 evaluations on MAX_ITER, random_state and
    class_weight of a converged lbfgs fit, which change no prediction, while its one swap of the
    classifier waited behind them)."""
    top: dict[int, float] = {}  # round -> its best score
    for n in nodes:
        if n.score is not None:
            top[n.round] = max(top.get(n.round, n.score), n.score)
    best_before: dict[int, float] = {}  # round -> the best score of the rounds before it
    running = float("-inf")
    for r in sorted({n.round for n in nodes}):
        best_before[r], running = running, max(running, top.get(r, running))
    # target -> (its latest round of tests, whether one of them raised the best)
    last: dict[str, tuple[int, bool]] = {}
    moved: dict[str, bool] = {}  # target -> whether any test of it changed the score (or failed)
    scores = {n.id: n.score for n in nodes}
    for n in sorted(nodes, key=lambda n: n.round):
        if n.parent is None or (move := directed_target(n.hypothesis)) is None:
            continue
        raised = n.score is not None and n.score > best_before[n.round]
        r, before = last.get(move[1], (-1, False))
        last[move[1]] = (n.round, raised or (before and r == n.round))
        moved[move[1]] = moved.get(move[1], False) or n.score != scores.get(n.parent)
    order = list(moves)

    def rank(name: str) -> tuple[int, int, int]:
        r, raised = last.get(name, (-1, False))
        return (0 if raised else 1 if r < 0 else 2 if moved[name] else 3, r, order.index(name))

    return {name: moves[name] for name in sorted(moves, key=rank)}


def parent_ids(state: SearchState, shown: list[int], k: int, optimize: bool) -> list[int]:
    """The parents a proposal may name: on an optimize task `k` nodes, the best-scoring half (rounded up,
    best first) and then the most recent valid ones, so that a scientist that learns (TTT) learns which
    node to expand as well as what to try; else (or with k = 0) every node the state shows."""
    if k == 0 or not optimize:
        return shown
    valid = [n for n in state.valid_nodes() if n.score is not None]
    ranked = sorted(valid, key=lambda n: (-n.score, n.id))
    out = [n.id for n in ranked[: (k + 1) // 2]]
    for n in sorted(valid, key=lambda n: -n.id):
        if len(out) >= k:
            break
        if n.id not in out:
            out.append(n.id)
    return out or shown
