"""Search methods: how one round chooses its actions. All share the loop, the lab and the store.

`arts` (the method of this project) lives in `arts`; the baselines it is measured against (`greedy`,
`random`, `mutate`) in `baselines`; `targets` orders what the small profile's directed hypotheses may
name; `proposals` asks the scientist and runs what was drawn. `catalog` holds them all, registered by
name (`catalog.METHODS`); this package's own module imports none of them, so they import each other
without a cycle.
"""
