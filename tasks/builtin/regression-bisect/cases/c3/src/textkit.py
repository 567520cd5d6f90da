from layout import chunks, pad
from words import keep, tokens


def keywords(text):
    return [word for word in tokens(text) if keep(word)]


def counts(text):
    seen = {}
    for word in text.split():
        seen[word] = seen.get(word, 0) + 1
    return seen


def wrap(text, width):
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def table(words, columns, width):
    rows = chunks(words, columns)
    return ["|".join(pad(word, width) for word in row) for row in rows]


def first_word(text):
    parts = text.split()
    if not parts:
        return ""
    return parts[0]


def initials(name):
    return "".join(part[0].upper() for part in name.split())
