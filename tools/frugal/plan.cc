// frugal plan: the memory plan of a config's training graph, per strategy,
// computed without allocating or training.
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/recompute.h"
#include "frugal/train.h"

DEFINE_bool(json, false, "print JSON: one object per strategy (plan) or per op (ops)");
DEFINE_string(timeline, "",
              "write FILE.svg or FILE.png: every strategy's live arena bytes on one scale, then each one's over the "
              "step, by kind, with the arena, the lower bound, the backward pass, the recomputation and the tensors "
              "live at the peak");
DEFINE_bool(explain, false,
            "after the plan, which step of the planner chose it, its peak step with the tensors live there, and one "
            "line per block of the forward graph (cut at its split candidates): what it recomputes, what it keeps "
            "for the backward pass, and the recomputation's FLOPs");
DEFINE_string(diff, "",
              "A,B: two strategies or budgets (e.g. sqrt,budget=60MiB): their arenas and recomputation, and per block "
              "where they differ what each recomputes and keeps");
DEFINE_int32(ranks, 1,
             "the ranks of the data-parallel run planned for: with --shard optimizer, each rank's share of the "
             "optimizer state (rank 0's, the largest, is printed)");
DECLARE_string(fit);
DECLARE_string(shard);
DECLARE_string(memory);

namespace frugal::cli {
namespace {

// What a block recomputes, in a few words: nothing, all, or its first
// names and how many of its nodes.
std::string Recomputes(const Graph& g, const BlockReport& r) {
  if (r.recomputed.empty()) return "nothing";
  if (static_cast<int>(r.recomputed.size()) == r.nodes) return "all";
  constexpr size_t kNames = 3;  // names shown; the rest counted
  std::string what;
  for (size_t k = 0; k < r.recomputed.size() && k < kNames; ++k)
    what += Fmt(k ? ", " : "", g.node(r.recomputed[k]).name);
  if (r.recomputed.size() > kNames) what += Fmt(" and ", r.recomputed.size() - kNames, " more");
  return what + Fmt(" (", r.recomputed.size(), " of ", r.nodes, ")");
}

std::string Span(const Graph& g, const BlockReport& r) {
  return r.first == r.last ? g.node(r.first).name : Fmt(g.node(r.first).name, " .. ", g.node(r.last).name);
}

// --diff A,B: the two plans, then each block whose recomputation differs.
int Diff(const ConfigFile& cfg) {
  const size_t comma = FLAGS_diff.find(',');
  if (comma == std::string::npos || FLAGS_diff.find(',', comma + 1) != std::string::npos)
    throw Error(Fmt("--diff ", FLAGS_diff,
                    ": give two strategies or budgets separated by a comma, e.g. --diff sqrt,budget=60MiB"));
  const Model a = BuildModel(cfg, ParseMemoryStrategy(FLAGS_diff.substr(0, comma)));
  const Model b = BuildModel(cfg, ParseMemoryStrategy(FLAGS_diff.substr(comma + 1)));
  const MemoryPlan &pa = a.train_plan, &pb = b.train_plan;
  const std::string na = pa.strategy.Name(), nb = pb.strategy.Name();
  std::printf("%s -> %s: arena %s -> %s, recompute %.1f -> %.1f MFLOP (+%.1f%% -> +%.1f%% FLOPs)\n", na.c_str(),
              nb.c_str(), HumanBytes(pa.arena_bytes).c_str(), HumanBytes(pb.arena_bytes).c_str(), pa.extra_flops / 1e6,
              pb.extra_flops / 1e6, 100 * pa.extra_flops_ratio(), 100 * pb.extra_flops_ratio());
  const std::vector<BlockReport> ba = ExplainBlocks(a.train), bb = ExplainBlocks(b.train);
  std::printf("%6s  %-40s %-40s %-40s %23s %23s\n", "block", "first .. last", (na + " recomputes").c_str(),
              (nb + " recomputes").c_str(), "keeps", "recompute MFLOP");
  int differ = 0;
  for (size_t k = 0; k < ba.size() && k < bb.size(); ++k) {
    if (ba[k].recomputed == bb[k].recomputed) continue;
    ++differ;
    const std::string keeps = Fmt(HumanBytes(ba[k].kept_bytes), " -> ", HumanBytes(bb[k].kept_bytes));
    char flops[64];
    std::snprintf(flops, sizeof flops, "%.1f -> %.1f", ba[k].recompute_flops / 1e6, bb[k].recompute_flops / 1e6);
    std::printf("%6zu  %-40s %-40s %-40s %23s %23s\n", k, Span(a.train, ba[k]).c_str(),
                Recomputes(a.train, ba[k]).c_str(), Recomputes(b.train, bb[k]).c_str(), keeps.c_str(), flops);
  }
  std::printf("%d of %zu blocks differ\n", differ, ba.size());
  return 0;
}

// --explain: the plan's blocks (ExplainBlocks) and its peak (Timeline).
void Explain(const Model& m) {
  const Graph& g = m.train;
  const MemoryPlan& p = m.train_plan;
  const MemoryTimeline tl = Timeline(g, p);
  std::string live;
  for (const auto& [name, bytes] : tl.peak_tensors) live += Fmt(live.empty() ? "" : ", ", name, " ", HumanBytes(bytes));
  std::printf("%s: chosen by %s; peak %s at step %d of %d (%s): %s\n", p.strategy.Name().c_str(), p.found_by.c_str(),
              HumanBytes(tl.peak_bytes).c_str(), tl.peak_step, g.num_nodes(), g.node(tl.peak_step).name.c_str(),
              live.c_str());
  std::printf("%6s %6s  %-40s %-48s %12s %12s\n", "block", "nodes", "first .. last", "recomputes", "keeps",
              "recompute");
  const std::vector<BlockReport> blocks = ExplainBlocks(g);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const BlockReport& r = blocks[b];
    const std::string what = Recomputes(g, r), span = Span(g, r);
    std::printf("%6zu %6d  %-40s %-48s %12s %9.1f MF\n", b, r.nodes, span.c_str(), what.c_str(),
                HumanBytes(r.kept_bytes).c_str(), r.recompute_flops / 1e6);
  }
}

}  // namespace

