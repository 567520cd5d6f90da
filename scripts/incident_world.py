"""The world of a synthetic incident (`scripts/make_incidents.py`): services and their call graph, the
faults and their log signatures, the red herrings, and the per-minute metrics of a root's failure as it
reaches each caller. Pure `random.Random`, no numpy, so a case is reproduced byte for byte from its seed.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict

FAULTS = (
    "cpu_saturation",
    "memory_leak",
    "bad_deploy",
    "connection_pool_exhausted",
    "disk_full",
    "network_partition",
)
"""Hand-written files of the task, copied from the built-in directory into another `--out`."""
MINUTES = 60
API = ("api", "web-bff", "mobile-bff")
MID = ("auth", "orders", "payments", "catalog", "search", "inventory", "users", "cart", "shipping", "pricing")
DATA = ("postgres", "mysql", "redis", "memcached", "kafka", "rabbitmq", "elasticsearch", "blob-store")
ALL_SERVICES = ("gateway", *API, *MID, *DATA)
SIGNATURES = {
    "cpu_saturation": "cpu throttled",
    "memory_leak": "oomkilled",
    "bad_deploy": "unhandled exception",
    "connection_pool_exhausted": "timeout acquiring connection from pool",
    "disk_full": "no space left on device",
    "network_partition": "no route to host",
}
"""Lower-case phrase that appears in the root's log for its fault and nowhere else in the incident."""
TRAPS = {
    "echo": 0.6,
    "batch_errors": 0.55,
    "decoy_deploy": 0.6,
    "root_old_deploy": 0.35,
    "misleading_keywords": 0.7,
    "wrong_blame": 0.6,
}
"""Red herring -> probability per incident; calibrated so that rca_heuristic scores about 0.5."""


class Incident(BaseModel):
    """One generated incident: its material (graph, metrics, logs, changes, alert) and its hidden truth."""

    model_config = ConfigDict(extra="forbid")
    id: str
    """Directory name in the case, e.g. `i1`."""
    seed: int
    """The seed it was built from; never written into the material."""
    clock: int
    """Minute of the day at minute 0 of the metrics; the hour never crosses midnight."""
    calls: dict[str, list[str]]
    """Caller -> the services it calls (every service is a key)."""
    root: str
    """The service that failed first (hidden)."""
    fault: str
    """What failed in it, one of FAULTS (hidden)."""
    onset: int
    """Minute at which the root's failure starts."""
    metrics: dict[str, list[list[float]]]
    """Service -> per minute [latency_ms, error_rate, cpu, mem]."""
    logs: dict[str, list[str]]
    """Service -> its log lines `HH:MM:SS LEVEL message`, in time order."""
    changes: list[list[str]]
    """Change-log rows [HH:MM, service, change], in time order."""
    alert: str
    """The page that opened the incident."""
    traps: list[str]
    """Which red herrings were placed (for calibration reports; not material)."""

    @property
    def services(self) -> list[str]:
        return sorted(self.calls)


class Draft:
    """Mutable state while one incident is built; every random draw goes through `rng` in a fixed order."""

    def __init__(self, rng: random.Random, calls: dict[str, list[str]], clock: int):
        self.rng, self.calls, self.clock = rng, calls, clock
        self.base: dict[str, dict[str, float]] = {}
        self.series: dict[str, dict[str, list[float]]] = {}
        self.logs: dict[str, list[tuple[int, int, str]]] = {s: [] for s in sorted(calls)}
        self.changes: list[tuple[int, str, str]] = []

    def log(self, service: str, minute: int, text: str) -> None:
        self.logs[service].append((minute, self.rng.randint(0, 59), text))

    def add(self, service: str, column: str, minute: int, value: float) -> None:
        self.series[service][column][minute] += value


def hhmm(clock: int, minute: int) -> str:
    return f"{(clock + minute) // 60:02d}:{(clock + minute) % 60:02d}"


def topology(rng: random.Random) -> dict[str, list[str]]:
    """gateway -> api tier -> services (a service may call another) -> data stores; every service has a caller."""
    n = rng.randint(6, 9)
    apis = sorted(rng.sample(API, 1 if n < 8 else rng.choice((1, 2))))
    n_data = min(rng.randint(2, 3), n - 1 - len(apis) - 2)
    mids = rng.sample(MID, n - 1 - len(apis) - n_data)
    datas = sorted(rng.sample(DATA, n_data))
    calls: dict[str, set[str]] = {s: set() for s in ("gateway", *apis, *mids, *datas)}
    calls["gateway"] |= set(apis)
    for i, mid in enumerate(mids):
        calls[rng.choice(apis)].add(mid)
        if i and rng.random() < 0.3:
            calls[rng.choice(mids[:i])].add(mid)
    for api in apis:
        if not calls[api]:
            calls[api].add(rng.choice(mids))
    for data in datas:
        calls[rng.choice(mids)].add(data)
        if rng.random() < 0.4:
            calls[rng.choice(mids)].add(data)
    return {s: sorted(callees) for s, callees in sorted(calls.items())}


