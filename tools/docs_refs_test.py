#!/usr/bin/env python3
"""Every file, folder and Bazel target the docs name exists in the checkout.

Reads README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md. Checks:
  - repository paths in `code` spans and code blocks (docs/api.md, tools/gpu/pack.sh,
    backends/tcp/), with any :line suffix or #anchor dropped;
  - Bazel labels (//tools:bench, //tests/conformance:all, //bindings/python/...): the package
    has a BUILD file and, for :name, the BUILD file or a macro it loads defines that name;
  - relative Markdown links ([text](docs/design.md#layers)), their #anchor included: a heading
    of the target (or of the same page) must make it, as GitHub makes anchors;
  - command-line flags in code: every --flag given to the bench (//tools:bench, bench ...) is
    one tools/bench*.cc parses, and every other --flag is spelled in the repository's code
    (a tool, script, test or .bazelrc that takes or passes it) or is another program's, listed
    in OTHER_PROGRAMS_FLAGS; benchmarks_history.md keeps the flags of its day and is skipped.
    (PLEXUS_* variables are tools/environment_doc_test.sh's: each must be in the table.)
  - no commit hashes (a doc says what is true now, not which build it was) and no scripts
    outside the repository (/tmp/run.sh).
Placeholders (<name>, *, {a,b}, ...) are not checked. Prints each missing reference with the
doc and line that names it; exits 1 if there is one.
"""
import os
import re
import sys

TOP_LEVEL = ("algorithms", "backends", "base", "bindings", "devices", "docs", "executor",
             "frontend", "sdk", "tests", "third_party", "tools", ".ci")
TOP_FILES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "WORKSPACE", "BUILD", "LICENSE",
             ".bazelrc", ".clang-format")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./+-]*|(?:%s))(?![\w/-])" %
                  ("|".join(re.escape(d) for d in TOP_LEVEL),
                   "|".join(re.escape(f) for f in TOP_FILES)))
LABEL = re.compile(r"(?<![\w@:/])//([\w./-]*)(?::([\w./+-]+))?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
COMMIT = re.compile(r"(?<![\w.:/-])(?!0x)[0-9a-f]{7,12}(?![\w-])")
OUTSIDE_SCRIPT = re.compile(r"(?<![\w.])/tmp/[\w./-]*\.(?:sh|py)\b")
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.$|\bN\b")
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*(?:-[a-z0-9_]+)*)")
BENCH_CALL = re.compile(r"(?://tools:bench|tools/bench|(?:^|\s)bench)(?![\w./-])(.*)")
# Flags of programs outside the repository that the docs show being called.
OTHER_PROGRAMS_FLAGS = {
    "node_rank": "torchrun",
    "ntasks-per-node": "srun",
    "system-site-packages": "python3 -m venv",
    "test_tag_filters": "bazel",
}
CODE_SUFFIXES = (".cc", ".h", ".py", ".sh", ".bzl")


def checkout_root():
    here = os.path.dirname(os.path.realpath(os.path.join(os.getcwd(), "WORKSPACE")))
    return here


def docs(root):
    names = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"]
    names += sorted(os.path.join("docs", n) for n in os.listdir(os.path.join(root, "docs"))
                    if n.endswith(".md"))
    return names


def code_texts(lines):
    """(line number, text) of every code span and code-block line."""
    in_block = False
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            yield number, line
        else:
            for span in CODE_SPAN.findall(line):
                yield number, span


def code_lines(lines):
    """code_texts with backslash-continued lines joined (numbered by their first line)."""
    pending, first = "", None
    for number, text in code_texts(lines):
        if first is None:
            first = number
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        yield first, pending + text
        pending, first = "", None
    if pending:
        yield first, pending


def source_text(root, cache={}):
    """(every code file of the repository, the bench's sources), read once."""
    if root not in cache:
        texts = [open(os.path.join(root, ".bazelrc")).read()]
        for top in TOP_LEVEL:
            if top == "docs":
                continue
            for folder, _, files in os.walk(os.path.join(root, top)):
                for name in files:
                    if name.endswith(CODE_SUFFIXES) or name in ("BUILD", "run"):
                        texts.append(open(os.path.join(folder, name), errors="replace").read())
        tools = os.path.join(root, "tools")
        bench = [open(os.path.join(tools, n)).read() for n in sorted(os.listdir(tools))
                 if n.startswith("bench") and n.endswith(".cc")]
        cache[root] = ("\n".join(texts), "\n".join(bench))
    return cache[root]


