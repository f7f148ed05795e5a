// The optimizer updates, one op per rule (formulas in frugal/optimizer.h,
// the element in frugal/update_rule.h, shared with the CUDA kernel):
//   sgd_mom_update(weight, grad, mom)
//   nesterov_update(weight, grad, mom)
//   adam_update(weight, grad, m, v)         adamw_update(weight, grad, m, v)
//   rmsprop_update(weight, grad, mean_square[, mean_grad if centered])
// all the same shape. No outputs: the kernel updates weight and the state
// inputs in place (Mutates), at the run's rate (KernelCtx::lr, before
// lr_mult) and update count (KernelCtx::step, from 1). No gradient.
// A new optimizer: its element in update_rule.h, its state names and op
// name in src/train/optimizer.cc, and one line in Register below.
#include <cmath>

#include "ops/cpu/vec.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {

UpdateArgs UpdateArgsFor(const UpdateParams& p, float lr, int64_t step) {
  UpdateArgs a;
  a.kind = p.kind;
  a.lr = lr * p.lr_mult;
  a.wd = p.weight_decay * p.wd_mult;
  a.momentum = p.momentum;
  a.beta1 = p.beta1;
  a.beta2 = p.beta2;
  a.eps = p.eps;
  a.rho = p.rho;
  a.centered = p.centered;
  if (p.kind == OptimizerKind::kAdam || p.kind == OptimizerKind::kAdamW) {
    // Bias corrections in double: 1 - beta^t loses digits in float for small t.
    a.inv_c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta1), step)));
    a.inv_c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta2), step)));
    const bool decoupled = p.kind == OptimizerKind::kAdamW;
    a.l2 = decoupled ? 0.f : a.wd;                   // adam: d = g + wd * w
    a.shrink = decoupled ? 1.f - a.lr * a.wd : 1.f;  // adamw: w = w * (1 - lr * wd)
  }
  return a;
}

namespace {

void UpdateCpu(const KernelCtx& c) {
  FRUGAL_REQUIRE(c.step >= 1, c.node.Where(), ": an update runs with step >= 1 (updates count from 1), got ", c.step);
  const UpdateArgs a = UpdateArgsFor(c.params<UpdateParams>(), c.lr, c.step);
  float* w = c.in[0].f();
  const float* g = c.in[1].f();
  float* s0 = c.in[2].f();
  float* s1 = c.in.size() > 3 ? c.in[3].f() : nullptr;
  ForEachRange(c.in[0].size(),
               [&](int64_t b, int64_t e) { cpu::Vec().update(a, w + b, g + b, s0 + b, s1 ? s1 + b : nullptr, e - b); });
}

// Every input has the weight's shape.
void InferUpdateShape(ShapeCtx& c) {
  for (size_t k = 1; k < c.in.size(); ++k) {
    if (!c.in[k].known()) c.in[k] = c.in[0];
    if (c.in[k] != c.in[0]) c.Fail(Fmt("input ", k, " has shape ", c.in[k], " but the weight has ", c.in[0]));
  }
}

float F(AttrReader& r, const char* key, float dflt) { return static_cast<float>(r.Float(key, dflt)); }

void Add(OpRegistry* r, const char* name, OptimizerKind kind, std::vector<InputSpec> inputs, const char* doc) {
  const size_t inputs_size = inputs.size();
  r->Add(name)
      .Doc(doc)
      .Inputs(std::move(inputs))
      .Params([kind](AttrReader& a) {
        UpdateParams p;
        p.kind = kind;
        p.momentum = F(a, "momentum", 0.f);
        p.weight_decay = F(a, "weight_decay", 0.f);
        p.beta1 = F(a, "beta1", 0.9f);
        p.beta2 = F(a, "beta2", 0.999f);
        p.eps = F(a, "eps", 1e-8f);
        p.rho = F(a, "rho", 0.9f);
        p.centered = a.Bool("centered", false);
        p.lr_mult = F(a, "lr_mult", 1.f);
        p.wd_mult = F(a, "wd_mult", 1.f);
        return std::any(p);
      })
      .NumInputsFn([](const std::any& p) {
        const UpdateParams& u = std::any_cast<const UpdateParams&>(p);
        const bool two = u.kind == OptimizerKind::kAdam || u.kind == OptimizerKind::kAdamW || u.centered;
        return two ? 4 : 3;
      })
      .InferShape(InferUpdateShape)
      .Mutates(inputs_size == 3 ? std::vector<int>{0, 2} : std::vector<int>{0, 2, 3})  // weight and state
      .NoGradient()
      .CpuKernel(UpdateCpu);
}

}  // namespace

void Register_optimizer_update(OpRegistry* r) {
  Add(r, "sgd_mom_update", OptimizerKind::kSgd, {{"weight"}, {"grad"}, {"mom"}},
      "SGD with momentum (MXNet's form): mom = momentum * mom - lr * (grad + wd * weight); weight += mom.");
  Add(r, "nesterov_update", OptimizerKind::kNesterov, {{"weight"}, {"grad"}, {"mom"}},
      "Nesterov momentum: d = grad + wd * weight; mom = momentum * mom + d; weight -= lr * (d + momentum * mom).");
  Add(r, "adam_update", OptimizerKind::kAdam, {{"weight"}, {"grad"}, {"m"}, {"v"}},
      "Adam with L2 decay added to the gradient and bias corrections for update `step`.");
  Add(r, "adamw_update", OptimizerKind::kAdamW, {{"weight"}, {"grad"}, {"m"}, {"v"}},
      "AdamW: weight *= 1 - lr * wd (decoupled decay), then Adam on the gradient alone.");
  Add(r, "rmsprop_update", OptimizerKind::kRmsProp, {{"weight"}, {"grad"}, {"mean_square"}, {"mean_grad"}},
      "RMSProp (no momentum): weight -= lr * d / (sqrt(mean_square [- mean_grad^2 if centered]) + eps).");
}

}  // namespace frugal
