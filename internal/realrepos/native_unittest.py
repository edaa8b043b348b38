"""measure.sh's native unittest run: discovers the tests of the current folder as ndtrace's
unittest runner does (loader.discover(d, top_level_dir=d)), runs the first N, writes JSON."""
import json
import sys
import time
import unittest

out, n = sys.argv[1], int(sys.argv[2])
d = "."
loader = unittest.TestLoader()
suite = loader.discover(d, top_level_dir=d)
tests = []


def walk(s):
    for t in s:
        if isinstance(t, unittest.TestSuite):
            walk(t)
        elif type(t).__name__ != "_FailedTest":
            tests.append(t)


walk(suite)
ids, seen = [], set()
for t in tests:
    if t.id() not in seen:
        seen.add(t.id())
        ids.append(t)
res = {}
for t in ids[:n]:
    r = unittest.TestResult()
    start = time.time()
    t.run(r)
    o = "passed"
    if r.errors:
        o = "error"
    elif r.failures:
        o = "failed"
    elif r.skipped:
        o = "skipped"
    elif r.expectedFailures or r.unexpectedSuccesses:
        o = "xfail"
    res[t.id()] = {"outcome": o, "duration": time.time() - start}
json.dump({"runner": "unittest", "collected": [t.id() for t in ids],
           "run": [t.id() for t in ids[:n]], "results": res}, open(out, "w"))
