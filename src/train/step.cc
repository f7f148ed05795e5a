#include "train/step.h"

#include <utility>

#include "backend/device.h"

namespace frugal {
namespace {

// dst = src, on the CPU (cuda null) or on the stream of a LaunchAsync context.
void CopyOn(void* cuda, Tensor* dst, const Tensor& src) {
  if (!cuda) return dst->CopyFrom(src);
  backend::CopyAsync(cuda, dst->raw(), dst->device(), src.raw(), src.device(), dst->bytes());
}

// Every gradient times `rescale`, then clipped to a global norm of max_norm.
void RescaleAndClipOn(void* cuda, const std::vector<Param*>& ps, float rescale, float max_norm) {
  if (!cuda) {
    std::vector<Tensor*> all;
    for (Param* p : ps) all.push_back(&p->g);
    RescaleAndClip(all, rescale, max_norm);
    return;
  }
  std::vector<std::pair<float*, int64_t>> all;
  for (Param* p : ps) all.emplace_back(p->g.f(), p->g.size());
  backend::RescaleAndClipAsync(cuda, all, rescale, max_norm);
}

}  // namespace

Step::Step(Session* s, DataParallel* dp, const config::Solver& sc, const LrSchedule& lr)
    : s_(s), dp_(dp), lr_(lr), iter_size_(sc.iter_size()), clip_(sc.clip_gradient()), seed_(sc.seed()) {}

void Step::Push(int64_t iter, float* rate) {
  const int micro = static_cast<int>(iter % iter_size_);
  const bool last_micro = micro == iter_size_ - 1;
  // Data-parallel with iter_size > 1: the earlier micro-batches' sum is
  // averaged during the last one's forward, its gradients during its
  // backward; the micro-batches before it exchange nothing.
  if (dp_ && last_micro && iter_size_ > 1) dp_->PushAllReduce(s_->engine, /*of_sums=*/true);
  s_->train->Push(/*is_train=*/true, iter, seed_);
  if (dp_ && last_micro) dp_->PushAllReduce(s_->engine);
  PushCombine(micro);
  if (!last_micro) return;
  *rate = static_cast<float>(lr_.At(iter / iter_size_));
  PushUpdates(*rate, iter / iter_size_ + 1);
}

void Step::PushCombine(int micro) {
  if (iter_size_ == 1 && clip_ <= 0) return;
  const bool first = micro == 0, last = micro == iter_size_ - 1;
  const std::vector<Var> gv = s_->params.AllGradVars();
  s_->PushOn(
      [ps = s_->params.trained(), first, last, n = iter_size_, clip = clip_](void* cuda) {
        for (Param* p : ps) {
          if (n == 1) continue;
          AccumulateGrad(&p->sum, p->g, first, cuda);
          if (last) CopyOn(cuda, &p->g, p->sum);
        }
        if (last) RescaleAndClipOn(cuda, ps, 1.f / static_cast<float>(n), clip);
      },
      gv, gv, "combine_gradients");
}

void Step::PushUpdates(float lr, int64_t step) {
  for (Param* p : s_->params.trained()) {
    s_->PushOn(
        [opt = s_->opt.get(), w = p->w, g = p->g, state = &p->state, lr, step, mult = p->mult](void* cuda) mutable {
          opt->Update(&w, g, state, lr, step, mult, cuda);
        },
        {p->g_var}, {p->w_var}, p->update_name.c_str());
  }
}

void Step::CheckRanks(int64_t iter) {
  if (!dp_ || iter % iter_size_ != 0 || !dp_->CheckDue(iter / iter_size_)) return;
  s_->engine->WaitAll();
  dp_->CheckConsistency(OnHost(s_->params.Values()), iter / iter_size_);
}

std::vector<std::string> MetricNames(const config::Solver& sc) { return {sc.metric().begin(), sc.metric().end()}; }

MetricSet Evaluate(Session* s, Feed* feed, DataIter* it, const std::vector<std::string>& names) {
  MetricSet m(names);
  DrainOnUnwind drain(s->engine);
  for (int64_t b = 0; b < it->batches_per_epoch(); ++b) {
    feed->PushLoad(it, b == 0 ? 0 : -1);
    s->eval->Push(/*is_train=*/false, 0, 0);
    feed->PushMetrics(*s->eval, {&m});
  }
  s->engine->WaitAll();
  return m;
}

}  // namespace frugal
