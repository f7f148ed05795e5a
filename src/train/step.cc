#include "train/step.h"

#include <algorithm>

namespace frugal {

Step::Step(Session* s, DataParallel* dp, const config::Solver& sc)
    : s_(s),
      dp_(dp),
      sliced_(s->model.shard.ranks > 1 ? s->SlicedParams() : std::vector<SlicedTensor>{}),
      iter_size_(sc.iter_size()),
      seed_(sc.seed()) {}

void Step::Push(int64_t iter, float lr) {
  const int micro = static_cast<int>(iter % iter_size_);
  const bool last_micro = micro == iter_size_ - 1;
  // Data-parallel with iter_size > 1: the earlier micro-batches' sum is
  // averaged during the last one's forward, its gradients during its
  // backward; the micro-batches before it exchange nothing.
  if (dp_ && last_micro && iter_size_ > 1) dp_->PushAllReduce(s_->engine, /*of_sums=*/true);
  s_->train->Push(/*is_train=*/true, iter, seed_);
  if (dp_ && last_micro) dp_->PushAllReduce(s_->engine);
  // The gradient sums (iter_size > 1), then on the last micro-batch the
  // rescaling and clipping and one update per parameter, at update count
  // iter / iter_size + 1.
  if (s_->accumulate) s_->accumulate->Push(/*is_train=*/true, iter, seed_);
  if (!last_micro) return;
  s_->update->Push(/*is_train=*/true, iter / iter_size_ + 1, seed_, lr);
  if (!sliced_.empty()) dp_->PushGather(s_->engine, sliced_);
}

void Step::CheckRanks(int64_t iter) {
  if (!dp_ || iter % iter_size_ != 0 || !dp_->CheckDue(iter / iter_size_)) return;
  s_->engine->WaitAll();
  dp_->CheckConsistency(OnHost(s_->params.Values()), iter / iter_size_);
}

std::vector<std::string> MetricNames(const config::Solver& sc) { return {sc.metric().begin(), sc.metric().end()}; }

MetricSet Evaluate(Session* s, Feed* feed, DataIter* it, const config::Solver& sc) {
  MetricSet m(MetricNames(sc));
  DrainOnUnwind drain(s->engine);
  const int64_t batches =
      sc.val_batches() > 0 ? std::min(sc.val_batches(), it->batches_per_epoch()) : it->batches_per_epoch();
  for (int64_t b = 0; b < batches; ++b) {
    feed->PushLoad(it, b == 0 ? 0 : -1);
    s->Eval().Push(/*is_train=*/false, 0, 0);
    feed->PushMetrics({&m});
  }
  s->engine->WaitAll();
  return m;
}

}  // namespace frugal
