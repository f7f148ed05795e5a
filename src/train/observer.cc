#include "train/observer.h"

#include <string>
#include <vector>

#include "train/step.h"

namespace frugal {

Run::Run(const ConfigFile& cfg, const TrainOptions& opts, Session* s, DataParallel* dp, int64_t batches)
    : cfg(cfg),
      sc(cfg.net.solver()),
      opts(opts),
      s(*s),
      dp(dp),
      iter_size(sc.iter_size()),
      batches(batches),
      metrics(MetricNames(sc)),
      progress(opts.progress),
      epoch_m(metrics) {}

MetricValues Run::Reduce(const MetricSet& m) const { return dp ? dp->Reduce(m) : LocalValues(m); }

int64_t Run::Sum(int64_t v) const { return dp ? dp->Sum(v) : v; }

void Run::AverageAux() {
  if (!dp || s.aux.empty()) return;
  s.engine->WaitAll();
  dp->AverageAcrossRanks(s.aux);
}

}  // namespace frugal
