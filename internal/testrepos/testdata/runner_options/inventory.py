"""A tiny stock keeper."""
import warnings


def restock(stock, item, n):
    """Add n units of item to stock (a dict) and return the new count."""
    if n <= 0:
        raise ValueError("restock needs a positive count")
    stock[item] = stock.get(item, 0) + n
    return stock[item]


def total(stock):
    """The number of units in stock."""
    count = 0
    for n in stock.values():
        count += n
    return count


def legacy_total(stock):
    """total, under its old name: deprecated."""
    warnings.warn("legacy_total is deprecated; use total", DeprecationWarning, stacklevel=2)
    return total(stock)
