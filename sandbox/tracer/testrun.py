# The sandbox's tracer, part 5 of 8: test runs (kind collect / test) and the runner options a
# repository's pytest config gets. Not a module of its own: the zygote's -c program compiles the 8
# parts as one module, in the order of sandbox.tracerFiles (common.py says how).


# --------------------------------------------------------------------------------------------
# Test runs (kind collect / test): a repository's test suite, one test per item
# --------------------------------------------------------------------------------------------

_MISSING_RE = re.compile(r"No module named '([^']+)'")
# Top-level names of the third-party modules the zygote imported for pytest ("tops") and for the
# generator ("gen"; runners.py, _preload), None: not tried.
_PRELOADED = {"tops": None, "gen": None}


def _run_tests(req):
    """Body of a collect or test item: never returns.

    The tracer seals its first chunk before anything of the repository's can run (its own
    pytest.py, .pth files of the PythonPath): from then on, an exit is the item's.  The
    repository's code runs inside the runner (conftest, test modules, fixtures) and may rebind
    the tracer's globals and builtins; the tracer's functions refuse any call with the item's code
    on the stack.  Nothing that renders an exception runs while a phase is recorded: the runner's
    hooks only keep the exceptions, and their messages are taken after the run."""
    N = _N
    start, end, end_exception, exc_message = N.tracer_start, N.tracer_end, N.tracer_end_exception, N.exc_message
    _BaseException = BaseException
    d = req["dir"]
    start(bool(req["traced"] and req["kind"] == "test"))
    try:
        os.chdir(d)
    except OSError as e:
        end("invalid", _qualname(type(e)), "cannot enter %s: %s" % (d, e.strerror))
    state = types.SimpleNamespace(tests=None, errors=[], verdicts=[], failure=None, fatal=None,
                                  excs=[], exc_message=exc_message, options=None, fallback=False)

    def note(exc, when):
        """Keep the exception of a failure (the first one is reported)."""
        if exc is not None:
            state.excs.append(exc)
            if state.failure is None:
                state.failure = (when, exc)

    try:
        runner = _runner_setup(req, d)
        if runner == "pytest":
            _pytest_run(req, state, note)
        else:
            _unittest_run(req, state, note)
    except _BaseException as e:         # the runner (or the repository's code) raised: no verdict
        end_exception(e)
    try:
        _test_records(req, runner, state, end, exc_message)
    except _BaseException as e:
        end("exception", _qualname(type(e)), exc_message(e))


def _test_records(req, runner, state, end, exc_message):
    """The collection or test record of a run and its end (never returns)."""
    enc, _map, join, _str, d = _enc, map, ",".join, str, req["dir"]
    missing = ""
    for exc in state.excs:
        try:                  # the exceptions are the repository's: their attributes may raise
            m = _missing_module(exc, d, req["pythonpath"])
        except BaseException:
            m = None
        if m:
            missing = m
            break
    opts = getattr(state, "options", None)
    neutralised = "[%s]" % join(_map(enc, opts.neutralised if opts is not None else []))
    if req["kind"] == "collect":
        refused = "[%s]" % join(_map(enc, getattr(opts, "refused", None) or []))
        record = ('{"event":"collection","runner":%s,"tests":[%s],"errors":[%s],'
                  '"missing_module":%s,"neutralised":%s,"original_runnable":%s,"fallback":%s,"refused":%s,"writable":%s}\n'
                  % (enc(runner), join(_map(enc, state.tests or [])),
                     join(_map(enc, state.errors)), enc(missing), neutralised,
                     "true" if opts is None or opts.runnable else "false",
                     "true" if getattr(state, "fallback", False) else "false", refused,
                     enc(_str(req.get("writable", "")))))
        if state.fatal is not None:
            end("exception", state.fatal[0], state.fatal[1], record)
        end("ok", record=record)
    outcome = _verdict(state.verdicts)
    when, exc_type, exc_msg = "", "", ""
    if state.failure is not None:
        try:
            exc = _unwrap(state.failure[1])
        except BaseException:
            exc = state.failure[1]
        when, exc_type, exc_msg = state.failure[0], _qualname(type(exc)), exc_message(exc)
    if state.fatal is not None and not state.verdicts and state.failure is None:
        when, exc_type, exc_msg = "collect", state.fatal[0], state.fatal[1]
    if outcome not in ("failed", "error"):
        missing = ""
        when = exc_type = exc_msg = ""
    record = ('{"event":"test","runner":%s,"outcome":%s,"missing_module":%s,"when":%s,'
              '"exc_type":%s,"exc_message":%s,"neutralised":%s,"writable":%s}\n'
              % (enc(_str(runner)), enc(_str(outcome)), enc(_str(missing)), enc(_str(when)),
                 enc(_str(exc_type)), enc(_str(exc_msg)), neutralised, enc(_str(req.get("writable", "")))))
    end("ok", record=record)


