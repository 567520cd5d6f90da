"""The `arts` command: `main` (the parser and `search`), `tasks` (tasks and `eval`), `runs` (report,
export, train, serve), `follow` (`arts runs` and `arts status`), `flags` (config fields as flags).

Nothing here computes results: each sub-command parses its flags and hands a config to library code.
"""
