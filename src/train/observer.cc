#include "train/observer.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "train/step.h"

namespace frugal {

namespace {
int64_t TokensPerSample(const config::Data& d) {
  if (d.label_shape_size() == 0 || d.label_shape_size() != d.sample_shape_size()) return 0;
  int64_t tokens = 1;
  for (int k = 0; k < d.label_shape_size(); ++k) {
    if (d.label_shape(k) != d.sample_shape(k)) return 0;
    tokens *= d.label_shape(k);
  }
  return tokens;
}
}  // namespace

Run::Run(const ConfigFile& cfg, const TrainOptions& opts, Session* s, DataParallel* dp, int64_t batches)
    : cfg(cfg),
      sc(cfg.net.solver()),
      opts(opts),
      s(*s),
      dp(dp),
      iter_size(sc.iter_size()),
      batches(batches),
      metrics(MetricNames(sc)),
      tokens_per_sample(TokensPerSample(cfg.net.data())),
      progress(opts.progress),
      epoch_m(metrics) {}

MetricValues Run::Reduce(const MetricSet& m) const {
  const MetricValues local{m.Values(), m.count()};
  return dp ? dp->Reduce(local) : local;
}

int64_t Run::Sum(int64_t v) const { return dp ? dp->Sum(v) : v; }

void Run::AverageAcrossRanks() {
  if (!dp) return;
  s.engine->WaitAll();
  if (!s.aux.empty()) dp->AverageAcrossRanks(s.aux);
  if (!updated()) dp->AverageAcrossRanks(s.params.Sums());
}

void Run::CheckFinite(int64_t at, float lr) {
  for (const auto& [name, value] : epoch_m.Values()) {
    if (std::isfinite(value)) continue;
    s.engine->WaitAll();
    progress.Clear();
    const std::map<std::string, Tensor> w = OnHost(s.params.Values());
    const std::string bad = FirstNonFinite(w);
    throw Error(Fmt("iteration ", at, " (epoch ", epoch, "): the training loss is not a number (", name, "=", value,
                    "); ",
                    bad.empty() ? "the weights are finite, the largest is " + LargestMagnitude(w)
                                : "the first weight that is not is " + bad,
                    ". Nothing was checkpointed from it. ", NonFiniteAdvice(lr)));
  }
}

std::string NonFiniteAdvice(float lr) {
  return Fmt("Lower the learning rate (", lr,
             " now: --lr or solver.lr), set solver.clip_gradient, or check the data for NaN or Inf");
}

}  // namespace frugal
