from geometry.shapes import area, perimeter