def _verdict(verdicts):
    """One outcome for all the phases/tests a run reported: failed > error > skipped > passed;
    nothing reported (the test was not found or its file did not import) is an error."""
    for v in ("failed", "error"):
        if v in verdicts:
            return v
    if not verdicts:
        return "error"
    if "passed" in verdicts:
        return "passed"
    return "skipped"


# --------------------------------------------------------------------------------------------
# Runner options: what of a repository's pytest configuration a test run neutralises
# --------------------------------------------------------------------------------------------

# Beyond these, a repository's addopts are dropped whole ("addopts" is listed as neutralised).
_ADDOPTS_MAX_CHARS = 64 * 1024
_ADDOPTS_MAX_TOKENS = 2000
# At most this many neutralised options are listed (then "..."), each at most this long.
_NEUTRALISED_MAX = 50
_NEUTRALISED_NAME_MAX = 100

# Options that are always dropped from addopts: name -> (arity, class, owning plugin module).
# arity: 0 (a flag), 1 (one value), "?" (an optional value).  Classes: "coverage" (coverage
# installs its own trace function, which would fight sys.settrace), "xdist" (we run one test per
# process), "report" (files written outside the run), "runner" (options that change how we run
# pytest: its config file, rootdir, conftest cut, basetemp, a mode that runs no test, a debugger,
# the cache we disable).  The original configuration counts as runnable only when every dropped
# option is of the first three classes and its plugin is importable (None: pytest's own plugin).
_ALWAYS_DROPPED = {}


def _always_dropped(cls, plugin, arity, *names):
    for n in names:
        _ALWAYS_DROPPED[n] = (arity, cls, plugin)


_always_dropped("coverage", "pytest_cov", "?", "--cov")
_always_dropped("coverage", "pytest_cov", 1, "--cov-report", "--cov-config", "--cov-fail-under",
                "--cov-context", "--cov-precision")
_always_dropped("coverage", "pytest_cov", 0, "--no-cov", "--no-cov-on-fail", "--cov-append",
                "--cov-branch", "--cov-reset")
_always_dropped("xdist", "xdist", 1, "-n", "--numprocesses", "--maxprocesses",
                "--max-worker-restart", "--dist", "--tx", "--px", "--rsyncdir", "--rsyncignore",
                "--maxschedchunk")
_always_dropped("xdist", "xdist", 0, "-d", "-f", "--looponfail", "--boxed", "--distload",
                "--loadscope-reorder", "--no-loadscope-reorder")
_always_dropped("report", None, 1, "--junitxml", "--junit-xml", "--log-file", "--pastebin")
_always_dropped("report", "pytest_reportlog", 1, "--report-log")
_always_dropped("report", "pytest_html", 1, "--html", "--css")
_always_dropped("report", "pytest_html", 0, "--self-contained-html")
_always_dropped("report", "pytest_jsonreport", 1, "--json-report-file")
_always_dropped("report", "pytest_jsonreport", 0, "--json-report")
_always_dropped("report", "allure_pytest", 1, "--alluredir")
_always_dropped("report", "", 1, "--resultlog", "--result-log")      # gone since pytest 6
_always_dropped("runner", "", 1, "-c", "--config-file", "--rootdir", "--confcutdir", "--basetemp",
                "--pdbcls", "--lfnf", "--last-failed-no-failures", "--inifile")
