#!/usr/bin/env python3
"""Every source file of src/ says where it is tested.

A source file src/.../foo.cc (or .cu) is tested by a test file of its name,
tests/**/foo_test.cc (or .cu), or by the test files a list item of
tests/README.md names beside it. Such an item names source files in
backquotes from the repository root (`src/ops/relu.cc`; a * matches any
part of one file name: `src/ops/cuda/*.cu`) and test files (.cc, .cu, .h)
in backquotes from tests/ (`ops/ops_test.cc`). The check fails naming each source file
with neither, each source file or pattern a line names that is not there,
and each test file it names that is not there. `make test` runs it (ctest:
layers_check).

    tools/check_tests.py [--root DIR]
"""
import argparse
import fnmatch
import os
import re
import sys

SOURCES = (".cc", ".cu")
TEST_FILES = (".cc", ".cu", ".h")
QUOTED = re.compile(r"`([^`]+)`")


def files_under(root, top, suffixes):
    """Paths relative to root of the files below root/top ending in suffixes."""
    out = []
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(suffixes)]
    return sorted(p.replace(os.sep, "/") for p in out)


def matches(pattern, path):
    """Whether `pattern` names `path`: the same folder, * within the file name."""
    return os.path.dirname(pattern) == os.path.dirname(path) and fnmatch.fnmatchcase(
        os.path.basename(path), os.path.basename(pattern))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    root = args.root
    sources = files_under(root, "src", SOURCES)
    tested_by_name = {os.path.basename(t)[:-len("_test.cc")] for t in files_under(root, "tests", ("_test.cc", "_test.cu"))}
    readme = os.path.join("tests", "README.md")
    problems = []
    listed = set()
    with open(os.path.join(root, readme), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.startswith("- "):
                continue
            names = QUOTED.findall(line)
            patterns = [n for n in names if n.startswith("src/")]
            if not patterns:
                continue
            tests = [n for n in names if not n.startswith("src/") and n.endswith(TEST_FILES)]
            missing = [t for t in tests if not os.path.isfile(os.path.join(root, "tests", t))]
            problems += [f"{readme}:{number}: tests/{t} is not there" for t in missing]
            if not tests:
                problems.append(f"{readme}:{number}: names no test file for {', '.join(patterns)}")
            for p in patterns:
                hits = [s for s in sources if matches(p, s)]
                if not hits:
                    problems.append(f"{readme}:{number}: {p} is not there")
                if tests and not missing:
                    listed.update(hits)
    for s in sources:
        stem = os.path.splitext(os.path.basename(s))[0]
        if stem not in tested_by_name and s not in listed:
            problems.append(f"{s}: no test of its name ({stem}_test.cc) and no line in {readme} naming its tests")
    for p in problems:
        print(p)
    by_name = [s for s in sources if os.path.splitext(os.path.basename(s))[0] in tested_by_name]
    print(f"check_tests: {len(sources)} source files, {len(by_name)} with a test of their name, "
          f"{len(listed - set(by_name))} with their tests in {readme}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
