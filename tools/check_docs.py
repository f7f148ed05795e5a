#!/usr/bin/env python3
"""Checks that the docs say what is true of this tree and this build:

  links      every relative link and every repository path written in
             README.md and docs/ exists (a git-ignored path, made by a
             data script or a run, passes)
  flags      every --flag written after `frugal COMMAND` (in a code block or
             one inline code span) is in `frugal COMMAND --help`, and one
             alone in an inline code span (`--memory-limit SIZE`) is some
             command's
  ops        every op in docs/reference/ops.md, and every `op: "..."` in a
             config shown in the docs, is registered (`frugal ops --json`)
  claims     no doc says every op has a CUDA kernel while one has none
  generated  docs/reference/ is what tools/gen_reference.py writes today
  narration  no .md file in the repository narrates how it was written
             (sessions, stops, other people's builds, dated section titles)
  sizes      README.md, docs/benchmarks.md and docs/ARCHITECTURE.md stay within
             their line counts (200, 300, 400), and no table cell of
             docs/ARCHITECTURE.md is over 300 characters
  runnable   every block fenced as ```sh runnable runs from the repository
             root (build/frugal standing for --frugal) and exits 0

  tools/check_docs.py --frugal build/frugal [--only CHECK[,CHECK...]]

Exits 1 after printing one line per problem, FILE:LINE: what is wrong.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKS = ["links", "flags", "ops", "claims", "generated", "narration", "sizes", "runnable"]
# Hand-written pages whose tables stay tables: detail goes to prose.
SHORT_CELLS = ["docs/ARCHITECTURE.md"]
MAX_CELL = 300
# Pages a user reads whole: what does not fit goes to docs/guide/ or
# docs/design/.
MAX_LINES = {"README.md": 200, "docs/benchmarks.md": 300, "docs/ARCHITECTURE.md": 400}

# Phrases that narrate the work instead of describing frugal. A doc says what
# is true now; when and by whom it was found out is the git log's.
NARRATION = [
    (r"\b(this|that|each|every|another|no|one|a later|the next|the previous|"
     r"first|second|third|fourth|fifth|sixth|seventh|eighth|later|earlier)\s+session", "a session"),
    (r"\bsessions\b", "sessions"),
    (r"'s\s+(first|second|third|fourth|fifth|sixth|seventh|eighth|last)\s+stop\b", "a numbered stop"),
    (r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|last|this|that|each)\s+stop\)", "a numbered stop"),
    (r"\bsince\s+(the\s+)?\S+\s+stop\b", "since a stop"),
    (r"another build (was )?running", "another build running"),
    (r"other (engineer|people)'s build", "other people's builds"),
    (r"(another engineer|other engineers)", "another engineer"),
    (r"(held|busy|loaded) (by|with) (another|other)", "the machine shared with other work"),
    (r"shared with other (builds|work|jobs|runs)", "the machine shared with other work"),
    (r"the machine's load", "the machine's load"),
    (r"\bsuperseded\b", "superseded text"),
]
DATED_HEADING = re.compile(r"^#+ .*\(\d{4}-\d{2}-\d{2}")

problems = []


def problem(path, line, text):
    problems.append(f"{os.path.relpath(path, ROOT)}:{line}: {text}")


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def doc_files():
    """README.md and docs/**/*.md: the docs a user reads."""
    files = [os.path.join(ROOT, "README.md")]
    for d, dirs, names in os.walk(os.path.join(ROOT, "docs")):
        dirs.sort()
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    return files


def all_md_files():
    """Every .md file of the repository (git's list, or a walk without builds)."""
    r = run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "*.md"])
    if r.returncode == 0:
        return [os.path.join(ROOT, p) for p in r.stdout.split()]
    out = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        out += [os.path.join(d, n) for n in names if n.endswith(".md")]
    return out


def parse(path):
    """[(kind, first line number, text)]: kind 'code' (with the fence's info
    string as a 4th item) or 'text' (one paragraph, lines joined)."""
    with open(path) as f:
        lines = f.read().split("\n")
    parts, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*(```+|~~~+)\s*(.*)$", lines[i])
        if m:
            fence, info, start = m.group(1), m.group(2).strip(), i + 1
            i += 1
            body = []
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            parts.append(("code", start, "\n".join(body), info))
            i += 1
            continue
        if not lines[i].strip():
            i += 1
            continue
        start, para = i + 1, []
        while i < len(lines) and lines[i].strip() and not re.match(r"^\s*(```|~~~)", lines[i]):
            para.append(lines[i])
            i += 1
        parts.append(("text", start, "\n".join(para), ""))
    return parts


