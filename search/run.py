"""Starting and resuming a run: the run directory, the resolved config, the backends, the run context, then
the loop.

The scientist and the executor are configured separately; when both name the same backend and model,
one loaded model serves both (no second copy in memory). A method that calls no model loads none.

`dtype = "auto"` of a local transformers model is resolved here, where it is known whether the model
trains: on a CPU with native bf16 matmul, bf16 unless test-time training updates it (training on the
policy that sampled needs the sampler's and the update's log-probs to agree, to 1e-5 in float32 and only
to ~0.3 nats in bf16); float32 on other CPUs; the backend's own choice (bf16) on a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from arts.policy.backends.registry import backend_class
from arts.policy.backends.weights import cpu_has_bf16
from arts.policy.base import Backend, Usage
from arts.search.agents import Agents
from arts.search.config import ModelConfig, SearchConfig, read_stored_config, to_toml
from arts.search.context import Run
from arts.search.lab import Lab
from arts.search.ledger import Ledger
from arts.search.loop import run_search
from arts.search.meter import Meter
from arts.search.methods.catalog import METHODS, Method
from arts.search.seeds import Seeds
from arts.search.store import Store
from arts.tasks.base import resolve_task
from arts.tasks.isolation import probe
from arts.tasks.problems import unsearchable

WARM = "warm-start"
"""The name a warm-start adapter (`scientist.adapter`) is loaded under on the scientist's backend."""


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_dtype(mc: ModelConfig, trains: bool = False) -> ModelConfig:
    """`mc` with `dtype = "auto"` made concrete where this module decides it (see the module docstring)."""
    if mc.dtype != "auto" or mc.backend != "transformers" or on_gpu():
        return mc
    fast = cpu_has_bf16() and not trains
    return mc.model_copy(update={"dtype": "bfloat16" if fast else "float32"})


def make_backend(mc: ModelConfig, sink: Callable[[Usage], None], seed: int) -> Backend:
    cls = backend_class(mc.backend)
    dtype = {} if mc.dtype == "auto" else {"dtype": mc.dtype}
    if mc.backend == "openai":
        if not mc.base_url:
            raise ValueError("the openai backend needs a server: pass --base-url http://HOST:PORT/v1")
        if dtype:
            raise ValueError(f"dtype {mc.dtype}: the openai backend's server holds the weights; drop --dtype")
        return cls(base_url=mc.base_url, model=mc.model or "default", usage_sink=sink)
    return cls(model=mc.model, usage_sink=sink, seed=seed, **dtype)


def method_of(cfg: SearchConfig) -> Method:
    """The configured method, checked against what the config asks of it."""
    try:
        method = METHODS.get(cfg.method)
    except KeyError as e:
        raise ValueError(f"method: {e.args[0]}") from None
    if cfg.ttt.enabled and not method.makes_groups:
        raise ValueError(
            f"ttt trains on groups of actions drawn from one proposal, which method {cfg.method!r} does not "
            "make; use --method arts or drop --ttt"
        )
    return method


