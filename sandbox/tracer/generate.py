# The sandbox's tracer, part 7 of 8: the input generator of generate runs (kind generate).
# PLACEHOLDER of the sandbox plumbing's branch: the generator engine's branch replaces this file
# (/tmp/i30/engine-contract.md). It must also run standalone, so it imports what it uses inside its
# functions and every top-level name starts with _gen. This stub finds module-level functions and
# methods (ast), and for inputs calls a zero-argument function, and each seed, once.


def _gen_main(req, load_module):
    """Find (req["function"] == "") or generate inputs for req["function"]; returns a dict shaped
    like sandbox.Generation (see the contract)."""
    import ast
    import sys
    try:
        tree = ast.parse(req["code"], req["filename"])
    except SyntaxError as e:
        return {"status": "invalid", "detail": "SyntaxError: %s" % (e.msg,)}
    try:
        mod = load_module()
    except ModuleNotFoundError as e:
        return {"status": "exception", "detail": "ModuleNotFoundError: %s" % (e,),
                "missing_module": e.name or ""}
    except Exception as e:
        return {"status": "exception", "detail": "%s: %s" % (type(e).__name__, e)}
    if not req["function"]:
        return {"status": "ok", "functions": _gen_find(tree)}
    name = req["function"]
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part, None)
    code = getattr(obj, "__code__", None)
    if code is None:
        return {"status": "ok", "reason": "not_found"}
    lines = sorted({ln for _, _, ln in code.co_lines() if ln and ln > code.co_firstlineno})
    calls = []
    if "." not in name and code.co_argcount == 0 and not code.co_kwonlyargcount:
        calls.append(("%s()" % name, "example"))
    for s in req["seeds"]:
        try:
            node = ast.parse("_(%s)" % s, mode="eval").body
            for a in list(node.args) + [k.value for k in node.keywords]:
                ast.literal_eval(a)
        except Exception:
            continue
        calls.append(("%s(%s)" % (name, s), "llm"))
    inputs, attempts = [], 0
    for call, source in calls[:req["attempts"]]:
        attempts += 1
        reached = set()

        def trace(frame, event, arg):
            if frame.f_code is code:
                if event == "line":
                    reached.add(frame.f_lineno)
                return trace
            return None
        raised = ""
        sys.settrace(trace)
        try:
            eval(call, vars(mod))
        except Exception as e:
            raised = type(e).__name__
        finally:
            sys.settrace(None)
        if len(inputs) < req["per_function"]:
            inputs.append({"call": call, "source": source, "lines": sorted(reached), "raised": raised})
    out = {"status": "ok", "inputs": inputs, "lines": lines, "attempts": attempts}
    if not inputs:
        out["reason"] = "no_candidates"
    return out


def _gen_find(tree):
    """The module-level functions and the methods of its classes, in source order."""
    import ast
    found = []

    def first(n):
        return min([n.lineno] + [d.lineno for d in n.decorator_list])
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append({"qualname": n.name, "kind": "function", "line": first(n),
                          "end_line": n.end_lineno,
                          "skip": "async" if isinstance(n, ast.AsyncFunctionDef) else ""})
        elif isinstance(n, ast.ClassDef):
            for m in n.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    decos = {getattr(d, "id", "") for d in m.decorator_list}
                    kind = ("staticmethod" if "staticmethod" in decos else
                            "classmethod" if "classmethod" in decos else "method")
                    found.append({"qualname": n.name + "." + m.name, "kind": kind,
                                  "line": first(m), "end_line": m.end_lineno,
                                  "skip": "async" if isinstance(m, ast.AsyncFunctionDef) else ""})
    return found
