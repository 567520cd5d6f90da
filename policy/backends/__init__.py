"""Model backends: the implementations of `policy.base.Backend`, their registry, and `arts serve`.

Each backend module is named as its registry name (`transformers`, `vllm`, `openai`: the value of a
run's `backend` setting), so the name in a config is the module that serves it. The modules share the
name of the library they wrap; every import in arts is absolute, so `import openai` inside
`backends/openai.py` still reaches the library. The rest is what the in-process transformers backend is
built from: `weights` (where a model comes from), `decoding` (the sampling loop and the log-prob forward
that training shares) and `grammar` (xgrammar token masks). The roles (scientist, executor, ...) see
none of this: they talk to a `Backend`.
"""