# ---- links and paths --------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
TOP_DIRS = "include|src|tools|models|data|docs|tests|cmake|\\.ci"
PATH = re.compile(r"(?<![\w./$-])((?:" + TOP_DIRS + r")/[A-Za-z0-9_.+/-]*[A-Za-z0-9_+])(?![\w<*{$])")


def ignored(rel):
    # A folder a script makes (data/toy-imagenet/train) is ignored by a
    # pattern ending in "/", which git matches only when told it is a folder.
    return any(run(["git", "-C", ROOT, "check-ignore", "-q", "--no-index", r]).returncode == 0
               for r in (rel, rel + "/"))


def check_links(files):
    for path in files:
        base = os.path.dirname(path)
        for kind, start, text, _ in parse(path):
            for n, line in enumerate(text.split("\n")):
                lineno = start + n
                if kind == "text":
                    for m in LINK.finditer(line):
                        target = m.group(1)
                        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                            continue
                        target = target.split("#")[0]
                        if not os.path.exists(os.path.normpath(os.path.join(base, target))):
                            problem(path, lineno, f"link to {target}: no such file")
                for m in PATH.finditer(line):
                    rel = m.group(1).rstrip(".")
                    if os.path.exists(os.path.join(ROOT, rel)) or ignored(rel):
                        continue
                    problem(path, lineno, f"path {rel}: no such file in the repository")


# ---- flags ------------------------------------------------------------------

GLOBAL_FLAGS = {"--help", "--v", "--minloglevel", "--log-dir", "--log_dir", "--define"}
# Flags of the other tools the docs name alone: frugal_bench_optimum's and
# mpirun's.
OTHER_TOOLS_FLAGS = {"--why", "--max-programs", "--seeds", "--planner-only", "--case", "--small", "--max-builds",
                     "--oversubscribe", "--allow-run-as-root", "--hostfile"}
COMMAND = re.compile(r"(?:^|[\s/(])frugal\s+([a-z][a-z0-9-]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*)")


def command_flags(frugal):
    cmds = {}
    for line in run([frugal, "help"]).stdout.splitlines():
        m = re.match(r"^  (\S+)\s+", line)
        if m:
            cmds[m.group(1)] = None
    for c in cmds:
        out = run([frugal, c, "--help"]).stdout
        cmds[c] = {m.group(1).replace("_", "-") for m in re.finditer(r"^  (--[a-z0-9_-]+)", out, re.M)}
    return cmds


def flag_scopes(kind, text):
    """(line offset, command, text after it) for each `frugal COMMAND`."""
    scopes = []
    if kind == "code":
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            m = COMMAND.search(lines[i])
            if not m:
                i += 1
                continue
            first, rest = i, lines[i][m.end():]
            # A command continues over lines ending in '\' and over indented
            # lines of [--flag ...] (usage synopses).
            while i + 1 < len(lines) and (lines[i].rstrip().endswith("\\") or
                                          re.match(r"^\s+[\[-]", lines[i + 1]) and not COMMAND.search(lines[i + 1])):
                i += 1
                rest += " " + lines[i]
            rest = re.split(r"\s(?:\||;|&&|>|2>|#)\s", rest)[0]
            scopes.append((first, m.group(1), rest))
            i += 1
    else:
        for m in re.finditer(r"`([^`]+)`", text):
            span = m.group(1)
            c = COMMAND.search(span)
            if c:
                offset = text[:m.start()].count("\n")
                scopes.append((offset, c.group(1), span[c.end():]))
    return scopes


def check_flags(files, frugal):
    cmds = command_flags(frugal)
    every = set().union(*cmds.values())
    for path in files:
        for kind, start, text, _ in parse(path):
            for offset, cmd, rest in flag_scopes(kind, text):
                if cmd not in cmds:
                    continue  # "frugal is", "frugal does": prose, not a command
                for m in FLAG.finditer(rest):
                    flag = m.group(1).replace("_", "-")
                    negated = "--" + flag[4:] if flag.startswith("--no") else None  # gflags' --noX
                    if flag in GLOBAL_FLAGS or flag in cmds[cmd] or negated in cmds[cmd]:
                        continue
                    problem(path, start + offset, f"`frugal {cmd}` has no {m.group(1)} (frugal {cmd} --help)")
            # A flag alone in prose's inline code (`--memory-limit SIZE` in a
            # table) is some command's flag, or one of another tool's that
            # the docs name.
            if kind == "code":
                continue
            for m in re.finditer(r"`(--[a-z][a-z0-9_-]*)[^`]*`", text):
                flag = m.group(1).replace("_", "-")
                negated = "--" + flag[4:] if flag.startswith("--no") else None
                if flag in GLOBAL_FLAGS or flag in every or negated in every or flag in OTHER_TOOLS_FLAGS:
                    continue
                problem(path, start + text[:m.start()].count("\n"), f"no command has {m.group(1)} (frugal help)")


