// ONNX import rules for training graphs: the losses (targets known at
// import) and the optimizers of ai.onnx.preview.training.
#include <algorithm>
#include <cmath>

#include "interchange/onnx/op_table.h"
#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {

// ------------------------------------------------------------------ losses

namespace {

// The loss of NegativeLogLikelihoodLoss on log-probabilities `logp` (the
// shape of ONNX input 0, (N, C, d1, ...)), ONNX input 1 the class indices
// (known at import: they become a one-hot mask, aux state) and input 2 the
// optional class weights: loss[n, d] = -logp[n, t, d] w[t], t = target[n, d],
// 0 where t is ignore_index; reduced by `reduction`. "" or why not.
std::string NllNodes(const NodeView& v, Lowering* l, Operand logp) {
  const Shape& x = v.InputShape(0);
  const OnnxTensor* t = KnownIntTensor(v, 1);
  if (!x.known() || x.ndim() < 2) return "needs the shape of input 0, (N, C, ...)";
  if (!t) return NotKnown(v, 1, "target");
  std::vector<int64_t> target_dims = x.dims();
  target_dims.erase(target_dims.begin() + 1);
  if (t->dims != target_dims) return Fmt("target of shape ", t->shape(), " does not match input ", x);
  const std::string reduction = v.Str("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return "reduction '" + reduction + "' is not supported";
  const bool ignore = v.Has("ignore_index");
  const int64_t ii = v.Int("ignore_index", 0), classes = x[1], inner = x.Prod(2, x.ndim());
  Tensor mask = Tensor::Empty(x, DType::kFloat32, {}, MemKind::kParam);
  std::fill(mask.f(), mask.f() + mask.size(), 0.f);
  int64_t counted = 0;
  for (int64_t n = 0; n < x[0]; ++n)
    for (int64_t d = 0; d < inner; ++d) {
      const int64_t c = t->i[n * inner + d];
      if (ignore && c == ii) continue;
      if (c < 0 || c >= classes) return Fmt("target ", c, " is not a class in [0, ", classes, ")");
      mask.f()[(n * classes + c) * inner + d] = 1;
      ++counted;
    }
  if (reduction == "mean" && !v.HasInput(2) && counted == 0) return "every target is ignored (a mean of nothing)";
  l->constants.push_back({1, "onehot", mask, false});
  Operand picked = Add(l, "mul", {}, {logp, Const(static_cast<int>(l->constants.size()) - 1)});
  Operand w;
  if (v.HasInput(2)) {
    if (v.InputShape(2) != Shape{classes}) return Fmt("weight of shape ", v.InputShape(2), ", not (", classes, ")");
    std::vector<int64_t> per_class(x.ndim(), 1);
    per_class[1] = classes;
    w = Add(l, "reshape", {{"shape", TupleStr(per_class)}}, {In(2)});
    picked = Add(l, "mul", {}, {picked, w});
  }
  Operand loss = Add(l, "sum", {{"axis", "(1)"}, {"keepdims", "false"}}, {picked});
  loss = Add(l, "negative", {}, {loss});
  if (reduction == "none") return "";
  loss = Add(l, "sum", {{"keepdims", "false"}}, {loss});  // frugal's full sum is (1); ONNX's is ()
  if (reduction == "mean" && !v.HasInput(2)) {
    loss = Add(l, "div_scalar", {{"scalar", IntStr(counted)}}, {loss});
  } else if (reduction == "mean") {
    Operand weights = Add(l, "mul", {}, {Const(static_cast<int>(l->constants.size()) - 1), w});
    weights = Add(l, "sum", {{"keepdims", "false"}}, {weights});
    loss = Add(l, "div", {}, {loss, weights});
  }
  Add(l, "reshape", {{"shape", "()"}}, {loss});
  return "";
}

}  // namespace

Lowering NllLossRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"ignore_index", "reduction"}); !why.empty()) return Unsupported(why);
  Lowering l;
  if (std::string why = NllNodes(v, &l, In(0)); !why.empty()) return Unsupported(why);
  return l;
}

// SoftmaxCrossEntropyLoss = NegativeLogLikelihoodLoss of log_softmax over
// axis 1, which is the optional second output.
Lowering SoftmaxCrossEntropyRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"ignore_index", "reduction"}); !why.empty()) return Unsupported(why);
  Lowering l;
  Operand logp = Add(&l, "log_softmax", {{"axis", "1"}}, {In(0)});
  if (std::string why = NllNodes(v, &l, logp); !why.empty()) return Unsupported(why);
  l.outputs = {Prev(static_cast<int>(l.nodes.size()) - 1), logp};
  l.outputs.resize(v.num_outputs());
  return l;
}

// --------------------------------------------------------------- optimizers

