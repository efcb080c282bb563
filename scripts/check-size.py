#!/usr/bin/env python3
"""The size limits of walcut's library and CLI sources.

    python3 scripts/check-size.py [--list] [ROOT]

- No source file (.cpp, .h) in walfmt/, node/, cut/, recovery/, repo/ or cli/
  over 1,000 lines.
- No function there over 100 lines (from the line of its opening brace to the
  line of its closing one), unless the comment right above the function says
  why, with a line containing "long-function:" and the reason.

Prints one line per violation (file:line: what) and exits 1 when there is
any, 0 otherwise. --list prints every function over 70 lines as well, with its
length, for the closing notes. Run by the test command through ctest
("build: file and function size").

Functions are found by a tokenizer, not a compiler: comments, strings and
character literals are skipped; a brace block opened at namespace or class
scope whose head ends in ')' (possibly followed by qualifiers, a trailing
return type or a constructor's initializer list) is a function body. Lambdas
and local classes count towards the function that holds them.
"""
import os
import re
import sys

FOLDERS = ["walfmt", "node", "cut", "recovery", "repo", "cli"]
MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 100
REPORT_FUNCTION_LINES = 70
REASON = "long-function:"


def tokens(text):
    """Yields (kind, value, line) for the code of a C++ file, skipping
    comments, string and character literals and preprocessor lines."""
    i, n, line = 0, len(text), 1
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    line += 1
                    i += 2
                    continue
                i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
            continue
        m = re.compile(r'(?:u8|u|U|L)?R"([^(\s]*)\(').match(text, i)
        if m:
            end = text.find(")" + m.group(1) + '"', m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            line += text.count("\n", i, end)
            i = end
            yield ("lit", "", line)
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            yield ("lit", "", line)
            continue
        m = re.compile(r"[A-Za-z_][A-Za-z_0-9]*").match(text, i)
        if m:
            yield ("id", m.group(0), line)
            i = m.end()
            continue
        if text.startswith("->", i) or text.startswith("::", i):
            yield ("op", text[i:i + 2], line)
            i += 2
            continue
        yield ("op", c, line)
        i += 1


QUALIFIERS = {"const", "noexcept", "override", "final", "volatile", "mutable", "constexpr", "try"}


def is_function_head(head):
    """head: the tokens since the last ';', '{' or '}' at this scope."""
    vals = [v for _, v, _ in head]
    if not vals:
        return False
    if vals[0] in ("namespace", "class", "struct", "union", "enum", "extern") and "(" not in vals:
        return False
    if vals[0] in ("class", "struct", "union", "enum") or "=" in vals[:1]:
        return False
    if "(" not in vals:
        return False
    # "x = ... {" at namespace or class scope is an initializer, unless the
    # '=' sits inside the parameter list (a default argument) or is an
    # operator's name.
    depth = 0
    for k, v in enumerate(vals):
        if v in "([":
            depth += 1
        elif v in ")]":
            depth -= 1
        elif v == "=" and depth == 0 and not (k > 0 and vals[k - 1] == "operator"):
            if k + 1 < len(vals) and vals[k + 1] in ("default", "delete"):
                return False
            return False
    # Walk back over qualifiers, a trailing return type, an initializer list.
    k = len(vals) - 1
    if vals[k] == ")":
        return True
    if vals[k] in QUALIFIERS:
        return True
    # "-> Type {" or ") : member_(x) {" or ") noexcept(...)" etc.: any ')' at
    # depth zero before the end that is followed by ':' or '->' or a qualifier.
    for j in range(len(vals) - 1, -1, -1):
        if vals[j] == ")" and j + 1 < len(vals) and (vals[j + 1] in (":", "->") or vals[j + 1] in QUALIFIERS):
            return True
    return False


def function_name(head):
    vals = [v for _, v, _ in head]
    depth = 0
    for k, v in enumerate(vals):
        if v == "(" and depth == 0:
            name = []
            j = k - 1
            while j >= 0 and (head[j][0] == "id" or vals[j] in ("::", "~")):
                if head[j][0] == "id" and name and name[0] not in ("::", "~"):
                    break
                name.insert(0, vals[j])
                j -= 1
            if j >= 0 and vals[j] == "operator":
                return "operator" + "".join(vals[k - 1:k])
            return "".join(name) or "?"
        if v in "<":
            depth += 1
        elif v == ">":
            depth = max(0, depth - 1)
    return "?"


def functions(text):
    """Yields (name, head line, open line, close line)."""
    stack = []  # one entry per open brace: "scope" (namespace/class/extern) or "func" or "other"
    head = []
    func_start = None
    for kind, v, line in tokens(text):
        in_func = any(s == "func" for s in stack)
        if v == "{":
            if in_func:
                stack.append("other")
            elif is_function_head(head):
                stack.append("func")
                func_start = (function_name(head), head[0][2] if head else line, line)
            else:
                stack.append("scope")
            head = []
        elif v == "}":
            if not stack:
                continue
            top = stack.pop()
            if top == "func":
                name, head_line, open_line = func_start
                yield (name, head_line, open_line, line)
            head = []
        elif v == ";":
            head = []
        elif not in_func:
            # An access specifier ends a head.
            if v == ":" and len(head) == 1 and head[0][1] in ("public", "private", "protected"):
                head = []
                continue
            head.append((kind, v, line))


def has_reason(lines, head_line):
    k = head_line - 2  # the line above the function's first line, 0-based
    while k >= 0:
        s = lines[k].strip()
        if s.startswith("//"):
            if REASON in s:
                return True
            k -= 1
            continue
        if s.startswith("template") or s.startswith("[["):
            k -= 1
            continue
        break
    return False


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    listing = "--list" in sys.argv
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems, long_ones = [], []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                lines = text.split("\n")
                n = len(lines) - (1 if text.endswith("\n") else 0)
                if n > MAX_FILE_LINES:
                    problems.append(f"{rel}:1: {n} lines (at most {MAX_FILE_LINES})")
                for fname, head_line, open_line, close_line in functions(text):
                    length = close_line - open_line + 1
                    if length > REPORT_FUNCTION_LINES:
                        long_ones.append((length, rel, head_line, fname))
                    if length > MAX_FUNCTION_LINES and not has_reason(lines, head_line):
                        problems.append(f"{rel}:{head_line}: function {fname} is {length} lines (at most "
                                        f"{MAX_FUNCTION_LINES} without a '// {REASON} <why>' comment above it)")
    if listing:
        for length, rel, line, fname in sorted(long_ones, reverse=True):
            print(f"{length:5d}  {rel}:{line}  {fname}")
        print(f"{len(long_ones)} functions over {REPORT_FUNCTION_LINES} lines")
    for p in problems:
        print(p)
    if problems:
        print(f"check-size: {len(problems)} violation(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