# ---- ops ----------------------------------------------------------------------

def registered_ops(frugal):
    out = run([frugal, "ops", "--json"]).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def check_ops(files, frugal):
    names = {o["name"] for o in registered_ops(frugal)}
    ref = os.path.join(ROOT, "docs/reference/ops.md")
    if not os.path.exists(ref):
        problem(ref, 0, "missing (tools/gen_reference.py writes it)")
    for path in files:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                named = re.findall(r"\bop:\s*\"([A-Za-z_0-9]+)\"", line)
                if path == ref:
                    named += re.findall(r"^\| `([A-Za-z_0-9]+)(?: \(loss\))?` \|", line)
                for op in named:
                    if op not in names and op != "variable":
                        problem(path, n, f"op '{op}' is not registered (frugal ops)")


def check_claims(files, frugal):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import gen_reference
    ops = registered_ops(frugal)
    cuda = gen_reference.cuda_ops(ops)
    no_cuda = [o["name"] for o in ops if not o["backward"] and o["name"] not in cuda]
    if not no_cuda:
        return
    for path in files:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if re.search(r"every op has a CUDA kernel|all ops have (a )?CUDA kernels?|every op runs on the GPU", line, re.I):
                    problem(path, n, "says every op has a CUDA kernel; these have none: " + ", ".join(no_cuda))


# ---- generated pages, narration, runnable blocks -------------------------------

def check_generated(frugal):
    r = run([sys.executable, os.path.join(ROOT, "tools/gen_reference.py"), "--frugal", frugal, "--check"])
    if r.returncode != 0:
        problems.append((r.stdout + r.stderr).strip())


def check_narration():
    for path in all_md_files():
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if DATED_HEADING.search(line):
                    problem(path, n, "a dated section title: say what is true now (the date goes in a 'measured' line)")
                for pattern, what in NARRATION:
                    if re.search(pattern, line, re.I):
                        problem(path, n, f"narrates the work ({what}): say what is true now; history is git log's")


def check_sizes():
    for rel, limit in MAX_LINES.items():
        with open(os.path.join(ROOT, rel)) as f:
            n = sum(1 for _ in f)
        if n > limit:
            problem(os.path.join(ROOT, rel), n, f"{n} lines (at most {limit}): move detail to docs/guide/ or docs/design/")
    for rel in SHORT_CELLS:
        path = os.path.join(ROOT, rel)
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.startswith("|"):
                    continue
                for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]:
                    if len(c.strip()) > MAX_CELL:
                        problem(path, n, f"a table cell of {len(c.strip())} characters (at most {MAX_CELL}): "
                                "move the detail into prose below the table")


def check_runnable(files, frugal, timings):
    for path in files:
        for kind, start, text, info in parse(path):
            if kind != "code" or info.split()[:2] != ["sh", "runnable"]:
                continue
            # The binary and the Python package beside it (build/python).
            script = text.replace("build/frugal", frugal).replace(
                "build/python", os.path.join(os.path.dirname(frugal), "python"))
            t0 = time.time()
            try:
                r = run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, timeout=300)
                code, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                code, out = "timeout (300 s)", ""
            timings.append((os.path.relpath(path, ROOT), start, time.time() - t0))
            if code != 0:
                tail = "\n    ".join(out.strip().split("\n")[-8:])
                problem(path, start, f"runnable block exited {code}:\n    {tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frugal", default=os.path.join(ROOT, "build/frugal"))
    ap.add_argument("--only", default=",".join(CHECKS))
    args = ap.parse_args()
    frugal = os.path.abspath(args.frugal)
    only = args.only.split(",")
    for c in only:
        if c not in CHECKS:
            sys.exit(f"check_docs: no check '{c}' (checks: {', '.join(CHECKS)})")
    files = doc_files()
    timings = []
    t0 = time.time()
    if "links" in only:
        check_links(files)
    if "flags" in only:
        check_flags(files, frugal)
    if "ops" in only:
        check_ops(files, frugal)
    if "claims" in only:
        check_claims(files, frugal)
    if "generated" in only:
        check_generated(frugal)
    if "narration" in only:
        check_narration()
    if "sizes" in only:
        check_sizes()
    if "runnable" in only:
        check_runnable(files, frugal, timings)
    for f, line, s in timings:
        print(f"runnable {f}:{line}: {s:.1f} s")
    for p in problems:
        print(p)
    print(f"check_docs: {len(files)} docs, {', '.join(only)}: {len(problems)} problems ({time.time() - t0:.1f} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
