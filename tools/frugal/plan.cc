// frugal plan: the memory plan of a config's training graph, per strategy,
// computed without allocating or training.
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/train.h"

DEFINE_bool(json, false, "print one JSON object per strategy");

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
  for (MemoryStrategy s : strategies) {
    Model m = BuildModel(cfg, s);
    if (FLAGS_json) {
      std::printf("%s\n", PlanToJson(m.train_plan, m.batch).c_str());
    } else {
      std::printf("%-8s %s, %d blocks, %d in place, planned in %.2f ms\n", MemoryStrategyName(s),
                  PlanSummary(m.train_plan, m.batch).c_str(), m.train_plan.num_blocks, m.train_plan.num_inplace,
                  m.train_plan.plan_ms);
    }
  }
  return 0;
}

}  // namespace frugal::cli
