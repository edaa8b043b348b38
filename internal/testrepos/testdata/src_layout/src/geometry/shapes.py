def area(width, height):
    if width < 0 or height < 0:
        raise ValueError("negative side")
    return width * height


def perimeter(width, height):
    total = 0
    for side in (width, height, width, height):
        total += side
    return total
