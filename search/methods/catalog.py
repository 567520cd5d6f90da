"""Every built-in search method, registered by name: importing this module registers them all."""

from arts.search.methods import arts, baselines  # noqa: F401  (registers the built-in methods)
from arts.search.methods.base import METHODS, Method

__all__ = ["METHODS", "Method"]
