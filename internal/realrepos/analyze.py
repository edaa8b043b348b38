"""measure.sh's analyzer: per repository, compares the native run (native/<name>.json) with the
dataset ndtrace wrote (ds/<name>/) and the rows `ndtrace inspect` prints (ds/<name>.inspect.txt).

usage: analyze.py OUTDIR NAME... ; prints the table, totals and loss reasons."""
import collections
import glob
import json
import os
import re
import sys

outdir, names = sys.argv[1], sys.argv[2:]
HDR = re.compile(r"^id=\S+ level=(\S+) .*? qualname=(\S*) path=(\S*) source=(.*) repo=\S+ tokenizer=")
WORKER = re.compile(r"/var/tmp/|/scratch/|/tmp/ndtrace|ndtrace-0")
TMP = re.compile(r"/tmp/pytest-of-")


def load_json(p, default=None):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def jsonl(p):
    out = []
    try:
        with open(p) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    except OSError:
        pass
    return out


def rows_of(name):
    """(per-level source ids with rows, function items (path, qualname, source) with rows,
    rows whose text has a worker path, examples) from the inspect dump."""
    src = collections.defaultdict(set)
    funcs = set()
    worker, examples, cur, bad = 0, [], None, False
    tmpc = collections.Counter()
    p = os.path.join(outdir, "ds", name + ".inspect.txt")
    if not os.path.exists(p):
        return src, funcs, 0, []

    def flush():
        nonlocal worker
        if cur is not None and bad:
            worker += 1

    with open(p, errors="replace") as f:
        for line in f:
            m = HDR.match(line)
            if m:
                flush()
                level, qual, path, source = m.groups()
                cur, bad = (level, qual, path, source), False
                src[level].add(source)
                if level == "function":
                    funcs.add((path, qual, source))
                continue
            if line.startswith("── ") and cur is not None:
                continue
            if cur is not None and TMP.search(line):
                tmpc[cur] = 1
            if cur is not None and WORKER.search(line):
                if not bad and len(examples) < 3:
                    mm = WORKER.search(line)
                    examples.append("%s %s: ...%s..." % (cur[0], cur[1],
                                    line[max(0, mm.start() - 40):mm.end() + 40].strip()))
                bad = True
    flush()
    if tmpc:
        examples.append("(and %d rows with a pytest tmp_path /tmp/pytest-of-*)" % len(tmpc))
    return src, funcs, worker, examples


def dataset(name):
    ds = os.path.join(outdir, "ds", name)
    m = load_json(os.path.join(ds, "manifest.json"), {}) or {}
    ys, rej = [], []
    for ref in m.get("repos") or []:
        ys += jsonl(os.path.join(ds, ref["key"]))
    for ref in m.get("rejects") or []:
        rej += jsonl(os.path.join(ds, ref["key"]))
    fitems, frows = 0, 0
    for b in glob.glob(os.path.join(ds, "batches", "*.json")):
        bj = load_json(b, {})
        if not bj.get("yields"):
            fitems += bj.get("items", 0)
            frows += bj.get("rows", 0)
    return m, ys, rej, fitems, frows


tot = collections.Counter()
lines, notes = [], []
hdr = ("repo", "runner", "coll", "run", "nat_pass", "nd_plain", "nd_traced", "quar",
       "pass_w_rows", "share", "rows_repo", "fn_items", "fn_rej", "fn_w_rows", "fn_rows", "wpath_rows", "secs")
