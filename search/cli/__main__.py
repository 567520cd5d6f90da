"""`python -m arts.search.cli`: the `arts` command without its console script."""

from arts.search.cli.main import main

raise SystemExit(main())
