"""Yield of the input generator (sandbox/tracer/generate.py) on folders of Python modules.

Not part of the tracer: a development harness (stdlib only) that runs the generator with plain
python3 outside the sandbox, one subprocess per module (find) and per function (generate), and
prints per library: functions found, units, units with >= 1 kept input, median line coverage of
those by their kept inputs, losses by reason, inputs by source, and time per function.

It runs the libraries' code: run it as an unprivileged user without network, e.g. as root

    unshare -n setpriv --reuid=10001 --regid=10001 --clear-groups \\
        python3 internal/genyield/harness.py ROOT[:PKG] ...

ROOT is an import root (the folder put on sys.path); PKG, when given, limits the modules to
that package or module (ROOT/PKG, ROOT/PKG.py); without it every module under ROOT is taken.
Tests, setup.py, docs, examples and conftest.py are never taken.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATE = os.path.normpath(os.path.join(HERE, "..", "..", "sandbox", "tracer", "generate.py"))
GENERATE_USED = [GENERATE]
SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
             "bench", "build", "dist", ".git", "__pycache__", "scripts", "tools", "utils",
             "perf", "extra", "bin"}


def worker():
    """One request: JSON on stdin {generate, root, module, filename, req}; result on stdout."""
    job = json.load(sys.stdin)
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # as the sandbox's limits would
    ns = {"__name__": "_gen_standalone"}
    with open(job["generate"]) as f:
        exec(compile(f.read(), job["generate"], "exec"), ns)
    root, module, filename = job["root"], job["module"], job["filename"]
    sys.path.insert(0, root)
    # the result goes out on a private copy of fd 1; whatever the module writes to fd 1 is lost
    out_fd = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    real_stdout = os.fdopen(out_fd, "w")

    def load_module():
        if module:
            import importlib
            return importlib.import_module(module)
        import types
        m = types.ModuleType("__gen_module__")
        m.__file__ = filename
        sys.modules["__gen_module__"] = m
        exec(compile(job["req"]["code"], filename, "exec"), m.__dict__)
        return m

    t0 = time.monotonic()
    res = ns["_gen_main"](job["req"], load_module)
    res["_wall"] = time.monotonic() - t0
    real_stdout.write(json.dumps(res))
    real_stdout.flush()
    os._exit(0)


def modules(spec):
    root, _, pkg = spec.partition(":")
    root = os.path.abspath(root)
    out = []
    starts = [root]
    if pkg:
        p = os.path.join(root, *pkg.split("."))
        starts = [p] if os.path.isdir(p) else []
        if os.path.isfile(p + ".py"):
            out.append((root, pkg, p + ".py"))
    for start in starts:
        for d, dirs, files in os.walk(start):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
            if d != root and not os.path.isfile(os.path.join(d, "__init__.py")):
                dirs[:] = []
                continue
            for f in sorted(files):
                if not f.endswith(".py") or f in ("setup.py", "conftest.py") or \
                        f.startswith("test_") or f.endswith("_test.py"):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                if not rel:
                    continue
                out.append((root, ".".join(rel), os.path.join(d, f)))
    return out


def call(root, module, filename, req, timeout):
    job = {"generate": GENERATE_USED[0], "root": root, "module": module, "filename": filename,
           "req": req}
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-s", "-B", os.path.abspath(__file__), "--worker"],
                           input=json.dumps(job), capture_output=True, text=True,
                           timeout=timeout, env=env, cwd="/tmp")
        res = json.loads(p.stdout) if p.stdout.strip() else {
            "status": "crash", "detail": p.stderr[-300:]}
    except subprocess.TimeoutExpired:
        res = {"status": "killed"}
    except ValueError:
        res = {"status": "crash", "detail": "bad json"}
    res["_elapsed"] = time.monotonic() - t0
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", help="ROOT[:PKG] (an import root and a package in it)")
    ap.add_argument("--per-function", type=int, default=4)
    ap.add_argument("--attempts", type=int, default=200)
    ap.add_argument("--budget", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--standalone", action="store_true",
                    help="run each file as a standalone module instead of importing it")
    ap.add_argument("--json", help="write every unit's result to this file (JSON lines)")
    ap.add_argument("--only", help="only this qualname (debugging)")
    ap.add_argument("--generate", default=GENERATE, help="the engine's file (default: the tracer's)")
    a = ap.parse_args()
    GENERATE_USED[0] = os.path.abspath(a.generate)
    jl = open(a.json, "w") if a.json else None
    for spec in a.specs:
        mods = modules(spec)
        found, units, with_input, covs, losses, sources, times, inputs = 0, 0, 0, [], {}, {}, [], 0
        t_lib = time.monotonic()
        jobs = []
        for root, module, filename in mods:
            with open(filename, encoding="utf-8", errors="replace") as f:
                code = f.read()
            base = {"code": code, "filename": filename, "per_function": a.per_function,
                    "attempts": a.attempts, "seeds": [], "seed": a.seed, "budget_s": a.budget}
            mname = "" if a.standalone else module
            r = call(root, mname, filename, dict(base, function=""), a.budget + 5)
            if r.get("status") != "ok":
                key = "missing_module" if r.get("missing_module") else \
                    "import_" + str(r.get("status"))
                losses[key] = losses.get(key, 0) + 1
                continue
            for fn in r.get("functions") or []:
                found += 1
                if fn.get("skip"):
                    losses[fn["skip"]] = losses.get(fn["skip"], 0) + 1
                    continue
                if a.only and fn["qualname"] != a.only:
                    continue
                units += 1
                jobs.append((root, mname, filename, dict(base, function=fn["qualname"]),
                             module))

        def one(j):
            root, mname, filename, req, module = j
            return j, call(root, mname, filename, req, a.budget + 5)
        with ThreadPoolExecutor(max(1, a.jobs)) as ex:
            for (root, mname, filename, req, module), r in ex.map(one, jobs):
                times.append(r.get("_elapsed", 0))
                ins = r.get("inputs") or []
                lines = set(r.get("lines") or [])
                if ins:
                    with_input += 1
                    inputs += len(ins)
                    got = set()
                    for i in ins:
                        got |= set(i.get("lines") or [])
                        sources[i.get("source")] = sources.get(i.get("source"), 0) + 1
                    covs.append(100.0 * len(got & lines) / len(lines) if lines else 100.0)
                else:
                    why = r.get("reason") or "status_" + str(r.get("status"))
                    losses[why] = losses.get(why, 0) + 1
                if jl:
                    jl.write(json.dumps({"module": module, "function": req["function"],
                                         "result": r}) + "\n")
        name = spec.partition(":")[2] or spec.rstrip("/").split("/")[-1]
        pct = 100.0 * with_input / units if units else 0.0
        pct_found = 100.0 * with_input / found if found else 0.0
        med = statistics.median(covs) if covs else -1
        print("%s: modules %d, found %d, units %d, with input %d (%.0f%% of units, %.0f%% of "
              "found), inputs %d, median coverage %.0f%%, time/function %.2fs (max %.1fs), "
              "total %.0fs" % (name, len(mods), found, units, with_input, pct, pct_found, inputs,
                               med, statistics.mean(times) if times else 0,
                               max(times) if times else 0, time.monotonic() - t_lib))
        print("  losses: " + json.dumps(dict(sorted(losses.items(), key=lambda kv: -kv[1]))))
        print("  sources: " + json.dumps(dict(sorted(sources.items(), key=lambda kv: -kv[1]))))
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker()
    else:
        main()
