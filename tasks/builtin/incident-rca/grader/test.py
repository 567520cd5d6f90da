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
