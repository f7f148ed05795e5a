// add, sub, mul, div, maximum, minimum, power:  y = a (op) b, elementwise
// with numpy broadcasting
//   a, b: shapes that broadcast (dims aligned from the right, each pair equal
//   or one of them 1), e.g. (2,3,4) + (3,1), (1,) + (2,3), (2,1) * (1,3);
//   y: the broadcast shape.
// grads, each summed over the dims where that input was broadcast:
//   add:  da = dy          db = dy               reads dy
//   sub:  da = dy          db = -dy              reads dy
//   mul:  da = dy * b      db = dy * a           reads dy, a, b
//   div:  da = dy / b      db = -dy * a / b^2    reads dy, a, b
//   maximum: da = dy where a >= b, db = dy where a < b (a tie goes to a)
//   minimum: da = dy where a <= b, db = dy where a > b      reads dy, a, b
//   power: y = a^b   da = dy b a^(b-1)   db = dy a^b ln a (0 where a <= 0)
// In place: y may overwrite a or b when it has the same size (the planner
// checks); the backward writes da over dy after it has computed db.
#include <cmath>

#include "ops/op_util.h"

namespace frugal {
namespace {

struct Add {
  static float F(float a, float b) { return a + b; }
  static float Da(float dy, float, float) { return dy; }
  static float Db(float dy, float, float) { return dy; }
};
struct Sub {
  static float F(float a, float b) { return a - b; }
  static float Da(float dy, float, float) { return dy; }
  static float Db(float dy, float, float) { return -dy; }
};
struct Mul {
  static float F(float a, float b) { return a * b; }
  static float Da(float dy, float, float b) { return dy * b; }
  static float Db(float dy, float a, float) { return dy * a; }
};
struct Div {
  static float F(float a, float b) { return a / b; }
  static float Da(float dy, float, float b) { return dy / b; }
  static float Db(float dy, float a, float b) { return -dy * a / (b * b); }
};
struct Maximum {
  static float F(float a, float b) { return a >= b ? a : b; }
  static float Da(float dy, float a, float b) { return a >= b ? dy : 0.f; }
  static float Db(float dy, float a, float b) { return a >= b ? 0.f : dy; }
};
struct Minimum {
  static float F(float a, float b) { return a <= b ? a : b; }
  static float Da(float dy, float a, float b) { return a <= b ? dy : 0.f; }
  static float Db(float dy, float a, float b) { return a <= b ? 0.f : dy; }
};
struct Power {
  static float F(float a, float b) { return std::pow(a, b); }
  static float Da(float dy, float a, float b) { return dy * b * std::pow(a, b - 1); }
  static float Db(float dy, float a, float b) { return a > 0 ? dy * std::pow(a, b) * std::log(a) : 0.f; }
};

void BinaryInferShape(ShapeCtx& c) {
  const Shape &a = c.in[0], &b = c.in[1];
  if (!a.known() || !b.known()) c.Fail("the shapes of both inputs must be known");
  Shape y;
  if (!BroadcastShape(a, b, &y)) {
    c.Fail(Fmt("cannot broadcast ", a, " with ", b,
               " (aligned from the right, each pair of dims must be equal or one of them 1)"));
  }
  c.out[0] = y;
}

template <typename Op>
void BinaryForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const float* a = c.in[0].f();
  const float* b = c.in[1].f();
  const Shape& y = c.out[0].shape();
  const StridedIndex ia = BroadcastIndex(c.in[0].shape(), y), ib = BroadcastIndex(c.in[1].shape(), y);
  if (ia.identity() && ib.identity()) {
    ForEach(y.Size(), Out(c, 0), c.req[0], [=](int64_t i) { return Op::F(a[i], b[i]); });
  } else {
    ForEach(y.Size(), Out(c, 0), c.req[0], [&](int64_t i) { return Op::F(a[ia(i)], b[ib(i)]); });
  }
}

// inputs: dy[, a, b]    outputs: da, db
// db is computed first: da may overwrite dy (in place). An output nobody
// reads has no memory and no shape: shapes come from the inputs where the
// kernel reads them, and an output's own shape only serves to write it.
template <typename Op, bool kReadsInputs>
void BinaryBackward(const KernelCtx& c) {
  const float* dy = c.in[0].f();
  const Shape& y = c.in[0].shape();
  if (!kReadsInputs) {
    SumToShape(c.out[1].shape(), y, Out(c, 1), c.req[1], [&](int64_t o) { return Op::Db(dy[o], 0.f, 0.f); });
    SumToShape(c.out[0].shape(), y, Out(c, 0), c.req[0], [&](int64_t o) { return Op::Da(dy[o], 0.f, 0.f); });
    return;
  }
  const Shape &sa = c.in[1].shape(), &sb = c.in[2].shape();
  const float* a = c.in[1].f();
  const float* b = c.in[2].f();
  const StridedIndex ia = BroadcastIndex(sa, y), ib = BroadcastIndex(sb, y);
  SumToShape(sb, y, Out(c, 1), c.req[1], [&](int64_t o) { return Op::Db(dy[o], a[ia(o)], b[ib(o)]); });
  SumToShape(sa, y, Out(c, 0), c.req[0], [&](int64_t o) { return Op::Da(dy[o], a[ia(o)], b[ib(o)]); });
}

template <typename Op, bool kReadsInputs>
void RegisterBinary(OpRegistry* r, const std::string& name, const std::string& doc, const std::string& grad_doc) {
  OpDef& fwd = r->Add(name)
                   .Doc(doc + " (numpy broadcasting).")
                   .Inputs({{"a"}, {"b"}})
                   .Outputs({"y"})
                   .InferShape(BinaryInferShape)
                   .Inplace({{0, 0}, {1, 0}})
                   .Recompute(Cost::kCheap)
                   .CpuKernel(BinaryForward<Op>);
  std::vector<BackwardRead> reads{OutGrad(0)};
  if (kReadsInputs) reads = {OutGrad(0), Input(0), Input(1)};
  AddBackward(r, fwd, reads, grad_doc + ", each summed over its broadcast dims.")
      .Inplace({{0, 0}})
      .CpuKernel(BinaryBackward<Op, kReadsInputs>);
}

}  // namespace

void Register_elemwise_binary(OpRegistry* r) {
  RegisterBinary<Add, false>(r, "add", "Elementwise sum y = a + b", "da = dy, db = dy");
  RegisterBinary<Sub, false>(r, "sub", "Elementwise difference y = a - b", "da = dy, db = -dy");
  RegisterBinary<Mul, true>(r, "mul", "Elementwise product y = a * b", "da = dy * b, db = dy * a");
  RegisterBinary<Div, true>(r, "div", "Elementwise quotient y = a / b", "da = dy / b, db = -dy * a / b^2");
  RegisterBinary<Maximum, true>(r, "maximum", "Elementwise maximum y = max(a, b)",
                                "da = dy where a >= b, db = dy where a < b");
  RegisterBinary<Minimum, true>(r, "minimum", "Elementwise minimum y = min(a, b)",
                                "da = dy where a <= b, db = dy where a > b");
  RegisterBinary<Power, true>(r, "power", "Elementwise power y = a^b",
                              "da = dy b a^(b-1), db = dy a^b ln a (0 where a <= 0)");
}

}  // namespace frugal