def build_run(cfg: SearchConfig, store: Store, log: Callable[[str], None] = print) -> tuple[Run, Method]:
    method = method_of(cfg)
    task = resolve_task(cfg.task)
    if why := unsearchable(task.root, task.config):  # every node would be invalid
        raise ValueError(f"{why}; nothing was run")
    ledger = Ledger(store)
    meter = Meter(
        cfg.budget, task.config.kind, list(ledger.state.events.values()), ledger.meta("wall_s", 0.0)
    )

    def sink(u: Usage) -> None:
        executor = u.purpose in ("executor", "investigate", "answer")
        pricing = (cfg.executor_model if executor else cfg.scientist_model).pricing
        cost = pricing.cost(u) if pricing else 0.0
        meter.usage(u, cost)
        ledger.event("usage", **u.model_dump(), dollars=cost)

    scientist = executor = None
    if method.uses_model:
        trains = cfg.ttt.enabled and cfg.scientist_model.backend == "transformers"
        scientist_model = resolve_dtype(cfg.scientist_model, trains)
        scientist = make_backend(scientist_model, sink, cfg.seed)
        same = cfg.executor_model == cfg.scientist_model  # under TTT the executor shares the float32 copy
        executor_model = scientist_model if same else resolve_dtype(cfg.executor_model)
        executor = scientist if same else make_backend(executor_model, sink, cfg.seed)
        log(f"weights: scientist {scientist_model.dtype}, executor {executor_model.dtype}")
        if trains and scientist_model.dtype in ("bfloat16", "float16") and not on_gpu():
            log(
                f"note: --ttt trains a {scientist_model.dtype} scientist: each update's ratio is exact (its "
                "first forward is the old policy), but on a CPU the sampler's own log-probs differ from any "
                "rescoring by up to ~0.3 nats, so training is slightly off the policy that sampled; auto "
                "loads a trained model in float32 there (measured: docs/ttt-sweep.md, bf16)"
            )
    agents = Agents(scientist, executor, cfg.scientist, cfg.analysis, cfg.executor, cfg.investigator)
    if cfg.scientist.adapter and scientist is not None and not cfg.ttt.enabled:
        scientist.load_adapter(WARM, Path(cfg.scientist.adapter))  # a warm start (TTT loads it to train)
        agents.use_adapter(WARM)
    seeds = Seeds(cfg.seed)
    lab = Lab(task, ledger, meter, agents, seeds, cfg.components.memory, log)
    lab.observe = cfg.components.observations
    if cfg.evaluate_on == "ray":
        from arts.search.remote import RayEvaluations

        lab.evaluator, lab.evaluate_on = RayEvaluations(cfg.ray_address), "ray"
    run = Run(cfg, task, ledger, meter, lab, agents, log)
    if cfg.ttt.enabled:
        run.learning = start_learning(cfg, run, scientist)
    return run, method


def start_learning(cfg: SearchConfig, run: Run, scientist: Backend | None):
    """Test-time training: a local trainer (the scientist itself, or a local copy of a served one's
    weights), whose every checkpoint the agents then sample from."""
    from arts.search.learning import Learning
    from arts.training.ttt import Trainer

    if cfg.scientist_model.backend == "transformers":
        trainer_backend, serving = scientist, None
    else:  # a served scientist: train a local copy of its weights, serve each checkpoint
        local = resolve_dtype(ModelConfig(model=cfg.ttt.trainer_model or cfg.scientist_model.model), True)
        trainer_backend, serving = make_backend(local, lambda u: None, cfg.seed), scientist
    warm = Path(cfg.scientist.adapter) if cfg.scientist.adapter else None
    trainer = Trainer(
        trainer_backend,
        cfg.ttt.grpo,
        run.ledger.store.run_dir,
        init=warm,
        temperature=cfg.scientist.temperature,
        seed=cfg.seed,
    )
    probe = run.task.config.probe
    learning = Learning(
        trainer,
        run.ledger,
        cfg.ttt.reward,
        cfg.ttt.grpo.update_every,
        log=run.log,
        use_adapter=run.agents.use_adapter,
        serving=serving,
        watch=cfg.ttt.watch or (probe.paying if probe else None),
        decoys=tuple(probe.decoys) if probe else (),
        tilt=(cfg.scientist.tilt, cfg.scientist.tilt_cap),
        companions=cfg.ttt.companions,
    )
    learning.start()
    return learning


