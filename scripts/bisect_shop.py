"""The shop program of scripts/make_bisect.py: tax and bulk-discount rates, cents, an invoice, shares, tips.

Each program is three modules (a main one the tests call, two helpers it calls) and one test module
whose tests each follow one call path, so that a fault breaks exactly its own test. What a fault and a
harmless edit are, and how the generator checks both, is in scripts/bisect_world.py; the other programs:
bisect_grades.py, bisect_text.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script, `scripts.` still imports

from scripts.bisect_world import Edit, Fault, Program  # noqa: E402

SHOP = Program(
    name="shop",
    files={
        "rates.py": """TAX = {"eu": 0.2, "uk": 0.2, "us": 0.08}
BULK_MIN = 10
BULK_OFF = 0.1


def tax_rate(region):
    if region not in TAX:
        return 0.0
    return TAX[region]


def bulk_discount(qty, price):
    if qty >= BULK_MIN:
        return price * BULK_OFF
    return 0.0


def clamp(value, low, high):
    return max(low, min(value, high))
""",
        "money.py": """def cents(amount):
    return round(amount * 100)


def split(total, parts):
    share = total // parts
    rest = total - share * parts
    return [share + 1 if i < rest else share for i in range(parts)]
""",
        "cart.py": """from money import cents, split
from rates import bulk_discount, clamp, tax_rate


def line_total(qty, price):
    off = bulk_discount(qty, price)
    return qty * (price - off)


def subtotal(items):
    total = 0.0
    for _name, qty, price in items:
        total += line_total(qty, price)
    return total


def invoice_total(items, region):
    net = subtotal(items)
    return cents(net * (1 + tax_rate(region)))


def average_price(items):
    count = sum(qty for _name, qty, _price in items)
    if count == 0:
        return 0.0
    return subtotal(items) / count


def shares(total, people):
    return split(total, people)


def tip(amount, percent):
    rate = clamp(percent, 0, 30) / 100
    return cents(amount * rate)
""",
        "test_cart.py": """import cart

ITEMS = [("pen", 4, 1.5), ("ink", 10, 2.5), ("pad", 1, 3.0)]
SMALL = [("pen", 4, 1.5), ("pad", 2, 3.0)]


def test_invoice_total():
    got = cart.invoice_total(ITEMS, "eu")
    assert got == 3780, f"cart.invoice_total(ITEMS, 'eu') returned {got!r}, expected 3780"


def test_unknown_region_is_untaxed():
    got = cart.invoice_total(SMALL, "mars")
    assert got == 1200, f"cart.invoice_total(SMALL, 'mars') returned {got!r}, expected 1200"


def test_average_price():
    got = cart.average_price(SMALL)
    assert got == 2.0, f"cart.average_price(SMALL) returned {got!r}, expected 2.0"


def test_average_price_of_nothing():
    got = cart.average_price([])
    assert got == 0.0, f"cart.average_price([]) returned {got!r}, expected 0.0"


def test_shares():
    got = cart.shares(3888, 5)
    assert got == [778, 778, 778, 777, 777], f"cart.shares(3888, 5) returned {got!r}"


def test_tip():
    got = cart.tip(50.0, 15)
    assert got == 750, f"cart.tip(50.0, 15) returned {got!r}, expected 750"
    got = cart.tip(50.0, 45)
    assert got == 1500, f"cart.tip(50.0, 45) returned {got!r}, expected 1500"
