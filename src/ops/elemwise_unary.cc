// Elementwise functions of one tensor; x, y: any shape, the same.
//   negative:  y = -x                 dx = -dy                 (the negative op; reads dy)
//   exp:       y = e^x                dx = dy * y              reads dy, y
//   log:       y = ln x               dx = dy / x              reads dy, x
//   sqrt:      y = sqrt(x)            dx = dy / (2 y)          reads dy, y
//   square:    y = x^2                dx = 2 x dy              reads dy, x
//   abs:       y = |x|                dx = sign(x) dy          reads dy, x (sign(0) = 0)
//   clip:      y = min(max(x, a_min), a_max)
//              dx = dy where a_min < y < a_max, else 0     reads dy, y
//              (y is strictly inside exactly when x is, so reading y lets
//              the forward run in place)
//   erf:       y = erf(x)             dx = dy 2/sqrt(pi) e^(-x^2)   reads dy, x
//   sin, cos, tan, arcsin, arccos, arctan, sinh, arcsinh, arccosh, arctanh
//              (MXNet's names; their derivatives; tan reads y, the rest x)
//   floor, ceil, round (halves to even), sign      dx = 0
//   gelu:      y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2
//              dx = dy (Phi(x) + x phi(x)), phi the normal density   reads dy, x
//              approximate "tanh": y = x (1 + tanh(u)) / 2 with
//              u = sqrt(2/pi) (x + 0.044715 x^3), and its exact derivative
//              (PyTorch's gelu and its approximate='tanh')
// Every forward may run in place; a backward that reads y keeps x free.
// The functions are in ops/unary_math.h, shared with the CUDA kernels.
#include <cmath>

#include "ops/cpu/vec.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "ops/unary_math.h"

namespace frugal {
namespace {

using namespace unary;  // NOLINT: the functions of unary_math.h, named as the ops

template <typename Op>
void UnaryForward(const KernelCtx& c) {
  const float* x = c.in[0].f();
  const UnaryParams<Op> p = UnaryParamsFrom<Op>(c);
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return Op::F(x[i], p); });
}

// inputs: dy, x or y    output: dx
template <typename Op>
void UnaryBackward(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const float* v = c.in[1].f();
  const UnaryParams<Op> p = UnaryParamsFrom<Op>(c);
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return Op::D(dy[i], v[i], p); });
}

void NegativeForward(const KernelCtx& c) {
  const float* x = c.in[0].f();
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [=](int64_t i) { return -x[i]; });
}

// gelu's CPU kernels: vec.h's (the functions of unary_math.h vectorised), over ranges.
void GeluForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const float* x = c.in[0].f();
  float* y = c.out[0].f();
  const bool tanh_form = UnaryParamsFrom<Gelu>(c).tanh, add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(), [&](int64_t b, int64_t e) { cpu::Vec().gelu(x + b, y + b, e - b, tanh_form, add); });
}

// inputs: dy, x    output: dx
void GeluBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const float *dy = c.in[0].f(), *x = c.in[1].f();
  float* dx = c.out[0].f();
  const bool tanh_form = UnaryParamsFrom<Gelu>(c).tanh, add = c.req[0] == OpReq::kAdd;
  ForEachRange(c.out[0].size(),
               [&](int64_t b, int64_t e) { cpu::Vec().gelu_grad(dy + b, x + b, dx + b, e - b, tanh_form, add); });
}

template <typename Op>
OpDef& RegisterUnary(OpRegistry* r, const std::string& name, const std::string& doc, const std::string& grad_doc,
                     Kernel forward = UnaryForward<Op>, Kernel backward = UnaryBackward<Op>) {
  OpDef& fwd = r->Add(name).Doc(doc).Elementwise().Recompute(Cost::kCheap).CpuKernel(forward);
  AddBackward(r, fwd, {OutGrad(0), Op::kReadsY ? Output(0) : Input(0)}, grad_doc + ".")
      .Inplace({{0, 0}, {1, 0}})
      .CpuKernel(backward);
  return fwd;
}

}  // namespace

ClipParams ClipParams::Parse(AttrReader& a) {
  ClipParams p;
  p.a_min = static_cast<float>(a.Float("a_min", NAN));
  p.a_max = static_cast<float>(a.Float("a_max", NAN));
  FRUGAL_REQUIRE(!std::isnan(p.a_min) && !std::isnan(p.a_max), a.where(),
                 ": clip needs both a_min and a_max (numbers)");
  FRUGAL_REQUIRE(p.a_min <= p.a_max, a.where(), ": a_min ", p.a_min, " is greater than a_max ", p.a_max);
  return p;
}

