"""Ridge regression of a target on eight features, one penalty per feature (seed: heavy penalties)."""

PENALTY_SIZE = 64.0  # each penalty is added to its feature's diagonal entry of X'X
PENALTY_AGE = 64.0
PENALTY_ROOMS = 64.0
PENALTY_DISTANCE = 64.0
PENALTY_NOISE = 64.0
PENALTY_LIGHT = 64.0
PENALTY_FLOOR = 64.0
PENALTY_VIEW = 64.0
PIVOT_EPS = 1e-12  # a pivot smaller than this is treated as zero
MAX_COEF = 1e6  # every coefficient is clipped to [-MAX_COEF, MAX_COEF]


def fit(rows, targets):
    """(intercept, coefficients) of the ridge fit of `targets` on `rows` (lists of eight floats)."""
    penalties = [PENALTY_SIZE, PENALTY_AGE, PENALTY_ROOMS, PENALTY_DISTANCE]
    penalties += [PENALTY_NOISE, PENALTY_LIGHT, PENALTY_FLOOR, PENALTY_VIEW]
    n, k = len(rows), len(penalties)
    means = [sum(r[j] for r in rows) / n for j in range(k)]
    mean_y = sum(targets) / n
    xs = [[r[j] - means[j] for j in range(k)] for r in rows]
    m = [
        [sum(x[i] * x[j] for x in xs) + (penalties[i] if i == j else 0.0) for j in range(k)] for i in range(k)
    ]
    for i in range(k):  # the right-hand side as a last column; Gaussian elimination, partial pivoting
        m[i].append(sum(x[i] * (y - mean_y) for x, y in zip(xs, targets)))
    for col in range(k):
        p = max(range(col, k), key=lambda r: abs(m[r][col]))
        m[col], m[p] = m[p], m[col]
        if abs(m[col][col]) >= PIVOT_EPS:
            for r in range(k):
                if r != col:
                    m[r] = [a - m[r][col] / m[col][col] * b for a, b in zip(m[r], m[col])]
    coefs = [m[i][k] / m[i][i] if abs(m[i][i]) >= PIVOT_EPS else 0.0 for i in range(k)]
    coefs = [max(-MAX_COEF, min(MAX_COEF, c)) for c in coefs]
    return mean_y - sum(c * mu for c, mu in zip(coefs, means)), coefs
