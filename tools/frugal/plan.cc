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
DECLARE_string(fit);
DECLARE_string(memory);

namespace frugal::cli {

int Plan() {
  ConfigFile cfg = LoadConfigFromFlags();
  std::vector<MemoryStrategy> strategies;
  if (FLAGS_memory == "all") {
    strategies = AllMemoryStrategies();
  } else {
    strategies = {ConfigStrategy(cfg)};
  }
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
  }
  if (!FLAGS_timeline.empty()) {
    const std::string name = cfg.net.name().empty() ? cfg.path : cfg.net.name();
    WriteTimelineSvg(FLAGS_timeline, Fmt(name, ", batch ", batch), panels);
    std::printf("timeline: %s\n", FLAGS_timeline.c_str());
  }
  return 0;
}

}  // namespace frugal::cli
