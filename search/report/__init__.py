"""What a run shows people: the HTML report (`html`, with the tree and charts in `plots`, the node panel in
`panel`, node labels and verdicts against the seed in `labels`, and the dual-space sections in `space`),
the grounding of model-written text in measured numbers (`grounding`), and experiment trackers
(`trackers`, `--report-to`)."""
