def mean(values):
    if not values:
        return 0.0
    # rounding happens at the end, not here
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def top(values, k):
    return sorted(values, reverse=True)[:k]