_always_dropped("runner", "", "?", "--debug", "--cache-show")
_always_dropped("runner", "", 0, "--collect-only", "--co", "-h", "--help", "-V", "--version",
                "--fixtures", "--funcargs", "--fixtures-per-test", "--markers", "--setup-only",
                "--setup-plan", "--pdb", "--trace", "--lf", "--last-failed", "--ff",
                "--failed-first", "--nf", "--new-first", "--sw", "--stepwise", "--sw-skip",
                "--stepwise-skip", "--cache-clear")
# Plugins (-p NAME, by module or entry-point name) dropped like their options.
_ALWAYS_DROPPED_PLUGINS = {"pytest_cov": ("coverage", "pytest_cov"), "cov": ("coverage", "pytest_cov"),
                           "xdist": ("xdist", "xdist"), "pytest_xdist": ("xdist", "xdist"),
                           "xdist.plugin": ("xdist", "xdist"),
                           "xdist.looponfail": ("xdist", "xdist")}
# Ini keys a repository may not override from addopts (-o KEY=VALUE).
_PROTECTED_INI = ("addopts", "required_plugins", "log_file", "cache_dir")


def _runner_options(req, d):
    """The repository's addopts as this run applies them (issue 13).

    Returns (args, opts): args to append to pytest's command line (-o addopts=..., -o
    required_plugins=) and opts, a namespace: kept (the addopts tokens passed on), pending (groups
    of options pytest's own parser does not know before the repository's plugins and conftest.py
    files are loaded: kept for now, dropped later if still unknown), neutralised (names of what
    was dropped) and runnable (whether the original configuration would run in the sandbox: only
    coverage, xdist and report options whose plugins are importable were dropped).  Nothing of
    the repository's is imported or run here: files are read, modules located, never executed."""
    mode = req.get("options", "")
    opts = types.SimpleNamespace(kept=None, pending=[], neutralised=[], runnable=True,
                                 had_addopts=False, refused=[])
    inicfg = _pytest_inicfg(req, d)
    raw = _ini_value(inicfg.get("addopts")) if inicfg else None
    required = _ini_value(inicfg.get("required_plugins")) if inicfg else None
    args = []
    if raw is None or raw == "" or raw == []:
        tokens = []
    else:
        tokens = _addopts_tokens(raw)
    if tokens is None or (tokens and mode == "none"):
        # Dropped whole (the fallback, or beyond reason) but for the test selection, which only
        # narrows what is collected (_selection_only).
        _neutralise(opts, "addopts", False)
        opts.kept = _selection_only(tokens or [], req, d, opts)
        args += ["-o", "addopts=" + _shlex_join(opts.kept)]
    elif tokens:
        opts.had_addopts = True
        kept = []
        actions = _known_actions()
        for g in _group_options(tokens, actions, d):
            if not _selection_safe(g, req, d, opts):
                continue
            keep, cls, plugin = _judge(g, req, d, mode, actions)
            if keep == "pending":
                opts.pending.append((len(kept), g))
                kept += g.tokens
            elif keep:
                kept += g.tokens
            elif g.name is not None:
                _neutralise(opts, g.label, _runnable(cls, plugin))
        opts.kept = kept
        args += ["-o", "addopts=" + _shlex_join(kept)]
    if required and mode != "original":
        _neutralise(opts, "required_plugins", _dists_installed(required))
        args += ["-o", "required_plugins="]
    if req["kind"] == "collect" and inicfg:
        args += _safe_testpaths(inicfg, d, opts)
    return args, opts


