"""What a run shows people: the HTML report (`html`, with `plots` and the dual-space sections in `space`),
the grounding of model-written text in measured numbers (`grounding`), and experiment trackers
(`trackers`, `--report-to`)."""