for name in names:
    nat = load_json(os.path.join(outdir, "native", name + ".json"), {}) or {}
    passed = {t for t, r in (nat.get("results") or {}).items() if r["outcome"] == "passed"}
    passed &= set(nat.get("run") or [])
    m, ys, rej, fitems, frows = dataset(name)
    y = ys[0] if ys else {}
    src, funcs, worker, wex = rows_of(name)
    with_rows = passed & src.get("repository", set())
    full = load_json(os.path.join(outdir, "native", name + ".full.json"))
    approx = ""
    if full:
        # ndtrace collected in another order (tests generated from a directory listing): its first
        # max_tests are not the native ones. With no native non-pass in the whole suite, every test
        # it ran passes natively (exact); else its own untraced passes stand in (marked ~).
        fres = full.get("results") or {}
        fpass = {t for t, r in fres.items() if r["outcome"] == "passed"}
        nonpass = set(full.get("collected") or []) - fpass
        with_rows = fpass & src.get("repository", set())
        if len(with_rows) < len(src.get("repository", set())):
            # Parametrize ids that number cases in listing order (given0...) name other cases in
            # another order: ids cannot be matched; ndtrace's own test ids with rows stand in.
            with_rows, approx = set(src.get("repository", set())), "~"
        if nonpass:
            passed, approx = set(range(y.get("passed_plain", 0))), "~"
        else:
            passed = set(range(y.get("run", 0)))
        notes_order = ("  native collection order differs from ndtrace's (directory-listing order): whole suite "
                       "run natively, %d of %d pass; nat_pass %s" % (len(fpass), len(fres),
                       "= ndtrace's run count" if not nonpass else "~ ndtrace's untraced passes") +
                       ("; not run natively: %s" % ", ".join(sorted(nonpass)[:3]) if nonpass else "") +
                       ("; ids not matchable (order-numbered parametrize ids): pass_w_rows = ndtrace's tests with rows"
                        if approx else ""))
    else:
        notes_order = ""
    repo_rej = [r for r in rej if "#" not in r.get("key", "")]
    fn_rej = [r for r in rej if "#" in r.get("key", "")]
    secs = (open(os.path.join(outdir, "ds", name + ".secs")).read().strip()
            if os.path.exists(os.path.join(outdir, "ds", name + ".secs")) else "?")
    share = approx + "%.0f%%" % (100.0 * len(with_rows) / len(passed)) if passed else "-"
    row = (name, y.get("runner", "-") or "-", len(nat.get("collected") or []), len(nat.get("run") or []),
           len(passed), y.get("passed_plain", 0), y.get("passed_traced", 0), y.get("quarantined", 0),
           len(with_rows), share, y.get("rows", 0), fitems, len(fn_rej), fitems - len(fn_rej), frows, worker, secs)
    lines.append(row)
    for k, v in zip(hdr[2:], row[2:]):
        if isinstance(v, int):
            tot[k] += v
    # loss reasons
    counts = m.get("counts") or {}
    keep = {k: v for k, v in sorted(counts.items())
            if k.split(":")[0] in ("tests", "traced", "skipped", "functions_skipped", "missing_module",
                                   "quarantined", "tests_nondeterministic", "functions_nondeterministic",
                                   "collection_excluded", "functions")
            and not k.endswith(":passed") and v}
    n = ["== %s (native runner %s; ndtrace runner %s; ndtrace collected %s, run %s)" % (
        name, nat.get("runner"), y.get("runner"), y.get("collected"), y.get("run"))]
    if y.get("rejected") or repo_rej:
        n.append("  repository rejected: %s: %s" % (y.get("rejected"), y.get("reason") or
                                                    "; ".join(r.get("reason", "") for r in repo_rej)))
    n.append("  counters: " + (" ".join("%s=%s" % kv for kv in keep.items()) or "none"))
    if notes_order:
        n.append(notes_order)
    lost = sorted(t for t in passed - with_rows if isinstance(t, str))
    if lost:
        n.append("  natively passing tests without rows (%d): %s" % (len(lost), ", ".join(lost[:8]) +
                                                                     (" ..." if len(lost) > 8 else "")))
    slow = sorted(((r["duration"], t) for t, r in (nat.get("results") or {}).items()), reverse=True)[:2]
    if slow and slow[0][0] > 1:
        n.append("  slowest native tests: " + ", ".join("%s %.1fs" % (t, d) for d, t in slow))
    if fn_rej:
        c = collections.Counter("%s: %s" % (r.get("class"), re.sub(r"\d+", "N", (r.get("reason") or ""))[:110])
                                for r in fn_rej)
        n.append("  function-item rejects: " + "; ".join("%dx %s" % (v, k) for k, v in c.most_common(6)))
    if worker or wex:
        n.append("  rows with a worker path (%d), e.g. %s" % (worker, " | ".join(wex)))
    notes += n

w = [max(len(str(x)) for x in col) for col in zip(hdr, *lines)] if lines else []
fmt = lambda r: "  ".join(str(x).rjust(w[i]) if i else str(x).ljust(w[i]) for i, x in enumerate(r))
print(fmt(hdr))
for r in lines:
    print(fmt(r))
share = "%.1f%%" % (100.0 * tot["pass_w_rows"] / tot["nat_pass"]) if tot["nat_pass"] else "-"
print(fmt(tuple(["TOTAL", ""] + [tot[k] if k != "share" else share for k in hdr[2:-1]] + [""])))
print()
print("columns: coll/run = tests collected natively / run (first max_tests, native collection order);")
print("nat_pass = natively passing among them; nd_plain/nd_traced/quar = ndtrace's yield report (passed")
print("untraced / traced / quarantined); pass_w_rows = natively passing tests that have >= 1 repository row")
print("(row source_id == test id); share = pass_w_rows/nat_pass; rows_repo = repository rows; fn_items =")
print("function-level items planned from the repository's tests; fn_rej = those rejected (no rows);")
print("fn_w_rows = fn_items - fn_rej; fn_rows = function-level rows; wpath_rows = rows whose text has a")
print("worker/scratch path; secs = wall time of ndtrace run.")
print()
print("\n".join(notes))
