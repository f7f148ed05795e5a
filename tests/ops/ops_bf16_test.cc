// bfloat16 through frugal's own CPU kernels: relu, batch_norm, add_n and
// their gradients, and the ops that only move data (reshape, flatten,
// identity, block_grad, zeros_like). Each kernel is run by hand on one node
// (the graph op_harness builds) twice on the same, bfloat16-exact, values:
// with float32 tensors, and with the activations bfloat16 (batch_norm's
// parameters and statistics stay float32). The bfloat16 kernels widen
// exactly, compute in float as the float32 path does and round once when
// storing, so each bfloat16 output must be the float32 output rounded, bit
// for bit (with req add too: round(y + v)), and each float32 output, and
// each float32 input a kernel updates (the moving statistics), equal.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frugal/bf16.h"
#include "ops/op_test_util.h"

namespace frugal::test {
namespace {

// n random values in [lo, hi] rounded to bfloat16: the same in both runs.
std::vector<float> Bf16Values(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = Bf16ToFloat(FloatToBf16(u(rng)));
  return v;
}

Tensor MakeTensor(const Shape& s, DType dtype, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(s, dtype);
  for (int64_t i = 0; i < t.size(); ++i) {
    if (dtype == DType::kBFloat16) {
      t.bf16()[i] = FloatToBf16(v[i]);
    } else {
      t.f()[i] = v[i];
    }
  }
  return t;
}

// Which of a node's tensors are activations (bfloat16 in the bfloat16 run).
struct ActMask {
  std::vector<bool> in, out;
};

// Node `node`'s CPU kernel run once, every output with req: inputs from
// `in`, outputs starting as `out_init`; activations of dtype `act`, the
// rest float32. Returns the inputs (a kernel may update some) and outputs.
struct KernelRun {
  std::vector<Tensor> in, out;
};
KernelRun RunKernel(const Graph& g, int node, const Values& in, const Values& out_init, const ActMask& mask, DType act,
                    OpReq req, bool is_train) {
  const Node& n = g.node(node);
  KernelRun r;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    r.in.push_back(MakeTensor(g.shape(n.inputs[k]), mask.in[k] ? act : DType::kFloat32, in[k]));
  }
  for (int k = 0; k < g.NumOutputs(node); ++k) {
    r.out.push_back(MakeTensor(g.shape({node, k}), mask.out[k] ? act : DType::kFloat32, out_init[k]));
  }
  const std::vector<OpReq> reqs(r.out.size(), req);
  const Tensor no_ws;
  n.op->cpu_kernel()(KernelCtx{n, r.in, r.out, reqs, no_ws, is_train, /*is_recompute=*/false, 1, 7, 0});
  return r;
}

// Runs node `node` on float32 and on bfloat16 activations, with req write
// and add, and expects the bfloat16 outputs to be the float32 ones rounded
// and everything float32 to be equal. Returns the elements compared.
int64_t ExpectBf16IsFloat32Rounded(const Graph& g, int node, const Values& in, const ActMask& mask, bool is_train,
                                   const std::string& what) {
  Values out_init;
  for (int k = 0; k < g.NumOutputs(node); ++k) {
    out_init.push_back(Bf16Values(g.shape({node, k}).Size(), -2.f, 2.f, 100 + k));  // read with req add
  }
  int64_t compared = 0;
  for (OpReq req : {OpReq::kWrite, OpReq::kAdd}) {
    const std::string where = what + (req == OpReq::kAdd ? " (req add)" : " (req write)");
    const KernelRun f = RunKernel(g, node, in, out_init, mask, DType::kFloat32, req, is_train);
    const KernelRun b = RunKernel(g, node, in, out_init, mask, DType::kBFloat16, req, is_train);
    for (size_t k = 0; k < f.out.size(); ++k) {
      const std::vector<float> want = ToVector(f.out[k]);
      if (!mask.out[k]) {
        EXPECT_EQ(ToVector(b.out[k]), want) << where << " float32 output " << k;
        compared += static_cast<int64_t>(want.size());
        continue;
      }
      for (size_t i = 0; i < want.size(); ++i) {
        if (b.out[k].bf16()[i] == FloatToBf16(want[i])) continue;
        ADD_FAILURE() << where << " output " << k << " element " << i << ": float32 gives " << want[i] << ", bfloat16 "
                      << Bf16ToFloat(b.out[k].bf16()[i]);
        break;  // the first difference is enough
      }
      compared += static_cast<int64_t>(want.size());
    }
    for (size_t k = 0; k < f.in.size(); ++k) {
      if (!mask.in[k]) { EXPECT_EQ(ToVector(b.in[k]), ToVector(f.in[k])) << where << " float32 input " << k; }
    }
  }
  return compared;
}

// The node computing the gradient of input k (a gradient node of og's op).
int GradNode(const OpGraph& og, int k) { return og.in_grads[k].node; }

OpGraph Build(const std::string& op, const AttrMap& attrs, const std::vector<Shape>& in_shapes,
              const std::vector<bool>& differentiable) {
  OpCase c;
  c.op = op;
  c.attrs = attrs;
  c.in_shapes = in_shapes;
  c.differentiable = differentiable;
  return BuildOpGraph(c, /*with_gradient=*/true);
}

const Shape kActShape{3, 5, 7, 9};  // odd sizes: vector tails everywhere

TEST(OpsBf16, ReluAndItsGradientRoundTheFloat32Results) {
  const OpGraph og = Build("relu", {}, {kActShape}, {true});
  const int64_t n = kActShape.Size();
  const std::vector<float> x = Bf16Values(n, -1.f, 1.f, 1);
  EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, og.op_node, {x}, {{true}, {true}}, true, "relu"), 0);
  // _backward_relu reads dy and y (= relu(x), bfloat16-exact too).
  std::vector<float> y = x;
  for (float& v : y) v = v > 0 ? v : 0.f;
  const int bwd = GradNode(og, 0);
  ASSERT_EQ(og.g.node(bwd).op->name(), "_backward_relu");
  EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, bwd, {Bf16Values(n, -1.f, 1.f, 2), y}, {{true, true}, {true}}, true,
                                       "_backward_relu"),
            0);
}

