"""pytest plugin for measure.sh: records the collected node ids (in collection order, after the
repository's own modifyitems hooks), keeps only the first MEASURE_MAX of them, and records each
kept test's outcome (passed only when setup, call and teardown all passed) to MEASURE_OUT."""
import json
import os

import pytest

_out = os.environ["MEASURE_OUT"]
_max = int(os.environ.get("MEASURE_MAX", "40"))
_res = {}
_collected = []


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    seen = set()
    for it in items:
        if it.nodeid not in seen:
            seen.add(it.nodeid)
            _collected.append(it.nodeid)
    keep = set(_collected[:_max])
    kept = [it for it in items if it.nodeid in keep]
    items[:] = kept


def pytest_runtest_logreport(report):
    r = _res.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0})
    r["duration"] += getattr(report, "duration", 0.0) or 0.0
    if report.failed:
        r["outcome"] = "failed" if report.when == "call" else "error"
    elif report.skipped and r["outcome"] == "passed":
        r["outcome"] = "skipped"


def pytest_sessionfinish(session, exitstatus):
    with open(_out, "w") as f:
        json.dump({"runner": "pytest", "collected": _collected,
                   "run": _collected[:_max], "results": _res}, f)
