// The optimizers (formulas in frugal/optimizer.h): state names and the update op of each rule.
#include "frugal/optimizer.h"

#include <cstdio>

namespace frugal {

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

const char* Optimizer::UpdateOp() const {
  switch (o_.kind) {
    case OptimizerKind::kSgd: return "sgd_mom_update";
    case OptimizerKind::kNesterov: return "nesterov_update";
    case OptimizerKind::kAdam: return "adam_update";
    case OptimizerKind::kAdamW: return "adamw_update";
    case OptimizerKind::kRmsProp: return "rmsprop_update";
  }
  return "?";
}

std::string ExactAttr(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(v));
  return buf;
}

AttrMap Optimizer::UpdateAttrs(const ParamMult& mult) const {
  // The op parses back the same floats: the bits of the solver's fields.
  auto exact = ExactAttr;
  AttrMap a{
      {"weight_decay", exact(o_.weight_decay)}, {"lr_mult", exact(mult.lr_mult)}, {"wd_mult", exact(mult.wd_mult)}};
  switch (o_.kind) {
    case OptimizerKind::kSgd:
    case OptimizerKind::kNesterov: a["momentum"] = exact(o_.momentum); break;
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      a["beta1"] = exact(o_.beta1);
      a["beta2"] = exact(o_.beta2);
      a["eps"] = exact(o_.eps);
      break;
    case OptimizerKind::kRmsProp:
      a["rho"] = exact(o_.rho);
      a["eps"] = exact(o_.eps);
      a["centered"] = o_.centered ? "true" : "false";
      break;
  }
  return a;
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

}  // namespace frugal
