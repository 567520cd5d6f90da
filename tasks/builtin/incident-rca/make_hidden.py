"""Builds incident-rca's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never grader/.

The grader (which holds the salt) and the salted digests of the truth, as scripts/make_incidents.py wrote them.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Grades answer.json of the incident-rca case against the hidden truth and writes result.json.

truth.json holds salted sha256 digests of "incident:service" and "incident:fault", never the values; the
salt lives here only. score = mean over incidents of 0.5 * (root service right) + 0.5 * (fault right).
An answer that does not follow answer_schema.json (read from the working copy, where the sandbox has just
re-copied it) is invalid, with a message that says where it breaks and what to fix. Standard library only.
"""

import hashlib
import json
from pathlib import Path

SALT = "9cdc11ffde30d4ce884fae39"


def digest(incident: str, value: str) -> str:
    return hashlib.sha256(f"{SALT}:{incident}:{value}".encode()).hexdigest()


def problem(value: object, schema: dict, where: str) -> str:
    """Why value breaks schema (the subset answer_schema.json uses), or an empty string."""
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {value!r} is not one of {', '.join(map(str, schema['enum']))}"
    kind, items = schema.get("type"), []
    if kind == "object":
        if not isinstance(value, dict):
            return f"{where}: expected an object"
        missing = [k for k in schema.get("required", []) if k not in value]
        if missing:
            return f"{where}: missing {', '.join(missing)}; add them"
        unknown = [k for k in value if k not in schema.get("properties", {})]
        if unknown:
            return f"{where}: unknown {', '.join(map(str, unknown))}; keep only {', '.join(schema['properties'])}"
        items = [(value[k], schema["properties"][k], f"{where}.{k}") for k in value]
    elif kind == "array":
        if not isinstance(value, list) or len(value) > schema.get("maxItems", len(value)):
            return f"{where}: expected a list of at most {schema.get('maxItems')} items"
        items = [(v, schema["items"], f"{where}[{i}]") for i, v in enumerate(value)]
    elif kind == "string" and not (
        isinstance(value, str) and len(value) <= schema.get("maxLength", len(value))
    ):
        return f"{where}: expected a string of at most {schema.get('maxLength')} characters"
    return next((why for why in (problem(*item) for item in items) if why), "")


def grade() -> tuple[str, dict[str, float]]:
    """(why the answer is invalid, or ""; per incident 1.0/0.0 for root service and fault)."""
    try:
        answer = json.loads(Path("answer.json").read_text())
    except FileNotFoundError:
        return "answer.json is missing; write it as answer_schema.json states", {}
    except (ValueError, UnicodeDecodeError) as e:
        return f"answer.json is not valid JSON ({e}); write one JSON object as answer_schema.json states", {}
    why = problem(answer, json.loads(Path("answer_schema.json").read_text()), "answer.json")
    if why:
        return why, {}
    metrics = {}
    for incident, truth in sorted(json.loads(Path("grader/truth.json").read_text()).items()):
        for key in ("root_service", "fault"):
            right = digest(incident, answer["incidents"][incident][key]) == truth[key]
            metrics[f"{incident}_{key}"] = float(right)
    return "", metrics


def main() -> None:
    Path("result.json").unlink(missing_ok=True)
    why, metrics = grade()
    if why:
        result = {"score": None, "valid": False, "metrics": {}, "message": why}
    else:
        score = sum(metrics.values()) / len(metrics)  # two 0/1 entries per incident, each worth half
        n = len(metrics) // 2
        roots = sum(v for k, v in metrics.items() if k.endswith("_root_service"))
        faults = sum(v for k, v in metrics.items() if k.endswith("_fault"))
        message = f"{roots:.0f}/{n} root services and {faults:.0f}/{n} faults right"
        result = {
            "score": score,
            "valid": True,
            "metrics": {**metrics, "rca_score": score},
            "message": message,
        }
    Path("result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
'''

TRUTH_JSON = """\
{
  "i1": {
    "root_service": "2e5ddc587951e08be9097a92300c7a78f9c863cf40af331b5990bb882d7e09ce",
    "fault": "0c392103ff799ab60d053df9791513b90fd880422331431f33d43a490892fdf5"
  },
  "i2": {
    "root_service": "02999eba9843fc59daff30d8794c91795e8028e67ef09cb2fd61cc5681e17d05",
    "fault": "63c3896f2145e4af058e3f8119d2be202643e48c4c1bb725e8fd8cdde1875d8e"
  },
  "i3": {
    "root_service": "f5fbc58ee8d0b4a7ebe19ef62d32e528ee02f651b9bac2d4b49d0864325d7eb3",
    "fault": "6f5aa8756a76bc1009a34d2bd1aba49a21857db3bb7dc4cca671a1508a0da06c"
  },
  "i4": {
    "root_service": "35ebb6512415ec648fdd224c80a9de8ed40e4a5a312d3b8b7cfc1becb10fadfc",
    "fault": "3fcec545a67690b921a1cc61faeb058d51fca519a9074025531dfd93351a57b3"
  }
}
"""

DIGESTS = {
    "grader/test.py": "189723a56ff3e42c6636e861a5013f378cf3dc5a9b017f5ee6c68ad64699810d",
    "grader/truth.json": "e58602843879e6088a05dad94e7aee3740c64688611d5c24c16d2e62481acf60",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
    (dest / "grader" / "truth.json").write_text(TRUTH_JSON)
