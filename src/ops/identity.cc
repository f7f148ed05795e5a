// identity:    y = x                   dx = dy (the same entry; no node)       reads dy
// block_grad:  y = x                   no gradient flows back to x (a stop)
// zeros_like:  y = 0 with x's shape    no gradient (constant); reads nothing
//   of x at run time, only its shape.
//   like_output=k (set by the gradient pass, not for configs): no input; y
//   has the shape of output k of the forward node this node belongs to
//   (Node::fwd). The gradient pass uses it for outputs of a multi-output op
//   that get no gradient (an unused part of a split), so that the unused
//   output is not kept alive just to lend its shape.
// block_grad is declared NoGradient rather than given a gradient that
// returns nothing: the gradient pass then skips the node before summing
// its output gradients, so no dead add_n is built for it.
// identity and block_grad copy, or do nothing when in place; Cost::kFree.
// All three work on any dtype (bfloat16 activations too): they move bytes.
#include <cstring>

#include "ops/op_util.h"

namespace frugal {
namespace {

struct ZerosParams {
  int64_t like_output = -1;  // >= 0: the shape of that output of node.fwd
  static ZerosParams Parse(AttrReader& a) { return {a.Int("like_output", -1)}; }
};

void CopyForward(const KernelCtx& c) { CopyInto(c.in[0], c.out[0], c.req[0]); }

void ZerosInferShape(ShapeCtx& c) {
  const auto& p = c.params<ZerosParams>();
  if (p.like_output < 0) {
    if (!c.in[0].known()) c.Fail("the shape of input x is unknown");
    c.out[0] = c.in[0];
    return;
  }
  if (!c.fwd_out || p.like_output >= static_cast<int64_t>(c.fwd_out->size())) {
    c.Fail(Fmt("like_output=", p.like_output, " is for nodes the gradient pass makes; give an input instead"));
  }
  c.out[0] = (*c.fwd_out)[p.like_output];
}

void ZerosForward(const KernelCtx& c) {
  if (c.req[0] != OpReq::kWrite) return;             // kAdd: adding zero
  std::memset(c.out[0].raw(), 0, c.out[0].bytes());  // zero bits are zero in every dtype
}

}  // namespace

void Register_identity(OpRegistry* r) {
  r->Add("identity")
      .Doc("y = x; the gradient passes through unchanged.")
      .Elementwise()
      .Backward({OutGrad(0)})
      .Gradient([](Graph&, const GradCtx& c) { return std::vector<Entry>{c.out_grads[0]}; })
      .Recompute(Cost::kFree)
      .Bf16()
      .CpuKernel(CopyForward);
  r->Add("block_grad")
      .Doc("y = x, but no gradient flows back to x (stop gradient).")
      .Elementwise()
      .NoGradient()
      .Recompute(Cost::kFree)
      .Bf16()
      .CpuKernel(CopyForward);
  r->Add("zeros_like")
      .Doc("Zeros with the shape of x (only x's shape is used); no gradient.")
      .Unary()
      .Params<ZerosParams>()
      .NumInputsFn([](const std::any& p) { return std::any_cast<const ZerosParams&>(p).like_output >= 0 ? 0 : 1; })
      .InferShape(ZerosInferShape)
      .InferDType([](DTypeCtx& c) {  // like the output it stands for, or like x
        const int64_t k = c.params<ZerosParams>().like_output;
        c.out[0] = k >= 0 ? (*c.fwd_out)[k] : c.in[0];
      })
      .NoGradient()
      .Recompute(Cost::kFree)
      .CpuKernel(ZerosForward);
}

}  // namespace frugal
