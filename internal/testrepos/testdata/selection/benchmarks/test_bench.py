import time

from shapes import stress


def test_bench_stress():
    time.sleep(3600)  # outside testpaths: never collected by the repository's own configuration
    assert stress(10**9) > 0
