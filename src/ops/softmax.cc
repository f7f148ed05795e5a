// softmax and log_softmax over one axis (default -1, the last), any shape.
//   softmax:      y_i = exp(x_i) / sum_j exp(x_j)       along the axis
//   log_softmax:  y_i = x_i - log sum_j exp(x_j)
// grad:  softmax:      dx = y (dy - sum_j dy_j y_j)
//        log_softmax:  dx = dy - exp(y) sum_j dy_j
//   both read dy and y, so forward and backward may run in place.
// One file for the two ops: they differ only in oneDNN's algorithm.
// Kernels: oneDNN softmax / logsoftmax forward and backward on the tensor
// seen as (outer, axis, inner).
#include "ops/cpu/dnnl.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// x as (outer, axis length, inner); the axis is checked by shape inference.
std::vector<int64_t> Dims3(const Shape& x, int64_t axis) {
  const int a = static_cast<int>(axis < 0 ? axis + x.ndim() : axis);
  return {x.Prod(0, a), x[a], x.Prod(a + 1, x.ndim())};
}

struct SoftmaxPrims {
  cpu::PlainCall fwd, bwd;
};

const SoftmaxPrims& Prims(const SoftmaxParams& p, const Shape& x) {
  const std::vector<int64_t> d = Dims3(x, p.axis);
  return cpu::Cached<SoftmaxPrims>(Fmt("softmax", p.log, d[0], ",", d[1], ",", d[2]), [&] {
    using namespace dnnl;
    const memory::desc md = cpu::PlainDesc(d);
    const engine& eng = cpu::DnnlEngine();
    const std::vector<cpu::PlainArg> fargs{{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md, true}};
    const std::vector<cpu::PlainArg> bargs{{DNNL_ARG_DIFF_DST, md}, {DNNL_ARG_DST, md}, {DNNL_ARG_DIFF_SRC, md, true}};
    if (p.log) {
      logsoftmax_forward::primitive_desc f({prop_kind::forward_training, md, 1}, cpu::Attr(), eng);
      logsoftmax_backward::primitive_desc b({md, md, 1}, cpu::Attr(), eng, f);
      return SoftmaxPrims{cpu::PlainCall(f, logsoftmax_forward(f), fargs),
                          cpu::PlainCall(b, logsoftmax_backward(b), bargs)};
    }
    softmax_forward::primitive_desc f({prop_kind::forward_training, md, 1}, cpu::Attr(), eng);
    softmax_backward::primitive_desc b({md, md, 1}, cpu::Attr(), eng, f);
    return SoftmaxPrims{cpu::PlainCall(f, softmax_forward(f), fargs), cpu::PlainCall(b, softmax_backward(b), bargs)};
  });
}

void SoftmaxInferShape(ShapeCtx& c) {
  const auto& p = c.params<SoftmaxParams>();
  const Shape& x = c.in[0];
  if (!x.known() || x.ndim() < 1) c.Fail(Fmt("x has shape ", x, "; expected at least 1 dim"));
  if (p.axis < -x.ndim() || p.axis >= x.ndim()) {
    c.Fail(Fmt("axis ", p.axis, " is out of range for x ", x, " (use -", x.ndim(), " to ", x.ndim() - 1, ")"));
  }
  c.out[0] = x;
}

void SoftmaxForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  Prims(c.params<SoftmaxParams>(), c.in[0].shape())
      .fwd.Run({c.in[0].raw(), c.out[0].raw()}, {OpReq::kWrite, c.req[0]}, Workspace(c));
}

// inputs: dy, y   output: dx
void SoftmaxBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  Prims(c.params<SoftmaxParams>(), c.in[0].shape())
      .bwd.Run({c.in[0].raw(), c.in[1].raw(), c.out[0].raw()}, {OpReq::kWrite, OpReq::kWrite, c.req[0]}, Workspace(c));
}

void Register(OpRegistry* r, const std::string& name, bool log) {
  OpDef& fwd = r->Add(name)
                   .Doc(log ? "log(softmax(x)) along axis (default -1)." : "Softmax along axis (default -1).")
                   .Unary()
                   .Params([log](AttrReader& a) {
                     SoftmaxParams p;
                     p.axis = a.Int("axis", -1);
                     p.log = log;
                     return std::any(p);
                   })
                   .InferShape(SoftmaxInferShape)
                   .Inplace({{0, 0}})
                   .Recompute(Cost::kCheap)
                   .Workspace([](const WorkspaceCtx& c) {
                     return Prims(c.params<SoftmaxParams>(), c.in[0]).fwd.WorkspaceBytes();
                   })
                   .CpuKernel(SoftmaxForward);
  AddBackward(r, fwd, {OutGrad(0), Output(0)}, log ? "dx = dy - exp(y) sum(dy)." : "dx = y (dy - sum(dy y)).")
      .Inplace({{0, 0}})
      .Workspace([](const WorkspaceCtx& c) { return Prims(c.params<SoftmaxParams>(), c.in[0]).bwd.WorkspaceBytes(); })
      .CpuKernel(SoftmaxBackward);
}

}  // namespace

void Register_softmax(OpRegistry* r) {
  Register(r, "softmax", false);
  Register(r, "log_softmax", true);
}

}  // namespace frugal
