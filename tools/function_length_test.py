#!/usr/bin/env python3
"""No function outside the tests is longer than a reader can hold.

Measures every C++ function (.cc, .h) and Python function (.py) of the checkout that is not a
test (tests/, *_test.*, test_*.py, fuzzers), from its signature to its closing brace or last
line. Fails when one is over HARD_LIMIT lines, or over SOFT_LIMIT without a row in LONG_ALLOWED
that says why it stays long. C++ definitions are found as clang-format lays them out: at column
0, or at column 2 inside a class; a signature ends with "{" within a few lines.
"""
import ast
import os
import re
import sys

HARD_LIMIT = 100
SOFT_LIMIT = 60
SOURCE_DIRS = ("algorithms", "backends", "base", "bindings", "devices", "executor", "frontend",
               "sdk", "tools")
# "file:function" -> why it is allowed past SOFT_LIMIT (never past HARD_LIMIT).
LONG_ALLOWED = {
    "executor/collectives.cc:Collectives::Run":
        "one case per collective kind, each a line or two; a -Wswitch error names a missing one",
    "base/store/tcp_store_server.cc:TCPStoreServer::Answer":
        "one case per store opcode, each decoding its fields and answering",
}
NOT_A_DEFINITION = re.compile(
    r"(namespace|class|struct|enum|union|extern|#|//|}|using|typedef|static_assert|return|case|"
    r"if |for |while |switch|else|do |template\s*<[^>]*>\s*(class|struct))")
NAME = re.compile(r"([\w:~]+(?:operator\S*)?)\s*\(")


def is_test(path):
    base = os.path.basename(path)
    parts = path.split(os.sep)
    return ("tests" in parts or "fuzz" in parts or "_test." in base or base.startswith("test_")
            or base.endswith("_test.py"))


def sources(root):
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "bazel-"))]
            for name in sorted(files):
                path = os.path.relpath(os.path.join(folder, name), root)
                if name.endswith((".cc", ".h", ".py")) and not is_test(path):
                    yield path


def cxx_functions(text):
    """(name, first line, length) of each function defined at column 0 or 2."""
    lines = text.split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        body = line[indent:]
        if indent in (0, 2) and body and not NOT_A_DEFINITION.match(body):
            signature, end = "", i
            while end < len(lines) and end < i + 12:
                signature += lines[end].strip() + " "
                if lines[end].rstrip().endswith(("{", ";", "}")):
                    break
                end += 1
            head = signature.split("(")[0]
            if (end < len(lines) and lines[end].rstrip().endswith("{") and "(" in signature
                    and "=" not in head):
                close = " " * indent + "}"
                last = end + 1
                while last < len(lines) and not (lines[last] == close or
                                                 lines[last].startswith(close + ";") or
                                                 lines[last].startswith(close + ")")):
                    last += 1
                match = NAME.search(signature)
                found.append((match.group(1) if match else head.strip(), i + 1, last - i + 1))
                i = last
        i += 1
    return found


def python_functions(text, path):
    tree = ast.parse(text, path)
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def main():
    root = os.path.dirname(os.path.realpath(os.path.join(os.getcwd(), "WORKSPACE")))
    problems, soft, measured = [], [], 0
    for path in sources(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        functions = (python_functions(text, path) if path.endswith(".py")
                     else cxx_functions(text))
        for name, line, length in functions:
            measured += 1
            key = "%s:%s" % (path, name)
            if length > HARD_LIMIT:
                problems.append("%s:%d: %s is %d lines (at most %d)" %
                                (path, line, name, length, HARD_LIMIT))
            elif length > SOFT_LIMIT:
                if key in LONG_ALLOWED:
                    soft.append("%s:%d: %s, %d lines: %s" %
                                (path, line, name, length, LONG_ALLOWED[key]))
                else:
                    problems.append("%s:%d: %s is %d lines (over %d: split it, or add a row "
                                    "to LONG_ALLOWED in tools/function_length_test.py saying "
                                    "why)" % (path, line, name, length, SOFT_LIMIT))
    for row in soft:
        print("allowed: " + row)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("%d functions measured: none over %d lines, %d over %d (allowed above)" %
          (measured, HARD_LIMIT, len(soft), SOFT_LIMIT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