def _neutralise(opts, name, runnable):
    if len(opts.neutralised) >= _NEUTRALISED_MAX:
        if opts.neutralised[-1] != "...":
            opts.neutralised[-1] = "..."
    else:
        name = name[:_NEUTRALISED_NAME_MAX]
        if name not in opts.neutralised:
            opts.neutralised.append(name)
    opts.runnable = opts.runnable and runnable


def _ini_value(v):
    """An ini value as pytest holds it: str, list of str, or (newer pytest) an object whose
    .value is one of these; None otherwise."""
    if not isinstance(v, (str, list)):
        v = getattr(v, "value", None)
    if isinstance(v, list):
        return [str(x) for x in v]
    return v if isinstance(v, str) else None


def _addopts_tokens(raw):
    """addopts split as pytest splits them (shlex), or None when it cannot be used at all."""
    import shlex
    if isinstance(raw, list):
        tokens = raw
        if sum(len(t) for t in tokens) > _ADDOPTS_MAX_CHARS:
            return None
    else:
        if len(raw) > _ADDOPTS_MAX_CHARS:
            return None
        try:
            tokens = shlex.split(raw)
        except ValueError:              # unbalanced quotes: pytest would fail on it
            return None
    if len(tokens) > _ADDOPTS_MAX_TOKENS or any("\x00" in t for t in tokens):
        return None
    return tokens


def _shlex_join(tokens):
    import shlex
    return " ".join(shlex.quote(t) for t in tokens)


def _pytest_inicfg(req, d):
    """The ini values of the config file pytest will use for this run (pytest.ini, .pytest.ini,
    pyproject.toml [tool.pytest.ini_options], tox.ini [pytest], setup.cfg [tool:pytest]), found
    with pytest's own determine_setup (whose signature differs between pytest 7 and 8), else with
    our own search; {} when there is none or it does not parse (pytest then says why)."""
    from pathlib import Path
    args = [] if req["kind"] == "collect" else [req["test"]]
    try:
        import inspect
        from _pytest.config import findpaths
        fn = findpaths.determine_setup
        given = {"inifile": None, "args": args, "rootdir_cmd_arg": d,
                 "invocation_dir": Path(d), "config": None}
        params = inspect.signature(fn).parameters
        res = fn(**{k: v for k, v in given.items() if k in params})
        for v in res:
            if isinstance(v, dict):
                return v
    except BaseException:
        pass
    try:
        return _own_inicfg(d, args)
    except BaseException:
        return {}


def _own_inicfg(d, args):
    """pytest's config-file search, for a pytest whose determine_setup we cannot call."""
    start = d
    if args:
        p = os.path.join(d, args[0].split("::")[0])
        start = p if os.path.isdir(p) else os.path.dirname(p)
    base = os.path.abspath(start)
    while True:
        for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
            p = os.path.join(base, name)
            if not os.path.isfile(p):
                continue
            if name.endswith(".toml"):
                import tomllib
                with open(p, "rb") as f:
                    cfg = tomllib.load(f).get("tool", {}).get("pytest", {}).get("ini_options")
                if isinstance(cfg, dict):
                    return {k: v if isinstance(v, list) else str(v) for k, v in cfg.items()}
                continue
            import iniconfig
            ini = iniconfig.IniConfig(p)
            section = "tool:pytest" if name == "setup.cfg" else "pytest"
            if section in ini:
                return dict(ini[section].items())
            if name in ("pytest.ini", ".pytest.ini"):
                return {}
        parent = os.path.dirname(base)
        if parent == base:
            return {}
        base = parent


class _OptGroup:
    """One option of addopts with its values (name None: a positional argument; "--": the
    end of options, with everything after it)."""
    __slots__ = ("name", "tokens", "value")

    def __init__(self, name, tokens, value=None):
        self.name, self.tokens, self.value = name, tokens, value

    @property
    def label(self):
        if self.name in ("-p", "-o", "--override-ini") and self.value is not None:
            return "%s %s" % (self.name, self.value)
        return self.name


