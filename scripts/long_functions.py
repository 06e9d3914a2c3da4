#!/usr/bin/env python3
"""Lists the longest functions of C and C++ sources.

A function's length is the number of lines from the line of its opening
brace to the line of its matching closing brace, both included. Comments,
string and character literals and preprocessor lines are ignored; lambdas
and local classes count as part of the function around them; the member
functions of a class (also a class defined in a .cc) count one by one.

  scripts/long_functions.py [--max N] [--top K] [--exclude PATH ...] [PATH ...]

PATH: files or directories (default: user/ of the tree this script is in);
directories are searched for *.c, *.cc, *.cpp, *.h and *.hpp, BPF programs
(*.bpf.c) included. --max N: exit with status 1 if a function is longer
than N lines, listing those. Without --max: the --top longest (default 20).
"""

import argparse
import os
import re
import sys

EXTS = (".c", ".cc", ".cpp", ".h", ".hpp")
SCOPE_RE = re.compile(r"^\s*(?:template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b")
CONTROL_RE = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try|return)\b")


def strip(text):
    """Blanks comments, literals and preprocessor lines, keeping newlines."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def name_of(header):
    """The function's name from the text before its body."""
    h = " ".join(header.split())
    # Cut a constructor's initializer list and trailing qualifiers.
    depth = 0
    for k, ch in enumerate(h):
        if ch == "(":
            if depth == 0:
                before = h[:k].rstrip()
                m = re.search(r"([~\w:<>,\s*&]*?)(operator\s*\S+|[~\w:]+(?:<[^()]*>)?)$", before)
                return m.group(2) if m else before[-60:]
            depth += 1
        elif ch == ")":
            depth -= 1
    return h[-60:]


def functions(path):
    """Yields (name, first line, last line) for every function of a file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip(f.read())
    stack = []  # per open brace: "scope", "func" or "other"
    header_start = 0
    line = 1
    func_start = None  # (name, line) of the open outermost function
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            in_func = "func" in stack
            header = text[header_start:i]
            kind = "other"
            if not in_func:
                if SCOPE_RE.match(header) and "(" not in header.split("{")[0].split(":")[0]:
                    kind = "scope"
                elif (")" in header and not CONTROL_RE.match(header)
                      and not re.search(r"=\s*$", header)
                      and not re.search(r"=\s*\[", header)):
                    kind = "func"
                    func_start = (name_of(header), line)
                elif re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", header) or \
                        header.strip().startswith('extern'):
                    kind = "scope"
            stack.append(kind)
            header_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "other"
            if kind == "func" and "func" not in stack and func_start:
                yield func_start[0], func_start[1], line
                func_start = None
            header_start = i + 1
        elif c == ";":
            header_start = i + 1


def sources(paths, excludes):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs
                             if os.path.abspath(os.path.join(root, d)) not in excludes)
            for f in sorted(files):
                path = os.path.join(root, f)
                if f.endswith(EXTS) and os.path.abspath(path) not in excludes:
                    yield path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--max", type=int, help="fail if a function is longer than this")
    ap.add_argument("--top", type=int, default=20, help="how many to list without --max")
    ap.add_argument("--exclude", action="append", default=[], help="a directory or file to skip")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = a.paths or [os.path.join(root, "user")]
    excludes = {os.path.abspath(e) for e in a.exclude}
    found = []
    for path in sources(paths, excludes):
        for name, first, last in functions(path):
            found.append((last - first + 1, os.path.relpath(path), first, name))
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    if a.max is not None:
        over = [f for f in found if f[0] > a.max]
        for n, path, first, name in over:
            print(f"{n:5d} {path}:{first} {name}")
        if over:
            print(f"{len(over)} function(s) longer than {a.max} lines", file=sys.stderr)
            return 1
        return 0
    for n, path, first, name in found[:a.top]:
        print(f"{n:5d} {path}:{first} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
