def mean(values):
    if not values:
        return 0.0
    return sum(values) / len(values)


def median(values):
    ranked = sorted(values)
    mid = len(ranked) // 2
    if len(ranked) % 2 == 1:
        return ranked[mid]
    return (ranked[mid - 1] + ranked[mid]) / 2


def top(values, k):
    return sorted(values, reverse=True)[:k]