def _known_actions():
    """Option string -> arity (0, 1, "?", "*", "+", n) of pytest's own options (its default
    plugins, the cache provider blocked as in our runs); {} if that pytest will not say."""
    try:
        from _pytest.config import get_config
        parser = get_config(["-p", "no:cacheprovider"])._parser._getparser()
        out = {}
        for s, a in parser._option_string_actions.items():
            out[s] = 1 if a.nargs is None else a.nargs
        return out
    except BaseException:
        return {}


def _group_options(tokens, actions, d):
    """Split addopts tokens into options with their values, as argparse would."""
    def arity(name):
        if name in _ALWAYS_DROPPED:
            return _ALWAYS_DROPPED[name][0]
        return actions.get(name, "unknown")

    def is_value(t):
        return not t.startswith("-") or t == "-" or t[1:2].isdigit()

    groups = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        i += 1
        if tok == "--":
            groups.append(_OptGroup("--", tokens[i - 1:]))
            break
        if not tok.startswith("-") or tok == "-":
            groups.append(_OptGroup(None, [tok]))
            continue
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            attached = bool(eq)
        else:
            name, value = tok[:2], tok[2:]
            attached = bool(value)
            if attached and arity(name) == 0:
                # a cluster of short flags (-vx), possibly ending with one that takes a value
                j = 1
                while j < len(tok):
                    f = "-" + tok[j]
                    if arity(f) == 0:
                        groups.append(_OptGroup(f, [f]))
                        j += 1
                        continue
                    rest = tok[j + 1:]
                    g = _OptGroup(f, [f + rest] if rest else [f], rest or None)
                    if not rest and i < n and is_value(tokens[i]) and arity(f) != "unknown":
                        g.tokens.append(tokens[i])
                        g.value = tokens[i]
                        i += 1
                    groups.append(g)
                    break
                continue
            if value.startswith("=") and name in ("-p", "-o"):
                value = value[1:]
        g = _OptGroup(name, [tok], value if attached else None)
        a = arity(name)
        if not attached:
            if a in (1, "?") and i < n and is_value(tokens[i]):
                g.value = tokens[i]
                g.tokens.append(tokens[i])
                i += 1
            elif a in ("*", "+"):
                while i < n and is_value(tokens[i]):
                    g.tokens.append(tokens[i])
                    i += 1
            elif type(a) is int and a > 1:
                g.tokens += tokens[i:i + a]
                i += a
            elif a == "unknown" and i < n and is_value(tokens[i]) and not _exists(d, tokens[i]):
                # an option of a plugin or conftest.py we do not know: its value, unless it
                # names a file (a test path given in addopts)
                g.value = tokens[i]
                g.tokens.append(tokens[i])
                i += 1
        groups.append(g)
    return groups


def _exists(d, t):
    try:
        return os.path.exists(os.path.join(d, t.split("::")[0]))
    except (OSError, ValueError):
        return False


def _judge(g, req, d, mode, actions):
    """Keep (True), drop (False) or decide later ("pending") one option group; with the class
    and owning plugin of a dropped one."""
    if g.name is None:
        # A positional argument (a test path): it selects what is collected; a test run names
        # its one test itself.
        return req["kind"] == "collect", "", ""
    if g.name == "--":
        # everything after it, our own options included, would be file names
        return False, "runner", ""
    if mode == "original":
        return True, "", ""
    if g.name in ("-o", "--override-ini"):
        key = (g.value or "").partition("=")[0].strip()
        return key not in _PROTECTED_INI, "runner", ""
    if g.name == "-p":
        v = (g.value or "").strip()
        if v.startswith("no:"):
            return True, "", ""
        if v in _ALWAYS_DROPPED_PLUGINS:
            cls, plugin = _ALWAYS_DROPPED_PLUGINS[v]
            return False, cls, plugin
        return _plugin_importable(v, d), "plugin", ""
    if g.name in _ALWAYS_DROPPED:
        _, cls, plugin = _ALWAYS_DROPPED[g.name]
        return False, cls, plugin
    if g.name not in actions:
        return "pending", "", ""  # a plugin's or conftest.py's option: pytest's parser decides
    return True, "", ""          # pytest's own options stay


