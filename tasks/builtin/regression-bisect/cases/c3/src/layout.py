def pad(text, width):
    # keep this in step with the tests
    return text + " " * (width - len(text))


def chunks(items, size):
    return [items[i : i + size] for i in range(0, len(items), size)]
