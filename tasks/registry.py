"""One small registry pattern (a dict plus a decorator, with a `module:attr` fallback).

Used for backends, search methods and the like. An unknown name raises an error that lists the known
names, so a typo on the command line is fixed in one step.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
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
                raise KeyError(f"cannot import {self.kind} {name!r}: {e}") from None
        raise KeyError(
            f"unknown {self.kind} {name!r}; known: {', '.join(self.names())} (or give module:attr)"
        )
