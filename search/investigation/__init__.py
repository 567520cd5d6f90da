"""The investigation of an arts round (SHELDON's dual space, SAGE's failure attribution).

- `space`: the rules of the hypothesis and observation spaces, as pure functions over a `SearchState`;
- `standing`: what the evidence makes of a hypothesis (refuted, established) and the answer node;
- `spacemap`: the map of the spaces the scientist's prompt shows, within its token budget;
- `plan`: the statement split into situation and deliverable, once per search;
- `hypotheses`: candidates become working hypotheses; which may be drawn; keep, refine or set aside;
- `observations`: what each experiment and each comparison showed, with evidence relations;
- `attribution`: competing causes, critic, judge, routing table and verdict clamp (`failures` applies it
  to a round's failed, regressed or stalled work);
- `reports`: what the harness shows about a node, and the memory line it keeps.
Everything is written through the ledger; nothing here chooses parents or runs experiments.
"""
