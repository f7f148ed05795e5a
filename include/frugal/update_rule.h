// The optimizers' update of one element, shared by the update ops' CPU
// kernel (src/ops/optimizer_update.cc, through ops/cpu/vec.h) and CUDA
// kernel (src/ops/cuda/optimizer_update.cu), so that both give the same
// formula in the same order of operations. The formulas are in frugal/optimizer.h.
// Plain C++: under nvcc the function is __host__ __device__.
#pragma once

#include <cmath>
#include <cstdint>

#include "frugal/host_device.h"

namespace frugal {

enum class OptimizerKind { kSgd, kNesterov, kAdam, kAdamW, kRmsProp };

// The scalars of one parameter's update: the multipliers and Adam's bias
// corrections already folded in.
struct UpdateArgs {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0, wd = 0;          // base rate x lr_mult, weight_decay x wd_mult
  float momentum = 0;            // sgd, nesterov
  float beta1 = 0, beta2 = 0;    // adam, adamw
  float inv_c1 = 1, inv_c2 = 1;  // adam, adamw: 1 / (1 - beta^t)
  float l2 = 0, shrink = 1;      // adam: l2 = wd; adamw: shrink = 1 - lr * wd
  float eps = 0;                 // adam, adamw, rmsprop
  float rho = 0;                 // rmsprop
  bool centered = false;         // rmsprop
};

// Element i of parameter w with gradient g and the state tensors s0, s1 in
// the order of Optimizer::StateNames (s1 only for adam(w) and centered
// rmsprop).
FRUGAL_HD inline void UpdateElement(const UpdateArgs& a, int64_t i, float* w, const float* g, float* s0, float* s1) {
  switch (a.kind) {
    case OptimizerKind::kSgd:  // s0: momentum
      s0[i] = a.momentum * s0[i] - a.lr * (g[i] + a.wd * w[i]);
      w[i] += s0[i];
      return;
    case OptimizerKind::kNesterov: {  // s0: momentum
      const float d = g[i] + a.wd * w[i];
      s0[i] = a.momentum * s0[i] + d;
      w[i] -= a.lr * (d + a.momentum * s0[i]);
      return;
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {  // s0: m, s1: v
      const float d = g[i] + a.l2 * w[i];
      s0[i] = a.beta1 * s0[i] + (1.f - a.beta1) * d;
      s1[i] = a.beta2 * s1[i] + (1.f - a.beta2) * d * d;
      w[i] = a.shrink * w[i] - a.lr * (s0[i] * a.inv_c1) / (sqrtf(s1[i] * a.inv_c2) + a.eps);
      return;
    }
    case OptimizerKind::kRmsProp: {  // s0: mean square, s1: mean gradient (centered)
      const float d = g[i] + a.wd * w[i];
      s0[i] = a.rho * s0[i] + (1.f - a.rho) * d * d;
      float var = s0[i];
      if (a.centered) {
        s1[i] = a.rho * s1[i] + (1.f - a.rho) * d;
        var = s0[i] - s1[i] * s1[i];
        if (var < 0.f) var = 0.f;  // rounding may make it slightly negative
      }
      w[i] -= a.lr * d / (sqrtf(var) + a.eps);
      return;
    }
  }
}

}  // namespace frugal
