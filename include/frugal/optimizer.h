// Optimizers: one rule each, state tensors per parameter. The update itself
// is an op (src/ops/optimizer_update.cc), as are the gradient sums for
// iter_size and global-norm clipping (src/ops/grad_combine.cc).
//
// With g the gradient, w the parameter, lr = base lr * lr_mult and
// wd = weight_decay * wd_mult for this parameter, and t the step (1 for the
// first update):
//
//   sgd       m = momentum * m - lr * (g + wd * w);   w = w + m       (MXNet's form)
//   nesterov  d = g + wd * w;  m = momentum * m + d;  w = w - lr * (d + momentum * m)
//   adam      d = g + wd * w  (L2 decay, coupled)
//             m = beta1 * m + (1 - beta1) * d;  v = beta2 * v + (1 - beta2) * d^2
//             w = w - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//   adamw     w = w * (1 - lr * wd)  (decoupled decay, as PyTorch), then adam with d = g
//   rmsprop   d = g + wd * w;  v = rho * v + (1 - rho) * d^2
//             centered: mg = rho * mg + (1 - rho) * d;  s = sqrt(v - mg^2) + eps
//             else:     s = sqrt(v) + eps
//             w = w - lr * d / s            (no momentum, as Caffe)
//
// Updates are elementwise (frugal/update_rule.h, shared by the ops' CPU and
// CUDA kernels) and therefore deterministic whatever the thread count.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal.pb.h"
#include "frugal/graph.h"
#include "frugal/tensor.h"
#include "frugal/update_rule.h"

namespace frugal {

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.9f;  // sgd, nesterov
  float weight_decay = 0.f;
  float beta1 = 0.9f, beta2 = 0.999f;  // adam, adamw
  float eps = 1e-8f;                   // adam, adamw, rmsprop
  float rho = 0.9f;                    // rmsprop: decay of the mean square
  bool centered = false;               // rmsprop
};

// Per-parameter multipliers of the learning rate and the weight decay (from
// the config node that made the parameter).
struct ParamMult {
  float lr_mult = 1.f, wd_mult = 1.f;
};

// An optimizer's per-parameter state: tensors shaped like the parameter, in
// the order of StateNames().
using OptState = std::vector<Tensor>;

class Optimizer {
 public:
  explicit Optimizer(const OptimizerOptions& o) : o_(o) {}
  const char* name() const;  // "sgd", "nesterov", "adam", "adamw", "rmsprop"
  // Names of the state tensors per parameter, e.g. {"m", "v"} for adam.
  std::vector<std::string> StateNames() const;
  // Zeroed state for a parameter, on its device (accounted as MemKind::kParam).
  OptState CreateState(const Tensor& w) const;
  // The op that applies this rule to one parameter (src/ops/optimizer_update.cc:
  // "sgd_mom_update", "adam_update", ...; inputs weight, grad, then the state
  // in the order of StateNames()), and its attributes for a parameter with
  // multipliers `mult`. The training step runs one such node per parameter
  // (Model::update), at the scheduled rate and step of the update.
  const char* UpdateOp() const;
  AttrMap UpdateAttrs(const ParamMult& mult) const;
  const OptimizerOptions& options() const { return o_; }

 private:
  OptimizerOptions o_;
};

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& o);
const char* OptimizerName(OptimizerKind k);

// The solver's optimizer fields (optimizer, momentum, weight_decay, beta1,
// beta2, eps, rho, centered), checked: throws Error naming `path` and the
// field for a value out of range (betas and rho in [0, 1), eps > 0, ...).
OptimizerOptions OptimizerOptionsFromConfig(const config::Solver& s, const std::string& path);

// v as an op attribute that parses back to the same float (%.17g of its
// double: every digit).
std::string ExactAttr(float v);

// State tensors by "<param>/<state name>" (views of the same memory), for
// checkpoints.
std::map<std::string, Tensor> NamedStates(const Optimizer& opt, const std::map<std::string, OptState>& states);

}  // namespace frugal
