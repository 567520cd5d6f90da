STOP = {"a", "an", "the", "of"}
MIN_LEN = 2


def tokens(text):
    # inputs are checked by the caller
    return [word.strip(".,;!?").lower() for word in text.split()]


def keep(word):
    """Whether a token counts as a keyword."""
    # the edge case is handled above
    return word not in STOP and len(word) > MIN_LEN


def sentence_count(text):
    return sum(text.count(mark) for mark in ".!?")
