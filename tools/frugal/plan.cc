// frugal plan: the memory plan of a config's training graph, per strategy,
// computed without allocating or training.
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/train.h"

DEFINE_bool(json, false, "print JSON: one object per strategy (plan) or per op (ops)");

DECLARE_string(memory);

namespace frugal::cli {

int Plan() {
  ConfigFile cfg = LoadConfigFromFlags();
  std::vector<MemoryStrategy> strategies;
  if (FLAGS_memory == "all") {
    strategies = AllMemoryStrategies();
  } else {
    strategies = {ParseMemoryStrategy(cfg.net.memory().strategy())};
  }
  for (const MemoryStrategy& s : strategies) {
    Model m = BuildModel(cfg, s);
    const MemoryPlan& p = m.train_plan;
    if (FLAGS_json) {
      std::printf("%s\n", PlanToJson(p, m.batch).c_str());
    } else {
      std::printf("%-12s arena %10s  lower bound %10s  params %10s  recompute %5d nodes, +%5.1f%% FLOPs  plan %8.2f ms\n",
                  s.Name().c_str(), HumanBytes(p.arena_bytes).c_str(), HumanBytes(p.lower_bound_bytes).c_str(),
                  HumanBytes(p.param_bytes).c_str(), p.num_recomputed, 100 * p.extra_flops_ratio(), p.plan_ms);
    }
  }
  return 0;
}

}  // namespace frugal::cli