// Adagrad, Momentum and Adam of ai.onnx.preview.training (R the learning
// rate and T the update count known at import; then the tensors X..., G...,
// and the state H... or V... (Adam: V..., H...)), elementwise as the
// operator's definition writes them. Outputs X_new..., then the new states.
Lowering OptimizerRule(const NodeView& v) {
  const std::string& op = v.op_type();
  const std::vector<std::string> known =
      op == "Adagrad" ? std::vector<std::string>{"decay_factor", "epsilon", "norm_coefficient"}
      : op == "Momentum"
          ? std::vector<std::string>{"alpha", "beta", "mode", "norm_coefficient"}
          : std::vector<std::string>{"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"};
  if (auto why = v.UnknownAttr(known); !why.empty()) return Unsupported(why);
  const OnnxTensor* rate = KnownTensor(v, 0);
  const OnnxTensor* count = KnownIntTensor(v, 1);
  if (!rate || rate->kind != OnnxTensor::Kind::kFloat || rate->f.size() != 1)
    return Unsupported(NotKnown(v, 0, "R") + ", one float");
  if (!count || count->i.size() != 1) return Unsupported(NotKnown(v, 1, "T") + ", one integer");
  const int per = op == "Adam" ? 4 : 3;  // X, G and the states
  const int n = (v.num_inputs() - 2) / per;
  if (n < 1 || v.num_inputs() != 2 + n * per || v.num_outputs() != n * (per - 1))
    return Unsupported(Fmt(v.num_inputs(), " inputs and ", v.num_outputs(), " outputs"));
  const double r = rate->f[0], t = static_cast<double>(count->i[0]), nc = v.Float("norm_coefficient", 0);
  Lowering l;
  std::vector<Operand> xs, states[2];
  for (int k = 0; k < n; ++k) {
    const Operand x = In(2 + k), g = In(2 + n + k);
    const Operand greg = nc == 0 ? g : Add(&l, "add", {}, {Add(&l, "mul_scalar", {{"scalar", FloatStr(nc)}}, {x}), g});
    auto scaled = [&](double c, Operand e) { return Add(&l, "mul_scalar", {{"scalar", FloatStr(c)}}, {e}); };
    if (op == "Adagrad") {  // H += G^2; X -= r G / (sqrt(H) + eps), r = R / (1 + T decay)
      const Operand h = Add(&l, "add", {}, {In(2 + 2 * n + k), Add(&l, "square", {}, {greg})});
      Operand d = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("epsilon", 0))}}, {Add(&l, "sqrt", {}, {h})});
      d = Add(&l, "div", {}, {scaled(r / (1 + t * v.Float("decay_factor", 0)), greg), d});
      xs.push_back(Add(&l, "sub", {}, {x, d}));
      states[0].push_back(h);
    } else if (op == "Momentum") {  // V = alpha V + beta' G; X -= R V (or R (G + alpha V), Nesterov)
      const double alpha = v.Float("alpha", 0), beta = t > 0 ? v.Float("beta", 0) : 1;
      const std::string mode = v.Str("mode", "standard");
      if (mode != "standard" && mode != "nesterov") return Unsupported("mode '" + mode + "'");
      const Operand vel = Add(&l, "add", {}, {scaled(alpha, In(2 + 2 * n + k)), scaled(beta, greg)});
      const Operand step = mode == "standard" ? vel : Add(&l, "add", {}, {greg, scaled(alpha, vel)});
      xs.push_back(Add(&l, "sub", {}, {x, scaled(r, step)}));
      states[0].push_back(vel);
    } else {                  // Adam
      if (!v.Has("epsilon"))  // ONNX's own test of two tensors expects 1e-2 where its node leaves it out
        return Unsupported("Adam without an explicit epsilon (its default is ambiguous)");
      const double alpha = v.Float("alpha", 0.9), beta = v.Float("beta", 0.999);
      const Operand vel = Add(&l, "add", {}, {scaled(alpha, In(2 + 2 * n + k)), scaled(1 - alpha, greg)});
      const Operand h =
          Add(&l, "add", {}, {scaled(beta, In(2 + 3 * n + k)), scaled(1 - beta, Add(&l, "square", {}, {greg}))});
      Operand d = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("epsilon", 0))}}, {Add(&l, "sqrt", {}, {h})});
      const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
      d = scaled(ra, Add(&l, "div", {}, {vel, d}));
      Operand xn = Add(&l, "sub", {}, {x, d});
      if (v.Float("norm_coefficient_post", 0) != 0) xn = scaled(1 - v.Float("norm_coefficient_post", 0), xn);
      xs.push_back(xn);
      states[0].push_back(vel);
      states[1].push_back(h);
    }
  }
  l.outputs = xs;
  for (const auto& group : states) l.outputs.insert(l.outputs.end(), group.begin(), group.end());
  return l;
}
}  // namespace frugal::onnx_map