GeluParams GeluParams::Parse(AttrReader& a) {
  GeluParams p;
  p.tanh = a.Choice("approximate", "none", {"none", "tanh"}) == "tanh";
  return p;
}

void Register_elemwise_unary(OpRegistry* r) {
  r->Add("negative")
      .Doc("Elementwise negation y = -x.")
      .Elementwise()
      .Backward({OutGrad(0)})
      .Gradient([](Graph& g, const GradCtx& c) {  // dx = -dy
        return std::vector<Entry>{{g.AddOp("negative", g.node(c.fwd).name + "_backward", {}, {c.out_grads[0]}), 0}};
      })
      .Recompute(Cost::kCheap)
      .CpuKernel(NegativeForward);
  RegisterUnary<Exp>(r, "exp", "Elementwise exponential y = e^x.", "dx = dy * y");
  RegisterUnary<Log>(r, "log", "Elementwise natural logarithm y = ln x.", "dx = dy / x");
  RegisterUnary<Sqrt>(r, "sqrt", "Elementwise square root y = sqrt(x).", "dx = dy / (2 y)");
  RegisterUnary<Square>(r, "square", "Elementwise square y = x^2.", "dx = 2 x dy");
  RegisterUnary<Abs>(r, "abs", "Elementwise absolute value y = |x|.", "dx = sign(x) dy");
  RegisterUnary<Clip>(r, "clip", "Clips to [a_min, a_max]: y = min(max(x, a_min), a_max).",
                      "dx = dy where a_min < y < a_max, else 0")
      .Params<ClipParams>();
  RegisterUnary<Erf>(r, "erf", "Elementwise error function y = erf(x).", "dx = dy 2/sqrt(pi) exp(-x^2)");
  RegisterUnary<Sin>(r, "sin", "Elementwise sine y = sin(x).", "dx = dy cos(x)");
  RegisterUnary<Cos>(r, "cos", "Elementwise cosine y = cos(x).", "dx = -dy sin(x)");
  RegisterUnary<Tan>(r, "tan", "Elementwise tangent y = tan(x).", "dx = dy (1 + y^2)");
  RegisterUnary<Asin>(r, "arcsin", "Elementwise inverse sine y = asin(x), x in [-1, 1].", "dx = dy / sqrt(1 - x^2)");
  RegisterUnary<Acos>(r, "arccos", "Elementwise inverse cosine y = acos(x), x in [-1, 1].", "dx = -dy / sqrt(1 - x^2)");
  RegisterUnary<Atan>(r, "arctan", "Elementwise inverse tangent y = atan(x).", "dx = dy / (1 + x^2)");
  RegisterUnary<Sinh>(r, "sinh", "Elementwise hyperbolic sine y = sinh(x).", "dx = dy cosh(x)");
  RegisterUnary<Asinh>(r, "arcsinh", "Elementwise inverse hyperbolic sine y = asinh(x).", "dx = dy / sqrt(x^2 + 1)");
  RegisterUnary<Acosh>(r, "arccosh", "Elementwise inverse hyperbolic cosine y = acosh(x), x >= 1.",
                       "dx = dy / sqrt(x^2 - 1)");
  RegisterUnary<Atanh>(r, "arctanh", "Elementwise inverse hyperbolic tangent y = atanh(x), x in (-1, 1).",
                       "dx = dy / (1 - x^2)");
  RegisterUnary<Floor>(r, "floor", "Elementwise floor, the largest integer <= x.", "dx = 0");
  RegisterUnary<Ceil>(r, "ceil", "Elementwise ceiling, the smallest integer >= x.", "dx = 0");
  RegisterUnary<Round>(r, "round", "Elementwise rounding to the nearest integer, halves to even.", "dx = 0");
  RegisterUnary<Sign>(r, "sign", "Elementwise sign: 1, -1, or x itself for 0 and NaN.", "dx = 0");
  RegisterUnary<Gelu>(r, "gelu", "Gaussian error linear unit y = x Phi(x) (approximate: none, the erf form, or tanh).",
                      "dx = dy d/dx (x Phi(x)), in the node's form", GeluForward, GeluBackward)
      .Params<GeluParams>();
}

}  // namespace frugal