def _runnable(cls, plugin):
    if cls in ("coverage", "xdist", "report"):
        return plugin is None or (plugin != "" and _plugin_importable(plugin, None))
    return False


def _plugin_importable(name, d):
    """Whether -p NAME would load: a pytest built-in plugin, an entry-point plugin of that name,
    or a module that can be found (located, not imported: no code of it runs)."""
    if not name or len(name) > 200:
        return False
    try:
        from _pytest.config import builtin_plugins
        if name in builtin_plugins:
            return True
    except BaseException:
        pass
    parts = name.split(".")
    if all(p.isidentifier() for p in parts):
        try:
            spec = importlib.util.find_spec(parts[0])
            for p in parts[1:]:
                locs = spec.submodule_search_locations if spec is not None else None
                if not locs:
                    spec = None
                    break
                spec = importlib.machinery.PathFinder.find_spec(p, list(locs))
            if spec is not None:
                return True
        except BaseException:
            pass
    try:
        import importlib.metadata as md
        return any(ep.name == name for ep in md.entry_points(group="pytest11"))
    except BaseException:
        return False


def _dists_installed(required):
    """Whether every distribution a required_plugins value names is installed."""
    try:
        import importlib.metadata as md
        names = required if isinstance(required, list) else required.split()
        for r in names:
            m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r.strip())
            if m is None:
                return False
            md.distribution(m.group(0))
        return True
    except BaseException:
        return False


def _drop_unknown(opts, parser, args):
    """In pytest's own run, once its plugins and the initial conftest.py files are loaded: drop
    from the addopts at the head of args the pending options its parser still does not know.
    When args do not start with the addopts we passed (a pytest that builds them otherwise),
    nothing is dropped: pytest then fails with a usage error and the Go side runs again without
    addopts."""
    kept = opts.kept
    if not opts.pending or kept is None or list(args[:len(kept)]) != kept:
        return
    drop = {}
    for start, g in opts.pending:
        try:
            _, unknown = parser.parse_known_and_unknown_args(list(g.tokens))
        except BaseException:
            continue                    # known, with a bad value: pytest will say so
        if unknown:
            drop[start] = len(g.tokens)
            _neutralise(opts, g.label, False)
    if not drop:
        return
    new, i = [], 0
    while i < len(kept):
        if i in drop:
            i += drop[i]
            continue
        new.append(kept[i])
        i += 1
    args[:len(kept)] = new
    opts.kept = new


# --------------------------------------------------------------------------------------------
# Test selection: what of a repository's own selection a collection applies (issue 29)
# --------------------------------------------------------------------------------------------

# Options of addopts that only narrow what is collected: expressions (-m markers, -k keywords)
# and paths of the checkout (--ignore, --ignore-glob, --deselect).  They apply in every mode,
# even when the rest of addopts is dropped (options "none"), as do the test paths that addopts
# name (collections only) and the ini's testpaths: stress tests a repository deselects can run
# for many minutes.  Paths must stay inside the checkout: one that is absolute or leaves it
# ("..", a link out) is refused, and the collection record lists its kind in "refused"
# (sandbox.Collection.Refused): "args" (a test path of addopts), "testpaths", or the option.
_SELECTION_EXPR = ("-m", "-k")
_SELECTION_PATHS = ("--ignore", "--ignore-glob", "--deselect")
# At most this many refusals are listed; a testpaths glob may match at most this many paths.
_REFUSED_MAX = 50
_TESTPATHS_MAX = 10000


