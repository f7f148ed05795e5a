// frugal plan: the memory plan of a config's training graph, per strategy,
// computed without allocating or training.
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/train.h"

DEFINE_bool(json, false, "print JSON: one object per strategy (plan) or per op (ops)");
DEFINE_string(timeline, "",
              "write FILE.svg: each strategy's live arena bytes over the step, by kind, with the arena, the lower "
              "bound, the recomputation and the tensors live at the peak");
DEFINE_bool(explain, false,
            "after the plan, which step of the planner chose it, its peak step with the tensors live there, and one "
            "line per block of the forward graph (cut at its split candidates): what it recomputes, what it keeps "
            "for the backward pass, and the recomputation's FLOPs");
DECLARE_string(fit);
DECLARE_string(memory);

namespace frugal::cli {
namespace {

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
    std::string what = r.recomputed.empty() ? "nothing" : static_cast<int>(r.recomputed.size()) == r.nodes ? "all" : "";
    if (what.empty()) {
      constexpr size_t kNames = 3;  // names shown; the rest counted
      for (size_t k = 0; k < r.recomputed.size() && k < kNames; ++k)
        what += Fmt(k ? ", " : "", g.node(r.recomputed[k]).name);
      if (r.recomputed.size() > kNames) what += Fmt(" and ", r.recomputed.size() - kNames, " more");
      what += Fmt(" (", r.recomputed.size(), " of ", r.nodes, ")");
    }
    const std::string span =
        r.first == r.last ? g.node(r.first).name : Fmt(g.node(r.first).name, " .. ", g.node(r.last).name);
    std::printf("%6zu %6d  %-40s %-48s %12s %9.1f MF\n", b, r.nodes, span.c_str(), what.c_str(),
                HumanBytes(r.kept_bytes).c_str(), r.recompute_flops / 1e6);
  }
}

}  // namespace

int Plan() {
  ConfigFile cfg = LoadConfigFromFlags();
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
  if (!FLAGS_fit.empty()) return PlanFit(cfg, strategies);
  std::vector<TimelinePanel> panels;
  int64_t batch = 0;
  for (const MemoryStrategy& s : strategies) {
    Model m = BuildModel(cfg, s);
    batch = m.batch;
    const MemoryPlan& p = m.train_plan;
    if (!FLAGS_timeline.empty()) {
      panels.push_back({s.Name(), Timeline(m.train, p, kTimelinePoints), p.arena_bytes, p.lower_bound_bytes,
                        p.num_recomputed, 100 * p.extra_flops_ratio()});
    }
    // The optimizer's state (and the iter_size sums) live beside the
    // parameters, outside the arena: the update graphs' kState variables.
    const int64_t state = m.update_plan.state_bytes, sums = m.accumulate_plan.state_bytes;
    const int64_t update = m.update_plan.arena_bytes + m.accumulate_plan.arena_bytes;  // clipping's workspace
    if (FLAGS_json) {
      std::string json = PlanToJson(p, m.batch);
      json.pop_back();
      std::printf(
          "%s,\"optimizer\":\"%s\",\"optimizer_state_bytes\":%lld,\"grad_sum_bytes\":%lld,"
          "\"update_arena_bytes\":%lld}\n",
          json.c_str(), m.optimizer.c_str(), static_cast<long long>(state), static_cast<long long>(sums),
          static_cast<long long>(update));
    } else {
      const std::string opt =
          Fmt(m.optimizer, " state ", HumanBytes(state), sums > 0 ? " + sums " + HumanBytes(sums) : std::string(),
              update > 0 ? " + update arena " + HumanBytes(update) : std::string());
      char predicted[96] = "";
      if (p.priced())
        std::snprintf(predicted, sizeof predicted, "  predicted step %.1f ms (recompute %.1f ms)", p.step_ms,
                      p.extra_ms);
      std::printf(
          "%-12s arena %10s  lower bound %10s  params %10s  %s  recompute %5d nodes, +%5.1f%% FLOPs  "
          "plan %8.2f ms%s\n",
          s.Name().c_str(), HumanBytes(p.arena_bytes).c_str(), HumanBytes(p.lower_bound_bytes).c_str(),
          HumanBytes(p.param_bytes).c_str(), opt.c_str(), p.num_recomputed, 100 * p.extra_flops_ratio(), p.plan_ms,
          predicted);
    }
    if (FLAGS_explain) Explain(m);
  }
  if (!FLAGS_timeline.empty()) {
    const std::string name = cfg.net.name().empty() ? cfg.path : cfg.net.name();
    WriteTimelineSvg(FLAGS_timeline, Fmt(name, ", batch ", batch), panels);
    std::printf("timeline: %s\n", FLAGS_timeline.c_str());
  }
  return 0;
}

}  // namespace frugal::cli
