"""The program-editing engine: what in a program an edit can name (`targets`), the typed edit actions
(`actions`), the per-call schema a model emits them through (`schema`) and how they apply (`apply`), call
keywords (`keywords`), sibling swaps (`swaps`), return expressions (`expressions`) and orderings
(`orderings`), value menus (`menus`, `step_menus`), directed moves (`moves`), the executor's prompt window
(`prompt`) and the no-model mutation baseline (`mutation`).

Everything here reads a program as text or AST and never runs it.
"""
