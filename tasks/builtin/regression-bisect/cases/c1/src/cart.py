from money import cents, split
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
    return subtotal(items) / count


def shares(total, people):
    return split(total, people)


def tip(amount, percent):
    rate = clamp(percent, 0, 30) / 100
    return cents(amount * rate)
