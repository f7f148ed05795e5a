// The optimizers (formulas in frugal/optimizer.h) and the gradient helpers.
#include "frugal/optimizer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

namespace frugal {
namespace {

constexpr int64_t kOmpMin = 32768;  // elements below which a loop stays serial

class Sgd : public Optimizer {
 public:
  using Optimizer::Optimizer;
  const char* name() const override { return "sgd"; }
  std::vector<std::string> StateNames() const override { return {"mom"}; }

 protected:
  void Apply(float* w, const float* g, const std::vector<float*>& s, int64_t n, float lr, float wd,
             int64_t) const override {
    float* m = s[0];
    const float mu = o_.momentum;
#pragma omp parallel for if (n > kOmpMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      m[i] = mu * m[i] - lr * (g[i] + wd * w[i]);
      w[i] += m[i];
    }
  }
};

class Nesterov : public Optimizer {
 public:
  using Optimizer::Optimizer;
  const char* name() const override { return "nesterov"; }
  std::vector<std::string> StateNames() const override { return {"mom"}; }

 protected:
  void Apply(float* w, const float* g, const std::vector<float*>& s, int64_t n, float lr, float wd,
             int64_t) const override {
    float* m = s[0];
    const float mu = o_.momentum;
#pragma omp parallel for if (n > kOmpMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + wd * w[i];
      m[i] = mu * m[i] + d;
      w[i] -= lr * (d + mu * m[i]);
    }
  }
};

// Adam and AdamW differ only in where the weight decay goes.
class Adam : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, bool decoupled) : Optimizer(o), decoupled_(decoupled) {}
  const char* name() const override { return decoupled_ ? "adamw" : "adam"; }
  std::vector<std::string> StateNames() const override { return {"m", "v"}; }

 protected:
  void Apply(float* w, const float* g, const std::vector<float*>& s, int64_t n, float lr, float wd,
             int64_t step) const override {
    float* m = s[0];
    float* v = s[1];
    const float b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps;
    // Bias corrections in double: 1 - beta^t loses digits in float for small t.
    const float inv_c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b1), step)));
    const float inv_c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b2), step)));
    const float l2 = decoupled_ ? 0.f : wd;            // adam: d = g + wd * w
    const float shrink = decoupled_ ? 1.f - lr * wd : 1.f;  // adamw: w = w * (1 - lr * wd)
#pragma omp parallel for if (n > kOmpMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + l2 * w[i];
      m[i] = b1 * m[i] + (1.f - b1) * d;
      v[i] = b2 * v[i] + (1.f - b2) * d * d;
      w[i] = shrink * w[i] - lr * (m[i] * inv_c1) / (std::sqrt(v[i] * inv_c2) + eps);
    }
  }

 private:
  bool decoupled_;
};

class RmsProp : public Optimizer {
 public:
  using Optimizer::Optimizer;
  const char* name() const override { return "rmsprop"; }
  std::vector<std::string> StateNames() const override {
    if (o_.centered) return {"mean_square", "mean_grad"};
    return {"mean_square"};
  }

 protected:
  void Apply(float* w, const float* g, const std::vector<float*>& s, int64_t n, float lr, float wd,
             int64_t) const override {
    float* v = s[0];
    float* mg = o_.centered ? s[1] : nullptr;
    const float rho = o_.rho, eps = o_.eps;
#pragma omp parallel for if (n > kOmpMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + wd * w[i];
      v[i] = rho * v[i] + (1.f - rho) * d * d;
      float var = v[i];
      if (mg) {
        mg[i] = rho * mg[i] + (1.f - rho) * d;
        var = std::max(v[i] - mg[i] * mg[i], 0.f);  // rounding may make it slightly negative
      }
      w[i] -= lr * d / (std::sqrt(var) + eps);
    }
  }
};

}  // namespace

OptState Optimizer::CreateState(const Tensor& w) const {
  OptState s;
  for (size_t i = 0; i < StateNames().size(); ++i)
    s.push_back(Tensor::Empty(w.shape(), DType::kFloat32, w.device(), MemKind::kParam));  // zero-filled
  return s;
}

void Optimizer::Update(Tensor* w, const Tensor& g, OptState* state, float lr, int64_t step,
                       const ParamMult& mult) const {
  CHECK_EQ(w->size(), g.size()) << name() << ": parameter and gradient sizes differ";
  CHECK_EQ(state->size(), StateNames().size()) << name() << ": state was not made by CreateState";
  CHECK_GE(step, 1) << name() << ": steps count from 1";
  std::vector<float*> s;
  for (Tensor& t : *state) {
    CHECK_EQ(t.size(), w->size()) << name() << ": state size differs from the parameter's";
    s.push_back(t.f());
  }
  Apply(w->f(), g.f(), s, w->size(), lr * mult.lr_mult, o_.weight_decay * mult.wd_mult, step);
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

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& o) {
  switch (o.kind) {
    case OptimizerKind::kSgd: return std::make_unique<Sgd>(o);
    case OptimizerKind::kNesterov: return std::make_unique<Nesterov>(o);
    case OptimizerKind::kAdam: return std::make_unique<Adam>(o, false);
    case OptimizerKind::kAdamW: return std::make_unique<Adam>(o, true);
    case OptimizerKind::kRmsProp: return std::make_unique<RmsProp>(o);
  }
  LOG(FATAL) << "unknown optimizer kind";
  return nullptr;
}

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

void AccumulateGrad(Tensor* sum, const Tensor& g, bool first) {
  CHECK_EQ(sum->size(), g.size());
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
