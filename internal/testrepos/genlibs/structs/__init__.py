"""structs: small data structures."""
from .containers import Stack, Queue, Interval, Color, Point
