#!/usr/bin/env python3
"""The folders of src/ are layers: includes go down, never up.

Each file of src/ belongs to its top folder (src/distributed/mpi/x.cc to
distributed); each public header include/frugal/X.h to the folder that
implements it (the one holding X.cc, or IMPLEMENTED_BY for headers without
one), and each public header of a subfolder, include/frugal/F/X.h, to the
folder src/F (include/frugal/passes/shapes.h to passes). An include of
a file of folder B from a file of folder A is an edge A -> B, and it must go
down LAYERS (B listed before A): then no includes make a cycle. An edge up
fails the check, naming the include lines that make it (file:line). `make
test` runs it (ctest: layers_check).

    tools/check_layers.py [--root DIR]
"""
import argparse
import collections
import functools
import os
import re
import sys

# Public headers with no X.cc of their name: the folder they belong to.
IMPLEMENTED_BY = {
    "bf16.h": "tensor",         # the bfloat16 conversions tensors use
    "dist.h": "distributed",
    "host_device.h": "base",    # FRUGAL_HOST_DEVICE, for code compiled by nvcc and g++
    "io.h": "io",
    "mxnet.h": "interchange",
    "onnx.h": "interchange",
    "train.h": "train",
    "update_rule.h": "ops",     # the optimizer rules the update ops' kernels apply
}
# Bottom to top.
LAYERS = ["base", "backend", "tensor", "engine", "graph", "ops", "passes", "executor", "config", "io", "distributed",
          "train", "interchange"]
SOURCES = (".cc", ".h", ".cu", ".cuh", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


@functools.lru_cache(maxsize=None)
def header_folder(name, root):
    """The folder implementing include/frugal/<name>."""
    if "/" in name:
        folder = name.split("/")[0]
        return folder if os.path.isdir(os.path.join(root, "src", folder)) else None
    if name in IMPLEMENTED_BY:
        return IMPLEMENTED_BY[name]
    stem = os.path.splitext(name)[0]
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        if stem + ".cc" in files:
            return os.path.relpath(dirpath, os.path.join(root, "src")).split(os.sep)[0]
    return None


def edges(root):
    """{(A, B): [(file, line, include)]} for every include from folder A into folder B != A."""
    out = collections.defaultdict(list)
    unknown = []
    files = []
    for top in ("src", "include/frugal"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(SOURCES)]
    for path in files:
        rel = os.path.relpath(path, root)
        parts = rel.split(os.sep)
        public = os.path.relpath(path, os.path.join(root, "include", "frugal")).replace(os.sep, "/")
        here = parts[1] if parts[0] == "src" else header_folder(public, root)
        if here is None:
            unknown.append(f"{rel}: no folder implements it (add it to IMPLEMENTED_BY, or a subfolder to src/)")
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if inc.startswith("frugal/"):
                    if inc.endswith(".pb.h"):
                        continue
                    there = header_folder(inc[len("frugal/"):], root)
                    if there is None:
                        unknown.append(f"{rel}:{number}: {inc}: no folder implements it "
                                       "(add it to IMPLEMENTED_BY, or a subfolder to src/)")
                        continue
                elif "/" in inc and os.path.exists(os.path.join(root, "src", inc)):
                    there = inc.split("/")[0]
                else:
                    continue  # the same folder, a generated header or a library's
                if there != here:
                    out[(here, there)].append((rel, number, inc))
    return out, unknown


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    found, unknown = edges(args.root)
    problems = list(unknown)
    level = {name: k for k, name in enumerate(LAYERS)}
    folders = sorted({f for edge in found for f in edge})
    problems += [f"src/{f}: not in LAYERS (add it where it belongs)" for f in folders if f not in level]
    up = {e for e in found if e[0] in level and e[1] in level and level[e[1]] > level[e[0]]}
    for a, b in sorted(up):
        lines = [f"{a} includes {b}, a layer above it (LAYERS: {' < '.join(LAYERS)}):"]
        lines += [f"  {rel}:{number}: #include \"{inc}\"" for rel, number, inc in found[(a, b)]]
        problems.append("\n".join(lines))
    for p in problems:
        print(p)
    print(f"check_layers: {len(folders)} folders, {len(found)} edges, {len(up)} up: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
