# Rewrites evaluation functions the ways a contaminated corpus may hold them (decontam_test.go).
# Reads a JSON list of sources on stdin; writes a JSON list of {kind: source} objects on stdout.
# Every rewrite is checked to compile; one that does not (or cannot be made) is left out.
import ast, builtins, io, json, keyword, sys, tokenize

KEEP = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls"}


def rename(src):
    """Renames every variable, parameter and function name (not attributes), layout kept."""
    toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    lines = src.splitlines(keepends=True)
    edits = {}
    prev = None
    for t in toks:
        if t.type == tokenize.NAME and t.string not in KEEP and not (prev is not None and prev.string == "."):
            edits.setdefault(t.start[0], []).append((t.start[1], t.end[1], "renamed_" + t.string[::-1] + "_v"))
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            prev = t
    for ln, es in edits.items():
        line = lines[ln - 1]
        for a, b, new in sorted(es, reverse=True):
            line = line[:a] + new + line[b:]
        lines[ln - 1] = line
    return "".join(lines)


def docstring(src):
    """Adds a docstring to every function, layout kept where the body starts on its own line."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    inserts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            b = node.body[0]
            if b.lineno == node.lineno:
                node.body.insert(0, ast.Expr(ast.Constant("Computes the result.\n\nArgs are used as given.")))
                return ast.unparse(tree)
            inserts.append((b.lineno, b.col_offset))
    for ln, col in sorted(inserts, reverse=True):
        ind = " " * col
        doc = ind + '"""Return what the function computes.\n\n' + ind + 'Examples are in the tests.\n' + ind + '"""\n'
        lines.insert(ln - 1, doc)
    return "".join(lines)


def statement(src):
    """Adds a statement (a logging call) at the start of every function body whose body starts on
    its own line; None when none does."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    inserts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body[0].lineno > node.lineno:
            inserts.append((node.body[0].lineno, node.body[0].col_offset))
    if not inserts:
        return None
    for ln, col in sorted(inserts, reverse=True):
        lines.insert(ln - 1, " " * col + "log.debug('entering %s', locals())\n")
    return "".join(lines)


def reformat(src):
    """Two-space indentation, a comment above each line and blank lines between statements."""
    out = []
    for i, line in enumerate(src.splitlines()):
        stripped = line.lstrip(" ")
        n = (len(line) - len(stripped)) // 4 * 2 + (len(line) - len(stripped)) % 4
        out.append(" " * n + "# step %d" % i)
        out.append(" " * n + stripped.replace(", ", " ,  ").replace(" = ", "=") + "   # done")
        out.append("")
    return "\n".join(out) + "\n"


HELPER = '''import math

def _helper_norm(values, scale=1.0):
    total = 0
    for v in values:
        total += v * v
    return math.sqrt(total) * scale

'''

REPO = '''"""Utilities of a package."""
import os
import re
from collections import defaultdict

CONFIG = {"depth": 3, "name": "pkg"}


def parse_header(line):
    key, _, value = line.partition(":")
    return key.strip().lower(), value.strip()


class Registry:
    def __init__(self):
        self.items = defaultdict(list)

    def register(self, kind, item):
        self.items[kind].append(item)
        return len(self.items[kind])

%s

def walk_files(root, pattern=r".*\\.py$"):
    rx = re.compile(pattern)
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            if rx.match(name):
                found.append(os.path.join(dirpath, name))
    return sorted(found)
'''


def main():
    out = []
    for src in json.load(sys.stdin):
        r = {}
        try:
            r["rename"] = rename(src)
            r["docstring"] = docstring(src)
            r["unparse"] = ast.unparse(ast.parse(src))
            r["reformat"] = reformat(src)
            if (st := statement(src)) is not None:
                r["statement"] = st
            r["helper"] = HELPER + src + "\n\n" + HELPER.replace("_helper_norm", "_helper_scale")
            r["repository"] = REPO % src
            r["all"] = REPO % ast.unparse(ast.parse(docstring(rename(src))))
        except Exception:
            out.append({})
            continue
        for k, v in list(r.items()):
            try:
                compile(v, "<rewrite>", "exec")
            except SyntaxError:
                del r[k]
        out.append(r)
    json.dump(out, sys.stdout)


main()
