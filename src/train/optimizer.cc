// The optimizers (formulas in frugal/optimizer.h) and the gradient helpers.
#include "frugal/optimizer.h"

#include "backend/cpu/vec.h"
#include "backend/device.h"
#include "ops/op_util.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

namespace frugal {
namespace {
constexpr int64_t kOmpMin = 32768;  // elements below which a loop stays serial
}  // namespace

const char* Optimizer::name() const { return OptimizerName(o_.kind); }

std::vector<std::string> Optimizer::StateNames() const {
  switch (o_.kind) {
    case OptimizerKind::kSgd:
    case OptimizerKind::kNesterov: return {"mom"};
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: return {"m", "v"};
    case OptimizerKind::kRmsProp:
      if (o_.centered) return {"mean_square", "mean_grad"};
      return {"mean_square"};
  }
  return {};
}

OptState Optimizer::CreateState(const Tensor& w) const {
  OptState s;
  for (size_t i = 0; i < StateNames().size(); ++i)
    s.push_back(Tensor::Empty(w.shape(), DType::kFloat32, w.device(), MemKind::kParam));  // zero-filled
  return s;
}

void Optimizer::Update(Tensor* w, const Tensor& g, OptState* state, float lr, int64_t step,
                       const ParamMult& mult, void* cuda) const {
  CHECK_EQ(w->size(), g.size()) << name() << ": parameter and gradient sizes differ";
  CHECK_EQ(state->size(), StateNames().size()) << name() << ": state was not made by CreateState";
  CHECK_GE(step, 1) << name() << ": steps count from 1";
  std::vector<float*> s;
  for (Tensor& t : *state) {
    CHECK_EQ(t.size(), w->size()) << name() << ": state size differs from the parameter's";
    s.push_back(t.f());
  }
  UpdateArgs a;
  a.kind = o_.kind;
  a.lr = lr * mult.lr_mult;
  a.wd = o_.weight_decay * mult.wd_mult;
  a.momentum = o_.momentum;
  a.beta1 = o_.beta1;
  a.beta2 = o_.beta2;
  a.eps = o_.eps;
  a.rho = o_.rho;
  a.centered = o_.centered;
  if (o_.kind == OptimizerKind::kAdam || o_.kind == OptimizerKind::kAdamW) {
    // Bias corrections in double: 1 - beta^t loses digits in float for small t.
    a.inv_c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(o_.beta1), step)));
    a.inv_c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(o_.beta2), step)));
    const bool decoupled = o_.kind == OptimizerKind::kAdamW;
    a.l2 = decoupled ? 0.f : a.wd;                 // adam: d = g + wd * w
    a.shrink = decoupled ? 1.f - a.lr * a.wd : 1.f;  // adamw: w = w * (1 - lr * wd)
  }
  float* s0 = s[0];
  float* s1 = s.size() > 1 ? s[1] : nullptr;
  const int64_t n = w->size();
  if (w->on_gpu()) {
    CHECK(cuda) << name() << ": a GPU update needs its launch context";
    return backend::UpdateAsync(cuda, a, w->f(), g.f(), s0, s1, n);
  }
  float* wp = w->f();
  const float* gp = g.f();
  ForEachRange(n, [&](int64_t b, int64_t e) {
    cpu::Vec().update(a, wp + b, gp + b, s0 + b, s1 ? s1 + b : nullptr, e - b);
  });
}

const char* OptimizerName(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kNesterov: return "nesterov";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kRmsProp: return "rmsprop";
  }
  return "?";
}

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& o) { return std::make_unique<Optimizer>(o); }

OptimizerOptions OptimizerOptionsFromConfig(const config::Solver& s, const std::string& path) {
  OptimizerOptions o;
  switch (s.optimizer()) {
    case config::Solver::SGD: o.kind = OptimizerKind::kSgd; break;
    case config::Solver::NESTEROV: o.kind = OptimizerKind::kNesterov; break;
    case config::Solver::ADAM: o.kind = OptimizerKind::kAdam; break;
    case config::Solver::ADAMW: o.kind = OptimizerKind::kAdamW; break;
    case config::Solver::RMSPROP: o.kind = OptimizerKind::kRmsProp; break;
  }
  o.momentum = s.momentum();
  o.weight_decay = s.weight_decay();
  o.beta1 = s.beta1();
  o.beta2 = s.beta2();
  o.eps = s.eps();
  o.rho = s.rho();
  o.centered = s.centered();
  auto in_unit = [&](const char* field, float v) {
    FRUGAL_REQUIRE(v >= 0 && v < 1, path, ": solver.", field, " must be in [0, 1), got ", v);
  };
  in_unit("momentum", o.momentum);
  in_unit("beta1", o.beta1);
  in_unit("beta2", o.beta2);
  in_unit("rho", o.rho);
  FRUGAL_REQUIRE(o.eps > 0, path, ": solver.eps must be positive, got ", o.eps);
  FRUGAL_REQUIRE(o.weight_decay >= 0, path, ": solver.weight_decay must not be negative, got ", o.weight_decay);
  return o;
}

std::map<std::string, Tensor> NamedStates(const Optimizer& opt, const std::map<std::string, OptState>& states) {
  std::map<std::string, Tensor> named;
  const std::vector<std::string> names = opt.StateNames();
  for (const auto& [param, s] : states)
    for (size_t i = 0; i < s.size(); ++i) named[param + "/" + names[i]] = s[i];
  return named;
}

void AccumulateGrad(Tensor* sum, const Tensor& g, bool first, void* cuda) {
  CHECK_EQ(sum->size(), g.size());
  if (sum->on_gpu()) {
    CHECK(cuda) << "AccumulateGrad on a GPU needs its launch context";
    if (first) return backend::CopyAsync(cuda, sum->raw(), sum->device(), g.raw(), g.device(), g.bytes());
    return backend::AddAsync(cuda, sum->f(), g.f(), g.size());
  }
  if (first) {
    sum->CopyFrom(g);
    return;
  }
  float* s = sum->f();
  const float* d = g.f();
  const int64_t n = g.size();
#pragma omp parallel for if (n > kOmpMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) s[i] += d[i];
}

double GlobalNorm(const std::vector<const Tensor*>& grads) {
  // Sums of squares per fixed chunk, added in order: the same bits for any
  // number of threads.
  constexpr int64_t kChunk = 1 << 16;
  double total = 0;
  for (const Tensor* t : grads) {
    const float* g = t->f();
    const int64_t n = t->size(), chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> part(chunks, 0.0);
#pragma omp parallel for if (chunks > 1) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      double acc = 0;
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) acc += static_cast<double>(g[i]) * g[i];
      part[c] = acc;
    }
    for (double p : part) total += p;
  }
  return std::sqrt(total);
}

double RescaleAndClip(const std::vector<Tensor*>& grads, float rescale, float max_norm) {
  std::vector<const Tensor*> view(grads.begin(), grads.end());
  const double norm = max_norm > 0 ? std::abs(rescale) * GlobalNorm(view) : 0.0;
  double scale = rescale;
  if (max_norm > 0 && norm > max_norm) scale *= max_norm / norm;
  if (scale == 1.0) return norm;
  const float k = static_cast<float>(scale);
  for (Tensor* t : grads) {
    float* g = t->f();
    const int64_t n = t->size();
#pragma omp parallel for if (n > kOmpMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) g[i] *= k;
  }
  return norm;
}

}  // namespace frugal