def _refuse(opts, kind):
    if len(opts.refused) < _REFUSED_MAX:
        opts.refused.append(kind)


def _inside(d, p, real):
    """Whether path p, relative to checkout d as pytest reads it, stays inside d: not absolute,
    no ".." out of it, and (real) with links resolved."""
    if type(p) is not str or not p or "\x00" in p or os.path.isabs(p):
        return False
    n = os.path.normpath(p)
    if n == ".." or n.startswith(".." + os.sep):
        return False
    if not real:
        return True
    root = os.path.realpath(d)
    r = os.path.realpath(os.path.join(root, n))
    return r == root or r.startswith(root + os.sep)


def _selection_safe(g, req, d, opts):
    """Whether an option group of addopts may be passed on: False (and the refusal listed) for
    a test selection naming a path outside the checkout."""
    if g.name is None:
        if req["kind"] != "collect":
            return True                 # a test run drops it anyway (_judge)
        if not _inside(d, g.tokens[0].split("::")[0], True):
            _refuse(opts, "args")
            return False
        return True
    if g.name in _SELECTION_PATHS and g.value is not None:
        if not _inside(d, g.value.split("::")[0], False):
            _refuse(opts, g.name)
            return False
        return True
    if g.name in ("-o", "--override-ini") and g.value is not None:
        key, _, value = g.value.partition("=")
        if key.strip() == "testpaths":
            import shlex
            try:
                entries = shlex.split(value)
            except ValueError:
                entries = [value]
            if not all(_inside(d, e, True) for e in entries):
                _refuse(opts, "testpaths")
                return False
    return True


def _expression_ok(expr):
    """Whether pytest compiles expr as a -m or -k expression (a bad one is a usage error)."""
    try:
        from _pytest.mark.expression import Expression
        Expression.compile(expr)
        return True
    except BaseException:
        return False


def _selection_only(tokens, req, d, opts):
    """The test selection of addopts (options "none"): -m and -k with expressions pytest
    compiles, --ignore, --ignore-glob and --deselect with paths of the checkout, and (collections)
    test paths that exist in it; nothing that could make pytest fail with a usage error."""
    kept = []
    for g in _group_options(tokens, _known_actions(), d):
        if g.name is None:
            t = g.tokens[0]
            if req["kind"] != "collect" or "::" in t or not _exists(d, t):
                continue
        elif g.name in _SELECTION_EXPR:
            if g.value is None or not _expression_ok(g.value):
                continue
        elif g.name not in _SELECTION_PATHS or g.value is None:
            continue
        if _selection_safe(g, req, d, opts):
            kept += g.tokens
    return kept


def _safe_testpaths(inicfg, d, opts):
    """Arguments that replace the ini's testpaths when an entry of it leaves the checkout (each
    refused): the entries kept, their globs expanded as pytest expands them and escaped; none
    when every entry is inside (pytest reads testpaths itself)."""
    import glob
    import shlex
    raw = _ini_value(inicfg.get("testpaths"))
    if not raw:
        return []
    try:
        entries = raw if isinstance(raw, list) else shlex.split(raw)
    except ValueError:
        return []                       # pytest fails on it as it would anyway
    kept, refused = [], False
    for e in entries:
        if not _inside(d, e, False):
            _refuse(opts, "testpaths")
            refused = True
            continue
        matches = []
        for m in glob.iglob(os.path.join(glob.escape(d), e), recursive=True):
            matches.append(m)
            if len(matches) > _TESTPATHS_MAX:
                break
        if len(matches) > _TESTPATHS_MAX:
            _refuse(opts, "testpaths")
            refused = True
            continue
        for m in sorted(matches):
            rel = os.path.relpath(m, d)
            if _inside(d, rel, True):
                kept.append(glob.escape(rel))
            else:
                _refuse(opts, "testpaths")
                refused = True
    if not refused:
        return []
    return ["-o", "testpaths=" + _shlex_join(kept)]
