from fixture_a import answer


def score(bonus):
    total = answer()
    if bonus > 0:
        total += bonus
    return total


def scores(bonuses):
    return [score(b) for b in bonuses]
