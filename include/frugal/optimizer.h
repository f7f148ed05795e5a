// Optimizers: one interface, state tensors per parameter, and the gradient
// helpers a training step needs around them (accumulation for iter_size,
// rescaling, global-norm clipping).
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
// Updates are elementwise (frugal/update_rule.h; OpenMP over large tensors
// on the CPU, a kernel on the GPU) and therefore deterministic whatever the
// thread count.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal.pb.h"
#include "frugal/tensor.h"
#include "frugal/update_rule.h"

namespace frugal {

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.9f;      // sgd, nesterov
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
  // One update of w by its gradient g. lr is the scheduled rate (before
  // lr_mult); step counts updates from 1. On a GPU, `cuda` is the context
  // of the LaunchAsync that runs it (backend/device.h); the update is
  // queued on its stream.
  void Update(Tensor* w, const Tensor& g, OptState* state, float lr, int64_t step, const ParamMult& mult = {},
              void* cuda = nullptr) const;
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

// State tensors by "<param>/<state name>" (views of the same memory), for
// checkpoints.
std::map<std::string, Tensor> NamedStates(const Optimizer& opt, const std::map<std::string, OptState>& states);

// sum = g (first) or sum + g: gradient accumulation over iter_size batches.
// On a GPU, `cuda` is the LaunchAsync context whose stream runs it.
void AccumulateGrad(Tensor* sum, const Tensor& g, bool first, void* cuda = nullptr);

// The L2 norm of all gradients together, summed in double in fixed chunks so
// the result does not depend on the thread count.
double GlobalNorm(const std::vector<const Tensor*>& grads);

// Multiplies every gradient by `rescale` (e.g. 1 / iter_size) and then, if
// max_norm > 0 and the global norm of the rescaled gradients exceeds it,
// scales them all by max_norm / norm, in one pass. Returns the global norm
// of the rescaled gradients before clipping (for logging), or 0 when
// max_norm is 0 (no norm is computed then). CPU tensors only (on a GPU:
// backend::RescaleAndClipAsync).
double RescaleAndClip(const std::vector<Tensor*>& grads, float rescale, float max_norm);

}  // namespace frugal
