"""What one executor step may answer: the menus of the step, and the names a hypothesis targets.

Each step recomputes the menus of the program as it is now (`policy.edits.apply`, `policy.edits.keywords`,
`policy.edits.swaps`), less the programs already evaluated in this run or the search (`fresh`): a small
model otherwise repeats a rejected value until its actions run out. A directed hypothesis keeps only
the values on its side of a constant or of a numeric keyword argument (`direction`). Executors running
the same hypothesis on the same program at once (a round's experiments run together, `search.overlap`)
would all see the same menus and answer alike, each answer but one then refused as already being
evaluated; with `share` = (i, k) the i-th of them sees every k-th entry of each menu from the i-th on
(the whole menu where its share is empty), so their first answers differ. With `compass`, a constant
or numeric keyword a directed hypothesis moves offers its next step only (the harness's compass
search, `ExecutorConfig.compass`), no coarser than the step level the harness reached on this parent
(`search.compass`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from arts.policy.edits.apply import constant_menus, program_key, return_menus
from arts.policy.edits.keywords import call_sites, keyword_menus, numeric_keywords
from arts.policy.edits.menus import step_level
from arts.policy.edits.moves import directed_target
from arts.policy.edits.swaps import swap_menus, swap_sites
from arts.policy.edits.targets import Targets, list_targets, number


@dataclass
class StepMenus:
    constants: dict[str, list] | None
    """Each numeric constant's value menu (None without value menus)."""
    keywords: dict[str, dict[str, list[str]]]
    swaps: dict[str, list[str]]
    rewrites: dict[str, list[str]] | None
    """Each settable return's menu of expressions (None without value menus)."""


def step_menus(
    work: dict[str, str],
    current: dict[str, str],
    known: Callable[[dict[str, str]], str | None] | None,
    seen: dict[str, str],
    sides: dict[str, int],
    ops: list[str],
    value_menu: bool,
    share: tuple[int, int] | None = None,
    compass: bool = False,
    level: int = 0,
) -> StepMenus:
    """The menus of one step over the editable files `work` of the program `current` (see the module
    docstring); with `compass`, a constant moved one way (`sides`) offers only its next step: the first
    entry of its share at step level `level` or finer (`menus.STEP_LEVELS`), else its first entry
    (`ExecutorConfig.compass`)."""
    fresh = _fresh(current, known, seen)
    bases = numeric_keywords(work) if sides else {}
    menus = StepMenus(
        constants=constant_menus(work, fresh, sides) if value_menu else None,
        keywords=_sided(keyword_menus(work, fresh), bases, sides) if "set_keyword" in ops else {},
        swaps=swap_menus(work, fresh) if "swap_call" in ops else {},
        rewrites=return_menus(work, fresh) if value_menu and "set_return" in ops else None,
    )
    if share is not None and share[1] > 1:
        menus = _shared(menus, _part(share))
    if compass and menus.constants is not None:
        now = {k: number(src) for t in work.values() for k, src in list_targets(t).constants.items()}
        menus.constants = {
            k: _next_step(v, now.get(k), level) if k in sides else v for k, v in menus.constants.items()
        }
    if compass:
        menus.keywords = {
            call: {
                k: _next_entry(m, bases[call, k], level) if (call, k) in bases and k in sides else m
                for k, m in kws.items()
            }
            for call, kws in menus.keywords.items()
        }  # fmt: skip
    return menus


def _next_entry(menu: list[str], value: int | float, level: int) -> list[str]:
    """`_next_step` over a keyword's menu of number sources (`_sided` left only numbers)."""
    numbers = [number(x) for x in menu]
    step = _next_step(numbers, value, level)
    return [menu[numbers.index(step[0])]] if step else menu


def _sided(
    keywords: dict[str, dict[str, list[str]]],
    bases: dict[tuple[str, str], int | float],
    sides: dict[str, int],
) -> dict[str, dict[str, list[str]]]:
    """Keyword menus with a numeric keyword a directed hypothesis moves (`sides`) cut to the numbers on
    its side of the call's value; calls left without a menu dropped."""
    out = {}
    for call, kws in keywords.items():
        kept = {}
        for k, menu in kws.items():
            if (call, k) in bases and k in sides:
                base = bases[call, k]
                menu = [x for x in menu if (v := number(x)) is not None and (v - base) * sides[k] > 0]
            if menu:
                kept[k] = menu
        if kept:
            out[call] = kept
    return out


def _next_step(menu: list, value: int | float | None, level: int) -> list:
    """The compass's next step in `menu` (ordered coarse to fine): its first entry at `level` or finer."""
    if value is None or level <= 0:
        return menu[:1]
    return [v for v in menu if step_level(value, v) >= level][:1] or menu[:1]


def _shared(menus: StepMenus, part: Callable[[list], list]) -> StepMenus:
    return StepMenus(
        constants=None if menus.constants is None else {k: part(v) for k, v in menus.constants.items()},
        keywords={c: {k: part(v) for k, v in kws.items()} for c, kws in menus.keywords.items()},
        swaps={c: part(v) for c, v in menus.swaps.items()},
        rewrites=None if menus.rewrites is None else {k: part(v) for k, v in menus.rewrites.items()},
    )


def _part(share: tuple[int, int]) -> Callable[[list], list]:
    i, k = share

    def part(menu: list) -> list:
        return menu[i % k :: k] or menu

    return part


def _fresh(
    current: dict[str, str], known: Callable[[dict[str, str]], str | None] | None, seen: dict[str, str]
) -> Callable[[dict[str, str]], bool]:
    """Whether an edit of `current` gives a program not yet evaluated (in this run or the search)."""

    def fresh(edited: dict[str, str]) -> bool:
        program = {**current, **edited}
        return program_key(program) not in seen and not (known and known(program))

    return fresh


def direction(hypothesis: str, files: dict[str, str]) -> dict[str, int]:
    """The numeric constant or keyword argument a directed hypothesis moves and which way (+1 up, -1
    down): `increase BATCH` gives {"BATCH": 1}; empty when the hypothesis names no direction of a
    numeric constant of `files` or of a keyword whose value in a call is a number."""
    move = directed_target(hypothesis)
    if move is None or move[0] not in ("increase", "decrease"):
        return {}
    if move[1] not in constant_menus(files) and move[1] not in {k for _, k in numeric_keywords(files)}:
        return {}
    return {move[1]: 1 if move[0] == "increase" else -1}


def mentioned(hypothesis: str, files: dict[str, str]) -> set[str]:
    """Constants, functions, calls (with keywords or siblings) and keyword arguments of `files` that the
    hypothesis names (whole words, any case)."""
    names = {n for p, t in files.items() if p.endswith(".py") for n in _names(t)}
    # `POINTS` is not named by `POINTS#2`, one of its numbers
    return {n for n in names if re.search(rf"\b{re.escape(n)}\b(?!#\d)", hypothesis, re.IGNORECASE)}


def _names(text: str) -> list[str]:
    targets: Targets = list_targets(text)
    sites = call_sites(text)
    return [
        *targets.constants,
        *targets.functions,
        *(s.name for s in sites),
        *(k for s in sites for k in s.menus),
        *(s.name for s in swap_sites(text)),
    ]
