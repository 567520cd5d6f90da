"""The text-processing program of scripts/make_bisect.py: word filters, greedy wrapping, padded tables.

See scripts/bisect_shop.py for the shape every program follows.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, `scripts.` still imports

from scripts.bisect_world import Edit, Fault, Program  # noqa: E402

TEXT = Program(
    name="text",
    files={
        "words.py": """STOP = {"a", "an", "the", "of"}
MIN_LEN = 2


def tokens(text):
    return [word.strip(".,;!?").lower() for word in text.split()]


def keep(word):
    return len(word) >= MIN_LEN and word not in STOP
""",
        "layout.py": """def pad(text, width):
    return text + " " * (width - len(text))


def chunks(items, size):
    return [items[i : i + size] for i in range(0, len(items), size)]
""",
        "textkit.py": """from layout import chunks, pad
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
""",
        "test_textkit.py": """import textkit


def test_keywords():
    got = textkit.keywords("The art of a good test, and the cost of it.")
    want = ["art", "good", "test", "and", "cost", "it"]
    assert got == want, f"textkit.keywords(...) returned {got!r}, expected {want!r}"


def test_counts():
    got = textkit.counts("to be or not to be")
    want = {"to": 2, "be": 2, "or": 1, "not": 1}
    assert got == want, f"textkit.counts('to be or not to be') returned {got!r}, expected {want!r}"


def test_wrap():
    got = textkit.wrap("one two three four five", 9)
    want = ["one two", "three", "four five"]
    assert got == want, f"textkit.wrap('one two three four five', 9) returned {got!r}, expected {want!r}"


def test_table():
    got = textkit.table(["ab", "cde", "f"], 2, 4)
    want = ["ab  |cde ", "f   "]
    assert got == want, f"textkit.table(['ab', 'cde', 'f'], 2, 4) returned {got!r}, expected {want!r}"


def test_first_word():
    assert textkit.first_word("  hello world ") == "hello"
    got = textkit.first_word("")
    assert got == "", f"textkit.first_word('') returned {got!r}, expected ''"


def test_initials():
    got = textkit.initials("ada lovelace")
    assert got == "AL", f"textkit.initials('ada lovelace') returned {got!r}, expected 'AL'"
""",
    },
    test_file="test_textkit.py",
    faults=[
        Fault(
            "words.py",
            "MIN_LEN = 2",
            "MIN_LEN = 3",
            "wrong_constant",
            "test_keywords",
            "skip two-letter words",
        ),
        Fault(
            "words.py",
            "len(word) >= MIN_LEN",
            "len(word) > MIN_LEN",
            "off_by_one",
            "test_keywords",
            "keep: compare lengths strictly",
        ),
        Fault(
            "textkit.py",
            "seen.get(word, 0) + 1",
            "seen.get(word, 1) + 1",
            "wrong_constant",
            "test_counts",
            "counts: default for unseen words",
        ),
        Fault(
            "textkit.py",
            "len(word) > width",
            "len(word) >= width",
            "off_by_one",
            "test_wrap",
            "wrap: break before the line is full",
        ),
        Fault(
            "textkit.py",
            "len(line) + 1 + len(word)",
            "len(line) + len(word)",
            "off_by_one",
            "test_wrap",
            "wrap: measure the joined line",
        ),
        Fault(
            "textkit.py",
            "chunks(words, columns)",
            "chunks(columns, words)",
            "swapped_arguments",
            "test_table",
            "table: chunk the words",
        ),
        Fault(
            "layout.py",
            "range(0, len(items), size)",
            "range(0, len(items) - 1, size)",
            "off_by_one",
            "test_table",
            "chunks: stop at the last item",
        ),
        Fault(
            "layout.py",
            "(width - len(text))",
            "(width - len(text) - 1)",
            "off_by_one",
            "test_table",
            "pad: leave room for the separator",
        ),
        Fault(
            "textkit.py",
            '    if not parts:\n        return ""\n',
            "",
            "removed_guard",
            "test_first_word",
            "first_word: the text is never blank",
        ),
        Fault(
            "textkit.py",
            "part[0].upper()",
            "part[1].upper()",
            "off_by_one",
            "test_initials",
            "initials: index the letter",
        ),
        Fault(
            "textkit.py",
            "len(line) + 1 + len(word)",
            "len(line) + 1 - len(word)",
            "wrong_operator",
            "test_wrap",
            "wrap: count the space",
        ),
    ],
    rewrites=[
        Edit(
            "textkit.py",
            "    if line:\n        lines.append(line)",
            '    if line != "":\n        lines.append(line)',
            "wrap: explicit check for the last line",
        ),
        Edit("textkit.py", "    seen = {}\n", "    seen = dict()\n", "counts: construct the dict"),
        Edit(
            "layout.py",
            '    return text + " " * (width - len(text))',
            "    return text.ljust(width)",
            "pad with ljust",
        ),
        Edit(
            "words.py",
            "    return len(word) >= MIN_LEN and word not in STOP",
            "    return word not in STOP and len(word) >= MIN_LEN",
            "keep: check the stop list first",
        ),
        Edit(
            "textkit.py",
            '    return "".join(part[0].upper() for part in name.split())',
            '    return "".join(part[:1].upper() for part in name.split())',
            "initials: slice the letter",
        ),
        Edit(
            "words.py",
            "",
            '\n\ndef sentence_count(text):\n    return sum(text.count(mark) for mark in ".!?")\n',
            "add sentence_count",
        ),
        Edit(
            "layout.py", "", "\n\ndef center(text, width):\n    return text.center(width)\n", "add center()"
        ),
    ],
    renames=[
        ("textkit.py", "wrap", "line", "current"),
        ("textkit.py", "counts", "seen", "tally"),
        ("textkit.py", "table", "rows", "grid"),
        ("textkit.py", "first_word", "parts", "pieces"),
        ("layout.py", "chunks", "size", "step"),
        ("words.py", "tokens", "word", "token"),
    ],
    docs={
        ("textkit.py", "wrap"): "Greedy wrap: lines at most width characters, words kept whole.",
        ("textkit.py", "table"): "Rows of columns words, each padded to width, joined by '|'.",
        ("textkit.py", "keywords"): "Lower-case words that are long enough and not stop words.",
        ("layout.py", "chunks"): "Consecutive slices of at most size items.",
        ("words.py", "keep"): "Whether a token counts as a keyword.",
    },
)
