"""The backend registry: backend name → class (`transformers`, `vllm`, `openai`), with `module:attr` fallback."""

from arts.tasks.registry import Registry

BACKENDS: Registry[type] = Registry("backend")

_BUILTIN = {
    "transformers": "arts.policy.backends.transformers",
    "openai": "arts.policy.backends.openai",
    "vllm": "arts.policy.backends.vllm",
}


def backend_class(name: str) -> type:
    """The backend class for `name`, importing a built-in backend's module on first use (so that the
    vLLM or OpenAI client is only imported by runs that ask for it)."""
    if name in _BUILTIN and name not in BACKENDS.names():
        import importlib

        importlib.import_module(_BUILTIN[name])
    if name not in _BUILTIN and name not in BACKENDS.names() and ":" not in name:
        known = ", ".join(sorted({*_BUILTIN, *BACKENDS.names()}))
        raise KeyError(f"unknown backend {name!r}; known: {known} (or give module:attr)")
    return BACKENDS.get(name)