def baselines(d: Draft) -> None:
    for s in sorted(d.calls):
        rng = d.rng
        b = {
            "latency_ms": rng.uniform(3, 18) if s in DATA else rng.uniform(25, 140),
            "error_rate": rng.uniform(0.001, 0.006),
            "cpu": rng.uniform(15, 45),
            "mem": rng.uniform(30, 62),
        }
        d.base[s] = b
        d.series[s] = {
            "latency_ms": [b["latency_ms"] * (1 + rng.gauss(0, 0.06)) for _ in range(MINUTES)],
            "error_rate": [b["error_rate"] * (1 + rng.gauss(0, 0.4)) for _ in range(MINUTES)],
            "cpu": [b["cpu"] + rng.gauss(0, 2.5) for _ in range(MINUTES)],
            "mem": [b["mem"] + rng.gauss(0, 0.8) for _ in range(MINUTES)],
        }


def ramp(m: int, start: int, width: int = 2) -> float:
    return 0.0 if m < start else min(1.0, (m - start + 1) / width)


def root_effect(d: Draft, root: str, fault: str, t0: int) -> dict[str, list[float]]:
    """Add the fault's metric shape to the root; returns the added latency and error per minute."""
    rng, b = d.rng, d.base[root]
    lat, err, cpu, mem = (
        {
            "cpu_saturation": (b["latency_ms"] * rng.uniform(3, 8), rng.uniform(0.01, 0.08), 1, 0),
            "memory_leak": (b["latency_ms"] * rng.uniform(1.5, 4), rng.uniform(0.02, 0.05), 0, 1),
            "bad_deploy": (b["latency_ms"] * rng.uniform(0.2, 0.8), rng.uniform(0.15, 0.45), 0, 0),
            "connection_pool_exhausted": (rng.uniform(1500, 4500), rng.uniform(0.08, 0.3), -5, 0),
            "disk_full": (b["latency_ms"] * rng.uniform(0.5, 2), rng.uniform(0.2, 0.6), 0, 0),
            "network_partition": (rng.uniform(800, 3000), rng.uniform(0.1, 0.4), -4, 0),
        }
    )[fault]
    width = 1 if fault in ("bad_deploy", "disk_full") else 2
    added = {"latency_ms": [0.0] * MINUTES, "error_rate": [0.0] * MINUTES}
    top = rng.uniform(93, 99)
    for m in range(t0, MINUTES):
        r = ramp(m, t0, width)
        added["latency_ms"][m], added["error_rate"][m] = lat * r, err * r
        if cpu == 1:
            d.add(root, "cpu", m, (top - b["cpu"]) * r)
        elif cpu:
            d.add(root, "cpu", m, cpu * r)
    if mem:
        leak(d, root, t0, added)
    for m in range(MINUTES):
        d.add(root, "latency_ms", m, added["latency_ms"][m])
        d.add(root, "error_rate", m, added["error_rate"][m])
    return added


def leak(d: Draft, root: str, t0: int, added: dict[str, list[float]]) -> None:
    """Memory climbs for ~20 minutes before the onset; from then on the container is OOM-killed and restarts
    every `period` minutes (memory drops, errors spike) and climbs again."""
    rng, mem0 = d.rng, d.base[root]["mem"]
    start, period, top = t0 - rng.randint(15, 22), rng.randint(7, 11), rng.uniform(93, 97)
    spike = rng.uniform(0.2, 0.45)
    for m in range(start, MINUTES):
        if m < t0:
            level = mem0 + (top - mem0) * (m - start + 1) / (t0 - start)
        else:
            since = (m - t0) % period
            level = mem0 + 5 + (top - mem0 - 5) * since / (period - 1)
            if since < 2:
                added["error_rate"][m] += spike * (1 if since == 0 else 0.5)
        d.add(root, "mem", m, level - mem0)


def onsets(d: Draft, root: str, t0: int) -> dict[str, int]:
    """Minute at which the failure reaches each caller (transitively): the root's onset plus 1-2 minutes per hop."""
    callers: dict[str, list[str]] = {s: [] for s in d.calls}
    for s, callees in d.calls.items():
        for c in callees:
            callers[c].append(s)
    lag = {(c, x): d.rng.randint(1, 2) for x in sorted(callers) for c in sorted(callers[x])}
    onset, frontier = {root: t0}, [root]
    while frontier:
        x = min(frontier, key=lambda s: (onset[s], s))
        frontier.remove(x)
        for c in sorted(callers[x]):
            if onset[x] + lag[(c, x)] < onset.get(c, MINUTES):
                onset[c] = onset[x] + lag[(c, x)]
                frontier.append(c)
    return onset


def propagate(d: Draft, root: str, t0: int, onset: dict[str, int], added: dict[str, list[float]]) -> None:
    """Each caller sees a delayed share of the root's added latency plus timeouts, and errors from both."""
    for c in sorted(onset, key=lambda s: (onset[s], s)):
        if c == root:
            continue
        rng, delay = d.rng, onset[c] - t0
        k, k_err, timeouts = rng.uniform(0.6, 1.0), rng.uniform(0.3, 0.8), rng.uniform(0.05, 0.14)
        wait = d.base[c]["latency_ms"] * rng.uniform(0.6, 1.5)
        for m in range(onset[c], MINUTES):
            sev = ramp(m, onset[c])
            d.add(c, "latency_ms", m, min(5000.0, added["latency_ms"][m - delay] * k + wait * sev))
            d.add(c, "error_rate", m, max(added["error_rate"][m - delay] * k_err, timeouts * sev))
