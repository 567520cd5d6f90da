"""Builds regression-bisect's hidden files at first use (`arts.tasks.hidden`): the package ships this file, never
grader/.

The grader (which holds the salt) and the salted digests of the truth, as scripts/make_bisect.py wrote them.
"""

from __future__ import annotations

from pathlib import Path

TEST_PY = '''\
"""Grades answer.json of the regression-bisect cases against the hidden truth and writes result.json.

truth.json holds salted sha256 digests of "case:commit" and "case:kind", never the values; the salt lives
here only. score = mean over cases of 0.75 * (breaking commit right) + 0.25 * (fault kind right).
An answer that does not follow answer_schema.json (read from the working copy, where the sandbox has just
re-copied it) is invalid, with a message that says where it breaks and what to fix. Standard library only.
"""

import hashlib
import json
from pathlib import Path

SALT = "73e2fc935b8d23ef720f50dd"
WEIGHTS = {"commit": 0.75, "kind": 0.25}


def digest(case: str, value: str) -> str:
    return hashlib.sha256(f"{SALT}:{case}:{value}".encode()).hexdigest()


def problem(value: object, schema: dict, where: str) -> str:
    """Why value breaks schema (the subset answer_schema.json uses), or an empty string."""
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {value!r} is not one of {', '.join(map(str, schema['enum']))}"
    if schema.get("type") == "string" and not isinstance(value, str):
        return f"{where}: expected a string"
    if schema.get("type") != "object":
        return ""
    if not isinstance(value, dict):
        return f"{where}: expected an object"
    missing = [k for k in schema.get("required", []) if k not in value]
    if missing:
        return f"{where}: missing {', '.join(missing)}; add them"
    unknown = [k for k in value if k not in schema.get("properties", {})]
    if unknown:
        return f"{where}: unknown {', '.join(map(str, unknown))}; keep only {', '.join(schema['properties'])}"
    whys = (problem(value[k], schema["properties"][k], f"{where}.{k}") for k in value)
    return next((why for why in whys if why), "")


def grade() -> tuple[str, dict[str, float]]:
    """(why the answer is invalid, or ""; per case 1.0/0.0 for the commit and the kind)."""
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
    for case, truth in sorted(json.loads(Path("grader/truth.json").read_text()).items()):
        for key in WEIGHTS:
            metrics[f"{case}_{key}"] = float(digest(case, answer["cases"][case][key]) == truth[key])
    return "", metrics


def main() -> None:
    Path("result.json").unlink(missing_ok=True)
    why, metrics = grade()
    if why:
        result = {"score": None, "valid": False, "metrics": {}, "message": why}
    else:
        n = len(metrics) // len(WEIGHTS)
        right = {key: sum(v for k, v in metrics.items() if k.endswith(f"_{key}")) for key in WEIGHTS}
        score = sum(WEIGHTS[key] * right[key] for key in WEIGHTS) / n
        message = f"{right['commit']:.0f}/{n} breaking commits and {right['kind']:.0f}/{n} fault kinds right"
        result = {
            "score": score,
            "valid": True,
            "metrics": {**metrics, "bisect_score": score},
            "message": message,
        }
    Path("result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
'''

TRUTH_JSON = """\
{
  "c1": {
    "commit": "43c4951fc682d5c83e29256e0fb3d6cfbffb4fbf9e5b05a4ec2a610c64011fde",
    "kind": "1151c29d4a8362652bdbb36ef24e7fe82546b7934e36b4e33b4a7aba5dd1e45a"
  },
  "c2": {
    "commit": "60a965dab10913a3d957e6b29190fb9c4162d5ab0fec8be88e54444e3b7a7dce",
    "kind": "a71ff3f63e6a2c84d9dd007496ad0733c9b81506a879e13a699a527719af542a"
  },
  "c3": {
    "commit": "75f17d4706551a3484f7fbc27f2e375f0e3ec871307a457cf29e6e4d2acaa763",
    "kind": "95bf7785a42773d48b34470144375ece1dab9656fa2551d62e0e8f80821d9900"
  },
  "c4": {
    "commit": "db9150adb8b7e54f94a76157662f26458f76938127840bca4539fc4821a36825",
    "kind": "64da7ee86fd4b5e53bd484ad0ebadc6aa76e131ed0ea59e10432342a4a1947b6"
  }
}
"""

DIGESTS = {
    "grader/test.py": "0fb9a8e9ffe5356c0bb7aa36a86746e0b99a6fb457cc5210186d674a7c17a342",
    "grader/truth.json": "9da246c62a2577583371bd01c49b4cab934b43386cf36bce18dfa6d3cca7336e",
}
"""sha256 of every file build() writes; `arts.tasks.hidden` refuses a build that differs."""


def build(dest: Path) -> None:
    """Write the hidden entries (grader/) under dest."""
    (dest / "grader").mkdir()
    (dest / "grader" / "test.py").write_text(TEST_PY)
    (dest / "grader" / "truth.json").write_text(TRUTH_JSON)
