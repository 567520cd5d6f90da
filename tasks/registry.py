"""The project's one registry pattern: a dict plus a decorator, with a `module:attr` fallback.

Backends (`arts.policy.backends.registry`), search methods (`arts.search.methods.base`) and reward functions
(`arts.rewards.base`) each keep one `Registry`. An unknown name raises a KeyError that lists the known
names, so a typo on the command line is fixed in one step; registering a name twice is an error, so a
plug-in never silently replaces a built-in.

This module is layer-neutral: it imports only the standard library, and every package may import it
(tests/test_layout.py, NEUTRAL). It sits in `tasks`, the bottom layer, because the installed layout has no
place outside the five packages; it holds nothing of the task contract.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object of one kind (`kind` names it in errors: "backend", "reward", ...)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that registers its object under `name` and returns it unchanged."""

        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice; give one of them another name")
            self._items[name] = obj
            return obj

        return deco

    def names(self) -> list[str]:
        return sorted(self._items)

    def get(self, name: str) -> T:
        """The registered object, or `module:attr` imported on demand."""
        if name in self._items:
            return self._items[name]
        if ":" in name:
            module, _, attr = name.partition(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as e:
                raise KeyError(
                    f"cannot import {self.kind} {name!r}: {e}; check that {module} is on sys.path and "
                    f"defines {attr}"
                ) from None
        raise KeyError(
            f"unknown {self.kind} {name!r}; known: {', '.join(self.names())} (or give module:attr)"
        )
