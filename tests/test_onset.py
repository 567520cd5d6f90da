"""What the rest of a case says about the first-out entity (`tasks.onset`), and how those lines decide the
answer's menus after the first-out line (`search.diagnose.noted_model`). Measured on generated incidents
in tests/test_incident_rca.py and `scripts/onset_faults.py`."""

from __future__ import annotations

import pytest

from arts.policy.investigator import Finding
from arts.search import diagnose
from arts.tasks import onset

CHANGES = "time,service,change\n03:10,db,deploy v1 -> v2\n03:27,api,deploy v4 -> v5\n03:28,db,feature flag x enabled\n"
DB_LOG = (
    "03:20:00 INFO GET /v1/db 200 5ms\n"
    "03:29:10 WARN connection pool 90% utilised\n"
    "03:30:00 ERROR disk write failed: no space left (/var/lib/db)\n"
    "03:31:00 ERROR request failed: internal error\n"
    "03:33:00 ERROR disk write failed: no space left (/var/lib/db)\n"
    "03:34:00 ERROR upstream cache timed out after 300ms\n"
)
API_LOG = (
    "03:32:00 ERROR upstream db timed out after 500ms\n03:34:00 ERROR upstream cache timed out after 20ms\n"
)
TEXTS = {
    "case/changes.csv": CHANGES,
    "case/logs/db.txt": DB_LOG,
    "case/logs/api.txt": API_LOG,
    "case/metrics/db.csv": "time,cpu\n03:28,5\n",
}


@pytest.mark.parametrize(
    ("line", "minutes"),
    [
        ("03:29,1,2", 209.0),
        ("03:29:30 ERROR x", 209.5),
        ("12 loss 0.3", 12.0),
        ("time,cpu", None),
        ("x 03:29", None),
    ],
)
def test_a_line_s_label_is_its_leading_clock_time_or_number(line: str, minutes: float | None):
    assert onset.label(line) == minutes


def test_before_keeps_lines_naming_the_entity_in_the_minutes_before_it_went_out_outside_its_own_files():
    """A deploy 19 minutes earlier and another service's deploy are not what happened to it just before."""
    got = onset.before(TEXTS, "db", "03:29", skip="case/metrics")
    assert got == [("case/changes.csv", "03:28,db,feature flag x enabled")]
    assert onset.before(TEXTS, "db", "not a time") == []


def test_own_lines_are_the_most_severe_kinds_no_other_log_has_most_frequent_first():
    """Numbers masked, the shared timeout kind drops out; WARN gives way to ERROR; the repeated kind leads."""
    got = [line for _, line in onset.own(TEXTS, "db", "03:29", skip="case/metrics")]
    assert got == [
        "03:30:00 ERROR disk write failed: no space left (/var/lib/db)",
        "03:31:00 ERROR request failed: internal error",
    ]
    lines = onset.lines(TEXTS, "db", "03:29", "case/metrics")
    assert lines[0].startswith("changes names db before 03:29: ") and lines[1].startswith(
        "only db's log, from 03:29: "
    )


def test_a_verdict_line_decides_only_the_menus_no_earlier_line_decided():
    """The first-out line settles the root; a later line that names another service (api) leaves it so,
    and decides the fault it names (disk_full); a model's note does not undo either."""
    menu = {
        "type": "object",
        "properties": {
            "root_service": {"type": "string", "enum": ["api", "db", "cache"]},
            "fault": {"type": "string", "enum": ["cpu_saturation", "disk_full", "bad_deploy"]},
        },
    }
    found = [
        Finding(
            text="db.csv is the first to stay out, at 03:29 (latency_ms)",
            region="m",
            relation="neutral",
            by="compare",
        ),
        Finding(
            text="only db's log: disk write failed, upstream api",
            region="m",
            relation="neutral",
            by="compare",
        ),
        Finding(text="changes names db: deploy to api", region="m", relation="neutral", by="compare"),
        Finding(text="api shows cpu at 99%", region="logs/api.txt", relation="support"),
    ]
    props = diagnose.noted_model(menu, found, "x").model_json_schema()["properties"]
    assert props["root_service"].get("enum", [props["root_service"].get("const")]) == ["db"]
    assert props["fault"].get("enum", [props["fault"].get("const")]) == ["disk_full"]