""",
    },
    test_file="test_cart.py",
    faults=[
        Fault(
            "rates.py",
            "if qty >= BULK_MIN:",
            "if qty > BULK_MIN:",
            "off_by_one",
            "test_invoice_total",
            "bulk discount only above the minimum",
        ),
        Fault(
            "rates.py",
            "    if region not in TAX:\n        return 0.0\n",
            "",
            "removed_guard",
            "test_unknown_region_is_untaxed",
            "drop the region check from tax_rate",
        ),
        Fault(
            "rates.py",
            '"eu": 0.2,',
            '"eu": 0.21,',
            "wrong_constant",
            "test_invoice_total",
            "update the EU tax rate",
        ),
        Fault(
            "rates.py",
            "BULK_OFF = 0.1",
            "BULK_OFF = 0.15",
            "wrong_constant",
            "test_invoice_total",
            "raise the bulk discount",
        ),
        Fault(
            "cart.py",
            "    if count == 0:\n        return 0.0\n",
            "",
            "removed_guard",
            "test_average_price_of_nothing",
            "average_price: drop the empty check",
        ),
        Fault(
            "money.py",
            "if i < rest",
            "if i <= rest",
            "off_by_one",
            "test_shares",
            "give the remainder to the first shares",
        ),
        Fault(
            "money.py",
            "share = total // parts",
            "share = total / parts",
            "wrong_operator",
            "test_shares",
            "split: exact shares",
        ),
        Fault(
            "cart.py",
            "clamp(percent, 0, 30)",
            "clamp(percent, 30, 0)",
            "swapped_arguments",
            "test_tip",
            "tip: clamp the percentage",
        ),
        Fault(
            "cart.py",
            "clamp(percent, 0, 30)",
            "clamp(percent, 0, 40)",
            "wrong_constant",
            "test_tip",
            "allow tips up to 40%",
        ),
        Fault(
            "cart.py",
            "(1 + tax_rate(region))",
            "(1 - tax_rate(region))",
            "wrong_operator",
            "test_invoice_total",
            "invoice_total: apply the tax rate",
        ),
        Fault(
            "cart.py",
            "bulk_discount(qty, price)",
            "bulk_discount(price, qty)",
            "swapped_arguments",
            "test_invoice_total",
            "line_total: pass the discount inputs",
        ),
    ],
    rewrites=[
        Edit(
            "rates.py",
            "    return max(low, min(value, high))",
            "    return min(max(value, low), high)",
            "simplify clamp",
        ),
        Edit(
            "money.py", "    rest = total - share * parts", "    rest = total % parts", "use modulo in split"
        ),
        Edit("cart.py", "    if count == 0:", "    if not count:", "tidy the empty check in average_price"),
        Edit(
            "cart.py",
            "    return split(total, people)",
            "    return list(split(total, people))",
            "shares returns a fresh list",
        ),
        Edit(
            "rates.py",
            "    if region not in TAX:\n        return 0.0\n    return TAX[region]",
            "    return TAX.get(region, 0.0)",
            "refactor: simplify tax_rate",
        ),
        Edit(
            "rates.py",
            "",
            "\n\ndef is_taxed(region):\n    return tax_rate(region) > 0\n",
            "add is_taxed for the checkout page",
        ),
        Edit(
            "money.py",
            "",
            '\n\ndef euros(total):\n    return f"{total // 100}.{total % 100:02d}"\n',
            "add euros() to format cents",
        ),
    ],
    renames=[
        ("cart.py", "subtotal", "total", "running"),
        ("cart.py", "invoice_total", "net", "amount"),
        ("cart.py", "tip", "rate", "share"),
        ("cart.py", "line_total", "off", "discount"),
        ("money.py", "split", "share", "each"),
        ("rates.py", "bulk_discount", "qty", "quantity"),
    ],
    docs={
        ("cart.py", "invoice_total"): "Total in cents, tax included.",
        ("cart.py", "shares"): "Split a total in cents between people.",
        ("cart.py", "tip"): "Tip in cents; the percentage is capped at 30.",
        ("cart.py", "line_total"): "Price of one line after the bulk discount.",
        ("money.py", "split"): "Split total into parts that differ by at most one.",
        ("rates.py", "bulk_discount"): "Discount per unit for large orders.",
        ("rates.py", "clamp"): "Limit value to [low, high].",
    },
)
