"""The log lines of a synthetic incident (`scripts/make_incidents.py`): harmless noise and traffic, each
fault's signature and supporting lines at its root, its callers' lines, and the misleading keywords a
root's log also shows. `{peer}` is a callee or a replica, `{n}` and `{p}` numbers filled per incident.
"""

from __future__ import annotations

NOISE = (  # harmless: their numbers stay in the normal range
    "WARN slow request {ms}ms on /internal/status",
    "WARN GC pause {ms}ms",
    "WARN disk usage {q}% on /var/log",
    "WARN connection pool {q}% utilised",
    "WARN cpu steal {low}% on host",
    "WARN retrying request (attempt 2/3)",
    "WARN config reload took {ms}ms",
)
TRAFFIC = (
    "INFO GET /v1/{s} 200 {lat}ms",
    "INFO health check ok",
    "INFO handled {n} requests in the last minute",
)
STORE_TRAFFIC = (
    "INFO checkpoint complete in {lat}ms",
    "INFO health check ok",
    "INFO {n} queries in the last minute",
)
ROOT_LINES = {  # (signature line, supporting lines); {peer}: a callee or a replica, {n}/{p}: numbers
    "cpu_saturation": (
        "ERROR cpu throttled in {p}% of CFS periods, requests queued",
        ("WARN request queue depth {n}, all workers busy", "WARN event loop lag {n}ms under load"),
    ),
    "memory_leak": (
        "ERROR container restarted: OOMKilled (exit code 137)",
        ("WARN heap usage {p}% after full GC", "WARN GC pause {n}ms, memory not reclaimed"),
    ),
    "bad_deploy": (
        "ERROR unhandled exception in RequestHandler.handle: NullPointerException (build {v})",
        ("WARN 5xx responses rising since version {v} started", "ERROR request failed with status 500"),
    ),
    "connection_pool_exhausted": (
        "ERROR timeout acquiring connection from pool after 5000ms (active 50/50) for {peer}",
        ("WARN connection pool wait queue {n} requests", "WARN pool to {peer} at 50/50 connections"),
    ),
    "disk_full": (
        "ERROR write failed: No space left on device (/var/lib/{s})",
        ("WARN disk usage 99% on /var/lib/{s}", "ERROR flush to disk failed, retrying"),
    ),
    "network_partition": (
        "ERROR dial tcp {peer}: connect: no route to host",
        ("WARN packet loss {p}% on eth0, retransmits rising", "WARN network: lost heartbeat from {peer}"),
    ),
}
CALLER_LINES = (
    "ERROR upstream {x} timed out after {n}ms",
    "ERROR 503 from {x}: upstream unavailable",
    "WARN retrying call to {x} (attempt 2/3)",
)
MISLEADING = {  # keywords of another fault that the root's log also shows, louder than its own
    "cpu_saturation": ("WARN GC pause {n}ms", "WARN heap usage {p}% (memory pressure)"),
    "memory_leak": ("WARN cpu {p}%: GC threads busy", "WARN load average {n} on {p}% cpu"),
    "bad_deploy": ("WARN connection reset by peer {peer}", "WARN reopening connection to {peer}"),
    "connection_pool_exhausted": ("WARN cpu {p}%, {n} threads waiting", "WARN load average high, cpu {p}%"),
    "disk_full": ("WARN heap usage {p}% (memory pressure)", "WARN memory: page cache evictions {n}/s"),
    "network_partition": (
        "WARN connection pool {p}% utilised, reconnecting",
        "WARN connection to {peer} reset",
    ),
}
