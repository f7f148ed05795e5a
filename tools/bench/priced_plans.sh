#!/usr/bin/env bash
# Plans priced in time (issue 18 §3), per model, in ROUNDS rounds; each round:
#   1. `frugal time --save-costs` measures each op under share (the table,
#      with the time a cold byte costs, fitted on the ops run under sqrt too);
#   2. for share, drop_cheap, sqrt and two budgets between sqrt's and share's
#      arenas, `frugal time --costs` prints the plan's predicted step beside
#      the measured one, and `frugal plan` the step the same table predicts
#      with ms_per_cold_byte 0 (every op at its time under share);
#   3. at each budget, the measured step of the FLOP-priced plan (no table)
#      against the time-priced one.
# Each row gives the median over the rounds (and the range): ratios from one
# round's table and steps, so a slow round does not mix with a fast one.
#   tools/bench/priced_plans.sh [ITERS] [ROUNDS]
# Steps are the fastest of ITERS (the cost table's unit), the least slowed by
# other processes and stolen time on a shared machine.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for these figures.
set -euo pipefail
export FRUGAL=${FRUGAL:-build/frugal} ITERS=${1:-5} ROUNDS=${2:-3}
exec python3 - <<'PY'
import json, os, re, statistics, subprocess, tempfile

frugal, iters, rounds = os.environ["FRUGAL"], os.environ["ITERS"], int(os.environ["ROUNDS"])
env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
tmp_dir = tempfile.TemporaryDirectory()  # removed at exit, tables and all
tmp = tmp_dir.name


def run(*args):
    return subprocess.run([frugal, *args], env=env, check=True, capture_output=True, text=True).stdout


def ftime(model, time_args, *args):
    return run("time", *model, *time_args, "--iters", iters, "--warmup", "1", "--data-grad=false", *args)


def plan_json(model, *args):
    return json.loads(run("plan", *model, "--json", *args).splitlines()[0])


def fastest(out):
    return float(re.search(r"^step \(forward \+ backward, batch \d+\): .* fastest ([0-9.]+) ms", out, re.M).group(1))


def spread(xs, fmt="{:.3f}"):
    return (fmt + " ({}-{})").format(statistics.median(xs), fmt.format(min(xs)), fmt.format(max(xs)))


def bench(name, model, time_args=()):
    print(f"## {name}\n")
    share = plan_json(model, "--memory", "share")["arena_bytes"]
    sqrt = plan_json(model, "--memory", "sqrt")["arena_bytes"]
    budgets = [sqrt + (share - sqrt) // 3, sqrt + 2 * (share - sqrt) // 3]
    plans = ["share", "drop_cheap", "sqrt"] + [f"budget={b}" for b in budgets]
    rows = {p: {"pred": [], "pred0": [], "meas": [], "rec": [], "arena": ""} for p in plans}
    priced = {b: [] for b in budgets}
    betas = []
    for _ in range(rounds):
        costs, flat = f"{tmp}/costs", f"{tmp}/flat.costs"
        out = ftime(model, time_args, "--memory", "share", "--save-costs", costs)
        betas.append(float(re.search(r"^locality: ([0-9.]+) ps", out, re.M).group(1)))
        with open(costs) as f, open(flat, "w") as g:
            g.write(re.sub(r"^ms_per_cold_byte .*$", "ms_per_cold_byte 0", f.read(), flags=re.M))
        for p in plans:
            out = ftime(model, time_args, "--memory", p, "--costs", costs)
            m = re.search(r"predicted by the cost table \S+: step ([0-9.]+) ms \(recomputation ([0-9.]+) ms\), "
                          r"measured ([0-9.]+) ms fastest", out)
            r = rows[p]
            r["pred"].append(float(m.group(1)))
            r["rec"].append(float(m.group(2)))
            r["meas"].append(float(m.group(3)))
            r["pred0"].append(plan_json(model, "--memory", p, "--costs", flat)["predicted_step_ms"])
            r["arena"] = re.search(r"arena planned ([0-9.]+ \S+),", out).group(1)
        for b in budgets:
            by_flops = fastest(ftime(model, time_args, "--memory", f"budget={b}"))
            by_time = fastest(ftime(model, time_args, "--memory", f"budget={b}", "--costs", costs))
            priced[b].append(by_time / by_flops)
    print(f"ms_per_cold_byte fitted: {spread(betas, '{:.1f}')} ps per byte\n")
    print("| plan | arena | recompute, predicted | step, predicted | fastest step, measured | "
          "predicted / measured | without locality |")
    print("|---|---|---|---|---|---|---|")
    for p in plans:
        r = rows[p]
        ratio = [a / b for a, b in zip(r["pred"], r["meas"])]
        ratio0 = [a / b for a, b in zip(r["pred0"], r["meas"])]
        print(f"| {p} | {r['arena']} | {statistics.median(r['rec']):.1f} ms | {statistics.median(r['pred']):.1f} ms | "
              f"{statistics.median(r['meas']):.1f} ms | {spread(ratio)} | {spread(ratio0)} |")
    print("\n| budget | time-priced / FLOP-priced, fastest step |\n|---|---|")
    for b in budgets:
        print(f"| {b / 2**20:.1f} MiB | {spread(priced[b])} |")
    print()


bench("ResNet-164 (1x28x28, batch 32)",
      ["--config", "models/resnet/resnet_cifar.prototxt", "--define", "depth=164", "--define", "channels=1",
       "--define", "size=28", "--define", "batch=32"])
bench("LSTM 2x256, 128 steps, batch 32, vocabulary 1000",
      ["--config", "models/lstm/lstm_lm.prototxt", "--define", "layers=2", "--define", "hidden=256", "--define",
       "seq_len=128", "--define", "batch=32", "--define", "vocab=1000", "--define", "outputs=$(${seq_len} - 1)"],
      ["--token-data", "1000"])
PY
