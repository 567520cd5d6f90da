import textkit


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