def unknown_flags(root, text):
    """How many --flags `text` holds, and those that nothing takes, each with why."""
    everything, bench = source_text(root)
    found = []
    call = BENCH_CALL.search(text)
    bench_flags = set(FLAG.findall(call.group(1))) if call else set()
    for flag in FLAG.findall(text):
        if flag in bench_flags:
            if '"--%s' % flag not in bench:
                found.append(("--" + flag, "the bench has no such flag"))
        elif flag not in OTHER_PROGRAMS_FLAGS and "--" + flag not in everything and \
                '"%s"' % flag not in everything:
            found.append(("--" + flag, "no tool, script or test takes this flag"))
    return len(FLAG.findall(text)), found


def target_defined(root, package, name):
    build = os.path.join(root, package, "BUILD")
    text = open(build).read()
    if re.search(r'name\s*=\s*"%s"|\("%s",' % (re.escape(name), re.escape(name)), text):
        return True
    if os.path.exists(os.path.join(root, package, name)):  # A source file as a label.
        return True
    # Targets a macro generates (conformance_tests, python tests): trust a macro call whose
    # arguments mention the name's parts.
    if re.search(r"^\w+\(", text, re.M) and any(
            part in text for part in name.split("_") if len(part) > 2):
        return "load(" in text or "def " in text or "%" in text
    return False


def built(root, path):
    """Whether `path` names a target's output (tools/tcp_store_server: //tools:tcp_store_server)."""
    package, name = os.path.split(path.rstrip("/"))
    build = os.path.join(root, package, "BUILD")
    return os.path.exists(build) and target_defined(root, package, name)


def anchors(path, cache={}):
    """The anchors GitHub makes from a Markdown page's headings."""
    if path not in cache:
        made = set()
        fenced = False
        for line in open(path):
            if line.startswith("```"):
                fenced = not fenced
            heading = re.match(r"#+ (.*)", line)
            if heading and not fenced:
                text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
                made.add(text.replace(" ", "-"))
        cache[path] = made
    return cache[path]


def check(root):
    """The missing references, and how many references were checked."""
    missing = []
    checked = 0
    for doc in docs(root):
        lines = open(os.path.join(root, doc)).read().splitlines()
        if not doc.endswith("benchmarks_history.md"):
            for number, text in code_lines(lines):
                flags, unknown = unknown_flags(root, text)
                checked += flags
                missing += [(doc, number, flag, why) for flag, why in unknown]
        for number, text in code_texts(lines):
            for label in LABEL.finditer(text):
                checked += 1
                package, name = label.group(1), label.group(2)
                if not package.endswith("..."):
                    package = package.rstrip("./")
                if PLACEHOLDER.search(label.group(0)) and not label.group(0).endswith("/..."):
                    continue
                if package.endswith("...") and name is None:  # Every package below.
                    if not os.path.isdir(os.path.join(root, package[:-3].rstrip("/") or ".")):
                        missing.append((doc, number, label.group(0), "no such folder"))
                    continue
                if package == "":
                    package = "."
                if not os.path.exists(os.path.join(root, package, "BUILD")):
                    missing.append((doc, number, "//" + label.group(1), "no such package"))
                elif name and name not in ("all", "*") and not target_defined(root, package,
                                                                              name):
                    missing.append((doc, number, label.group(0), "no such target"))
            for match in PATH.finditer(text):
                checked += 1
                path = re.sub(r"(:\d+(-\d+)?|#.*)$", "", match.group(1)).rstrip(".,;:")
                if PLACEHOLDER.search(path) or path.startswith("//"):
                    continue
                if text[match.start() - 2:match.start()] == "//" or \
                        text[max(0, match.start() - 1):match.start()] in ("/", ":"):
                    continue  # Part of a label or of an absolute path elsewhere.
                if not os.path.exists(os.path.join(root, path)) and not built(root, path):
                    missing.append((doc, number, path, "no such file"))
        for number, line in enumerate(lines, 1):
            for word in COMMIT.findall(line):
                checked += 1
                if re.search(r"[0-9]", word) and re.search(r"[a-f]", word):
                    missing.append((doc, number, word, "looks like a commit hash"))
            for script in OUTSIDE_SCRIPT.findall(line):
                missing.append((doc, number, script, "a script outside the repository"))
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                checked += 1
                resolved = (os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path
                            else doc)
                full = os.path.join(root, resolved)
                if not os.path.exists(full):
                    missing.append((doc, number, target, "broken link"))
                elif anchor and resolved.endswith(".md") and anchor not in anchors(full):
                    missing.append((doc, number, target, "no such heading"))
    return missing, checked


def main():
    root = checkout_root()
    missing, checked = check(root)
    for doc, number, what, why in missing:
        print("%s:%d: %s: %s" % (doc, number, what, why))
    if missing:
        print("%d reference(s) in the docs name nothing in the checkout" % len(missing))
        return 1
    print("every file, folder, target and flag the docs name exists (%d references)" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
