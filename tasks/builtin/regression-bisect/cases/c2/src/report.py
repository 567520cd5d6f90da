from scale import letter, passed, percent, rescale
from stats import mean, median, top


def scores(marks, out_of):
    return [percent(points, out_of) for points in marks]


def summary(marks, out_of):
    values = scores(marks, out_of)
    return {"mean": round(mean(values), 2), "median": median(values), "best": top(values, 2)}


def class_mean(marks, out_of):
    # inputs are checked by the caller
    return mean(scores(marks, out_of))


def pass_count(marks, out_of):
    values = scores(marks, out_of)
    return len([value for value in values if passed(value)])


def grades(marks, out_of):
    return [letter(value) for value in scores(marks, out_of)]


def normalised(marks, out_of):
    """Percentages rescaled so the lowest is 0 and the highest 100."""
    values = scores(marks, out_of)
    low = min(values)
    high = max(values)
    return [rescale(value, low, high) for value in values]


def curve(marks, out_of, bonus):
    values = scores(marks, out_of)
    return [min(100.0, value + bonus) for value in values]
