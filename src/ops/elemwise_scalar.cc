// Elementwise arithmetic with a constant s (attribute `scalar`); x, y: any
// shape, the same. Their gradients are other ops (or dy itself):
//   add_scalar:   y = x + s     dx = dy                       reads dy
//   sub_scalar:   y = x - s     dx = dy                       reads dy
//   rsub_scalar:  y = s - x     dx = negative(dy)             reads dy
//   mul_scalar:   y = x * s     dx = mul_scalar(dy, s)        reads dy
//   div_scalar:   y = x / s     dx = div_scalar(dy, s)        reads dy
//   rdiv_scalar:  y = s / x     dx = -dy * s / x^2            reads dy, x
// Every forward may run in place.
#include <cmath>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

struct AddS {
  static float F(float x, float s) { return x + s; }
};
struct SubS {
  static float F(float x, float s) { return x - s; }
};
struct RSubS {
  static float F(float x, float s) { return s - x; }
};
struct MulS {
  static float F(float x, float s) { return x * s; }
};
struct DivS {
  static float F(float x, float s) { return x / s; }
};
struct RDivS {
  static float F(float x, float s) { return s / x; }
};

template <typename Op>
void ScalarForward(const KernelCtx& c) {
  const float* x = c.in[0].f();
  const float s = c.params<ScalarParams>().scalar;
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return Op::F(x[i], s); });
}

// inputs: dy, x    output: dx = -dy * s / x^2
void RDivScalarBackward(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const float* x = c.in[1].f();
  const float s = c.params<ScalarParams>().scalar;
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return -dy[i] * s / (x[i] * x[i]); });
}

// dx = op(dy) with the forward node's scalar (op empty: dx = dy).
GradientFn GradientAs(const std::string& op, bool with_scalar) {
  return [op, with_scalar](Graph& g, const GradCtx& c) {
    const Entry& dy = c.out_grads[0];
    if (op.empty()) return std::vector<Entry>{dy};
    const Node& f = g.node(c.fwd);
    AttrMap attrs;
    if (with_scalar) attrs["scalar"] = f.attrs.at("scalar");
    return std::vector<Entry>{{g.AddOp(op, f.name + "_backward", attrs, {dy}), 0}};
  };
}

template <typename Op>
OpDef& RegisterScalar(OpRegistry* r, const std::string& name, const std::string& doc) {
  return r->Add(name)
      .Doc(doc + " (attribute scalar).")
      .Elementwise()
      .Params<ScalarParams>()
      .Recompute(Cost::kCheap)
      .CpuKernel(ScalarForward<Op>);
}

}  // namespace

ScalarParams ScalarParams::Parse(AttrReader& a) {
  const double s = a.Float("scalar", NAN);
  FRUGAL_REQUIRE(!std::isnan(s), a.where(), ": attribute 'scalar' is required (a number)");
  return {static_cast<float>(s)};
}

void Register_elemwise_scalar(OpRegistry* r) {
  RegisterScalar<AddS>(r, "add_scalar", "y = x + scalar").Backward({OutGrad(0)}).Gradient(GradientAs("", false));
  RegisterScalar<SubS>(r, "sub_scalar", "y = x - scalar").Backward({OutGrad(0)}).Gradient(GradientAs("", false));
  RegisterScalar<RSubS>(r, "rsub_scalar", "y = scalar - x")
      .Backward({OutGrad(0)})
      .Gradient(GradientAs("negative", false));
  RegisterScalar<MulS>(r, "mul_scalar", "y = x * scalar")
      .Backward({OutGrad(0)})
      .Gradient(GradientAs("mul_scalar", true));
  RegisterScalar<DivS>(r, "div_scalar", "y = x / scalar")
      .Backward({OutGrad(0)})
      .Gradient(GradientAs("div_scalar", true));
  OpDef& rdiv = RegisterScalar<RDivS>(r, "rdiv_scalar", "y = scalar / x");
  AddBackward(r, rdiv, {OutGrad(0), Input(0)}, "dx = -dy * scalar / x^2.")
      .Inplace({{0, 0}, {1, 0}})
      .CpuKernel(RDivScalarBackward);
}

}  // namespace frugal
