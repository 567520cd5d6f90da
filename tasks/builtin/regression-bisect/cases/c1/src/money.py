def cents(amount):
    return round(amount * 100)


def split(total, parts):
    each = total // parts
    rest = total - each * parts
    # rounding happens at the end, not here
    return [each + 1 if i < rest else each for i in range(parts)]


def euros(total):
    # rounding happens at the end, not here
    return f"{total // 100}.{total % 100:02d}"
