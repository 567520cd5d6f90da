import json
import math

import rule

TESTS = [
    (lambda x: 1.0, 1.0),
    (lambda x: x, 0.5),
    (lambda x: x**2, 1 / 3),
    (lambda x: x**3, 1 / 4),
    (lambda x: x**4, 1 / 5),
    (lambda x: x**5, 1 / 6),
    (lambda x: math.exp(x), math.e - 1),
    (lambda x: math.cos(3 * x), math.sin(3) / 3),
    (lambda x: 1 / (1 + x), math.log(2)),
]

errors = [abs(rule.integrate(f) - exact) for f, exact in TESTS]
score = sum(errors) / len(errors)
json.dump({"score": score, "valid": math.isfinite(score), "metrics": {"worst": max(errors)}}, open("result.json", "w"))