TEST(OpsBf16, AddNRoundsTheFloat32SumOnce) {
  const OpGraph og = Build("add_n", {{"num_args", "3"}}, {kActShape, kActShape, kActShape}, {true, true, true});
  const int64_t n = kActShape.Size();
  // Magnitudes apart, so that the sums need more bits than bfloat16 has.
  const Values in{Bf16Values(n, -1.f, 1.f, 3), Bf16Values(n, -0.01f, 0.01f, 4), Bf16Values(n, -100.f, 100.f, 5)};
  EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, og.op_node, in, {{true, true, true}, {true}}, true, "add_n"), 0);
}

// batch_norm in training (batch statistics, moving ones updated) and with
// use_global_stats, with and without the fused ReLU, then its gradient.
// The statistics are computed from the same float values in the same order
// in both runs, and y and dx are the same float expression rounded once, so
// the bfloat16 outputs are exactly the float32 ones rounded: no tolerance.
TEST(OpsBf16, BatchNormAndItsGradientRoundTheFloat32Results) {
  const Shape ch{kActShape[1]};
  const int64_t n = kActShape.Size(), c = ch.Size();
  for (bool global : {false, true}) {
    for (bool relu : {false, true}) {
      AttrMap attrs{{"fix_gamma", "false"}, {"use_global_stats", global ? "true" : "false"}};
      if (relu) attrs["act_type"] = "relu";
      const std::string what =
          std::string("batch_norm") + (global ? " use_global_stats" : "") + (relu ? " act_type=relu" : "");
      const OpGraph og = Build("batch_norm", attrs, {kActShape, ch, ch, ch, ch}, {true, true, true, false, false});
      const Values in{Bf16Values(n, -1.f, 3.f, 6), Bf16Values(c, 0.5f, 1.5f, 7), Bf16Values(c, -0.5f, 0.5f, 8),
                      Bf16Values(c, 0.5f, 1.5f, 9), Bf16Values(c, 0.5f, 2.f, 10)};
      const ActMask fwd_mask{{true, false, false, false, false}, {true, false, false}};
      EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, og.op_node, in, fwd_mask, true, what + " training"), 0);
      // In inference (is_train false) the moving statistics are read, not updated.
      EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, og.op_node, in, fwd_mask, false, what + " inference"), 0);
      // inputs: dy, x, gamma, beta, and the saved mean and var (float32).
      const int bwd = GradNode(og, 0);
      ASSERT_EQ(og.g.node(bwd).op->name(), "_backward_batch_norm");
      const Values bwd_in{Bf16Values(n, -1.f, 1.f, 11), in[0], in[1], in[2], Bf16Values(c, 0.5f, 1.5f, 12),
                          Bf16Values(c, 0.5f, 2.f, 13)};
      const ActMask bwd_mask{{true, true, false, false, false, false}, {true, false, false, false, false}};
      EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, bwd, bwd_in, bwd_mask, true, "_backward_" + what), 0);
    }
  }
}

// reshape, flatten, expand_dims' gradient (_backward_reshape), identity,
// block_grad and zeros_like move bytes: any dtype; req add adds in float.
TEST(OpsBf16, DataMovementOpsTakeBfloat16) {
  const int64_t n = kActShape.Size();
  const std::vector<float> x = Bf16Values(n, -4.f, 4.f, 14);
  const ActMask one{{true}, {true}};
  const OpGraph reshape = Build("reshape", {{"shape", "(5, -1)"}}, {kActShape}, {true});
  EXPECT_GT(ExpectBf16IsFloat32Rounded(reshape.g, reshape.op_node, {x}, one, true, "reshape"), 0);
  EXPECT_GT(ExpectBf16IsFloat32Rounded(reshape.g, GradNode(reshape, 0), {x}, one, true, "_backward_reshape"), 0);
  for (const char* op : {"flatten", "identity", "block_grad", "zeros_like"}) {
    const OpGraph og = Build(op, {}, {kActShape}, {false});
    EXPECT_GT(ExpectBf16IsFloat32Rounded(og.g, og.op_node, {x}, one, true, op), 0);
  }
}

// A copy is of the bits, whatever they are (a NaN's payload included), and
// in place it leaves them alone.
TEST(OpsBf16, CopiesKeepTheBits) {
  const OpGraph og = Build("identity", {}, {Shape{4}}, {false});
  const std::vector<uint16_t> bits{0x7F81, 0xFFC1, 0x8000, 0x0001};  // NaNs, -0, a subnormal
  Tensor x = Tensor::Empty(Shape{4}, DType::kBFloat16);
  std::copy(bits.begin(), bits.end(), x.bf16());
  const std::vector<OpReq> write{OpReq::kWrite};
  const Tensor no_ws;
  const std::vector<Tensor> in{x};
  for (bool in_place : {false, true}) {
    const std::vector<Tensor> out{in_place ? x : Tensor::Empty(Shape{4}, DType::kBFloat16)};
    const Node& n = og.g.node(og.op_node);
    n.op->cpu_kernel()(KernelCtx{n, in, out, write, no_ws, true, false, 1, 7, 0});
    EXPECT_EQ(std::vector<uint16_t>(out[0].bf16(), out[0].bf16() + 4), bits) << "in place " << in_place;
  }
}

}  // namespace
}  // namespace frugal::test
