import cart

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
