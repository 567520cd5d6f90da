"""Search methods: how one round chooses its actions. All share the loop, the lab and the store.

`arts` (the method of this project) lives in `arts`; the baselines it is measured against (`greedy`,
`random`, `mutate`) in `baselines`; `targets` orders what the small profile's directed hypotheses may
name; `proposals` asks the scientist and runs what was drawn. Importing this package registers them all.
"""

from arts.search.methods import arts, baselines  # noqa: F401  (registers the built-in methods)
from arts.search.methods.base import METHODS, Method

__all__ = ["METHODS", "Method"]
