"""Fit a line y = a x + b to the training points by gradient descent (seed: a short, cautious descent)."""

LR = 0.05  # step size
STEPS = 30  # descent steps
REG = 0.0  # L2 penalty on the intercept


def fit(xs, ys):
    """The slope, the intercept and the training loss after each step."""
    a = b = 0.0
    n = len(xs)
    curve = []
    for _ in range(STEPS):
        residuals = [a * x + b - y for x, y in zip(xs, ys)]
        grad_a = 2 * sum(r * x for r, x in zip(residuals, xs)) / n
        grad_b = 2 * sum(residuals) / n + 2 * REG * b
        a -= LR * grad_a
        b -= LR * grad_b
        curve.append(sum((a * x + b - y) ** 2 for x, y in zip(xs, ys)) / n)
    return a, b, curve
