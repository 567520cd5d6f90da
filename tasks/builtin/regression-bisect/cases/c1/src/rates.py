TAX = {"eu": 0.2, "uk": 0.2, "us": 0.08}
BULK_MIN = 10
BULK_OFF = 0.1


def tax_rate(region):
    return TAX.get(region, 0.0)


def bulk_discount(quantity, price):
    if quantity >= BULK_MIN:
        return price * BULK_OFF
    return 0.0


def clamp(value, low, high):
    return min(max(value, low), high)
