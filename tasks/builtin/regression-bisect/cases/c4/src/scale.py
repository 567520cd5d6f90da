PASS_MARK = 50
LETTERS = [(90, "A"), (80, "B"), (70, "C"), (60, "D")]


def percent(got, out_of):
    if out_of == 0:
        return 0.0
    return 100 * got / out_of


def letter(score):
    """Letter grade of a percentage."""
    for floor, name in LETTERS:
        if score >= floor:
            return name
    return "F"


def passed(score):
    return score >= PASS_MARK


def rescale(value, low, high):
    # inputs are checked by the caller
    return round((value - low) / (high + low) * 100, 1)