def start_run(cfg: SearchConfig, run_dir: Path | None = None, log: Callable[[str], None] = print) -> dict:
    task = resolve_task(cfg.task)  # fail on a bad task before creating anything
    method_of(cfg)
    cfg = cfg.model_copy(update={"task": str(task.root) if task.root.parent.name != "builtin" else task.name})
    run_dir = run_dir or Path("runs") / f"{task.name}-{cfg.method}-{time.strftime('%Y%m%d-%H%M%S')}"
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"--run-dir {run_dir} is a file; choose a folder (it is created if missing)")
    if Store.holds_run(run_dir):
        raise ValueError(
            f"{run_dir} already holds a run; continue it with --resume {run_dir} or choose another --run-dir"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / ".config.toml.tmp"  # one rename: a kill leaves the whole config or none
    tmp.write_text(to_toml(cfg))
    tmp.replace(run_dir / "config.toml")
    log(f"run: {run_dir}  task {task.name}  method {cfg.method}  profile {cfg.profile}")
    if note := ttt_budget_note(cfg, task.config.kind):
        log(note)
    if note := small_model_note(cfg, task.config.kind):
        log(note)
    log_isolation(log)
    with Store.open(run_dir) as store:
        return run_search(*build_run(cfg, store, log))


def small_model_note(cfg: SearchConfig, kind: str) -> str | None:
    """What the embedded model is good for and what the budget buys, said once at the start of a search
    that uses it (None for another model, or a method that calls none)."""
    if cfg.scientist_model.model is not None or not method_of(cfg).uses_model:
        return None
    rounds = f"about {max(cfg.budget.evals // cfg.group, 1)} rounds of {cfg.group} experiments"
    budget = (
        f"{rounds} ({cfg.budget.evals} evaluations)"
        if kind == "optimize"
        else f"{cfg.budget.round_cap(kind)} rounds"
    )
    return (
        f"note: the embedded 135M model proposes small directed edits (a constant up or down, a keyword, a "
        f"swapped call), each checked before it runs; this budget buys {budget}. On a CPU a round takes "
        "tens of seconds of model time; `--method mutate` (no model) is the floor to beat, and a larger "
        "--model proposes freer changes"
    )


def ttt_budget_note(cfg: SearchConfig, kind: str) -> str | None:
    """A warning when a --ttt run's budget cannot give one update (None when it can): the first update comes
    after `update_every` rounds, each spending at least `group` evaluations on an optimize task."""
    if not cfg.ttt.enabled:
        return None
    every, group, rounds = cfg.ttt.grpo.update_every, cfg.group, cfg.budget.round_cap(kind)
    if rounds < every:
        return (
            f"warning: --ttt will not train: the run stops after {rounds} round(s) and the first update comes "
            f"after ttt.grpo.update_every={every}; raise --rounds to at least {every} or lower --update-every"
        )
    needed = every * group
    if kind == "optimize" and cfg.budget.evals < needed:
        return (
            f"warning: --ttt will not train: one update needs {every} round(s) (ttt.grpo.update_every) of "
            f"{group} evaluations (--group), at least {needed} evaluations, and the budget is "
            f"{cfg.budget.evals}; raise --evals to {needed} or more (several updates need several times that), "
            "or lower --group or --update-every"
        )
    return None


def log_isolation(log: Callable[[str], None]) -> None:
    """Say at the start of a run how its candidates are isolated, and what that level lacks."""
    iso = probe()
    log(f"sandbox: {iso.level}" + (f" ({iso.note})" if iso.note else ""))


def resume_run(run_dir: Path, log: Callable[[str], None] = print) -> dict:
    path = run_dir / "config.toml"
    if not run_dir.is_dir() or not path.is_file():
        raise ValueError(
            f"{run_dir} holds no run (no config.toml); start one with `arts search TASK --run-dir {run_dir}`"
        )
    cfg = read_stored_config(path)
    if Store.holds_run(run_dir):
        log(f"resume: {run_dir}")
    else:  # killed before the store's first commit: nothing was done yet, so the run starts from its config
        log(f"resume: {run_dir} has no committed state yet; starting the run from its config.toml")
    log_isolation(log)
    with Store.open(run_dir, create=True) as store:
        return run_search(*build_run(cfg, store, log))