int Plan() {
  if (!FLAGS_timeline.empty()) CheckTimelinePath(FLAGS_timeline);  // before the planning
  ConfigFile cfg = LoadConfigFromFlags();
  if (!FLAGS_diff.empty()) {
    if (FLAGS_json || FLAGS_explain || !FLAGS_fit.empty())
      throw Error("--diff prints text about two plans: drop --json, --explain and --fit");
    return Diff(cfg);
  }
  std::vector<MemoryStrategy> strategies;
  if (FLAGS_memory == "all") {
    if (FLAGS_explain)
      throw Error("--explain explains one plan: give --memory one strategy (share, sqrt, budget=SIZE, ...), not all");
    strategies = AllMemoryStrategies();
  } else {
    strategies = {ConfigStrategy(cfg)};
  }
  if (FLAGS_explain && (FLAGS_json || !FLAGS_fit.empty()))
    throw Error("--explain prints text about one plan: drop --json (its objects have found_by) and --fit");
  // Per rank: rank 0 holds the largest slice of a sharded optimizer state.
  OptimizerShard shard;
  if (ShardOptimizerFromFlags()) {
    FRUGAL_REQUIRE(FLAGS_ranks > 1, "--shard ", FLAGS_shard,
                   " splits the optimizer state over the ranks of the run: give their number, --ranks N (N >= 2)");
    FRUGAL_REQUIRE(FLAGS_fit.empty(), "--fit does not plan a sharded run yet: drop --shard or --fit");
    shard = {0, FLAGS_ranks};
  }
  if (!FLAGS_fit.empty()) {
    if (!FLAGS_timeline.empty())
      throw Error(
          "--fit plans many batch sizes and --timeline draws one plan: drop one (the timeline of a batch: "
          "--batch N --timeline FILE)");
    return PlanFit(cfg, strategies);
  }
  // A limit bounds the process, which holds the data as training does.
  DataSources data;
  if (strategies.front().limit()) data = OpenDataToPlan(cfg);
  std::vector<TimelinePanel> panels;
  int64_t batch = 0;
  for (const MemoryStrategy& s : strategies) {
    Model m = BuildModel(cfg, s, {}, shard);
    batch = m.batch;
    const MemoryPlan& p = m.train_plan;
    if (!FLAGS_timeline.empty()) {
      panels.push_back({s.Name(), Timeline(m.train, p, kTimelinePoints), p.arena_bytes, p.lower_bound_bytes,
                        p.num_recomputed, 100 * p.extra_flops_ratio()});
    }
    const int64_t state = m.update_plan.state_bytes, sums = m.accumulate_plan.state_bytes;
    const int64_t update = m.update_plan.arena_bytes + m.accumulate_plan.arena_bytes;  // clipping's workspace
    if (FLAGS_json) {
      std::printf("%s\n", ModelPlanJson(m, s, FLAGS_ranks).c_str());
    } else {
      if (&s == &strategies.front()) {
        std::string defines;
        for (const std::string& d : g_defines) defines += " --define " + d;
        const std::string ranks = FLAGS_ranks == 1  ? ""
                                  : shard.ranks > 1 ? Fmt("; per rank of ", FLAGS_ranks,
                                                          " with --shard optimizer (rank 0, the largest slice)")
                                                    : Fmt("; per rank of ", FLAGS_ranks, " (each holds everything)");
        std::printf("%s%s: batch %lld, data %s, %s, %s%s\n", cfg.path.c_str(), defines.c_str(),
                    static_cast<long long>(m.batch), m.data_shape.ToString().c_str(), cfg.net.dtype().c_str(),
                    m.optimizer.c_str(), ranks.c_str());
        std::printf("%-14s %10s %10s %10s %10s %10s %10s %10s %10s %8s %9s%s\n", "strategy", "arena", "live peak",
                    "params", "gradients", "opt state", "inputs", "other", "total", "recomp.", "+FLOPs", "  plan ms");
      }
      // inputs: a batch for train and one for eval; other: the evaluation
      // arena and the update's (clipping's workspace).
      const int64_t inputs = p.input_bytes + m.eval_plan.input_bytes;
      const int64_t other = m.eval_plan.arena_bytes + update;
      char predicted[96] = "";
      if (p.priced())
        std::snprintf(predicted, sizeof predicted, "  predicted step %.1f ms (recompute %.1f ms)", p.step_ms,
                      p.extra_ms);
      std::printf("%-14s %10s %10s %10s %10s %10s %10s %10s %10s %8d %8.1f%% %8.2f%s\n", s.Name().c_str(),
                  HumanBytes(p.arena_bytes).c_str(), HumanBytes(p.lower_bound_bytes).c_str(),
                  HumanBytes(p.param_bytes).c_str(), HumanBytes(p.param_grad_bytes).c_str(),
                  HumanBytes(state + sums).c_str(), HumanBytes(inputs).c_str(), HumanBytes(other).c_str(),
                  HumanBytes(PlannedFootprint(m)).c_str(), p.num_recomputed, 100 * p.extra_flops_ratio(), p.plan_ms,
                  predicted);
      if (s.limit())
        std::printf("process peak %s, within %s (the data in memory counted as `frugal train` holds it)\n",
                    m.process.ToString().c_str(), s.Name().c_str());
    }
    if (FLAGS_explain) Explain(m);
  }
  if (!FLAGS_timeline.empty()) {
    std::string title = cfg.net.name().empty() ? cfg.path : cfg.net.name();
    for (const std::string& d : g_defines) title += " " + d;  // the depth, the sequence length
    WriteTimeline(FLAGS_timeline, Fmt(title, ", batch ", batch), panels);
    std::printf("timeline: %s\n", FLAGS_timeline.c_str());
  }
  return 0;
}

}  // namespace frugal::cli
