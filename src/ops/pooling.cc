// pooling: max or average over 2-D windows of NCHW.
//   x: (N, C, H, W)   y: (N, C, OH, OW)
//   OH = floor((H + 2 pad_h - kh) / stride_h) + 1 ("valid"; "full" rounds up), OW alike
//   global_pool: the window is the whole (H, W), stride 1, no pad
//   max: y = max over the window (padding never wins)
//   avg: y = sum over the window / count; count = kh kw (count_include_pad,
//        MXNet's default) or the number of window elements inside x
//   outputs: y, and a hidden "argmax": oneDNN's max-pooling workspace (one
//   byte per element of y for windows under 256 elements; empty for avg)
// grad:  max: dx[argmax of each window] += dy     avg: dx[window] += dy / count
//   reads dy and argmax: neither x nor y. The alternative, recomputing the
//   argmax in the backward from x, needs x kept to the backward (4 bytes per
//   element of x, where the argmax is 1 byte per element of y: 16x less for
//   2x2 stride 2 windows) plus a transient y and argmax in the workspace; so
//   the hidden output keeps memory lowest. It also lets x die early when no
//   other backward reads it (conv -> pool).
// Kernels: oneDNN pooling forward (training with the workspace, inference
// without) and backward, in float32 or bfloat16 (x, y, dy and dx alike; the
// argmax workspace is the same for both). The primitives run on plain NCHW,
// or on channels-last where x or y is (ChooseLayouts gives dx x's layout
// and dy y's, so the backward runs on the forward's layout and reads its
// argmax as written); PlainCall reorders the other.
#include <glog/logging.h>

#include "ops/cpu/dnnl.h"
#include "ops/conv_util.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
Window WindowFor(const PoolParams& p, const Shape& x) {
  Window w;
  if (p.global) {
    w.kernel = {x[2], x[3]};
    w.stride = {1, 1};
    w.pad_l = w.pad_r = {0, 0};
  } else {
    w.kernel = p.kernel;
    w.stride = p.stride;
    w.pad_l = w.pad_r = p.pad;
  }
  const int64_t in[2] = {x[2], x[3]};
  int64_t out[2];
  for (int d = 0; d < 2; ++d) {
    out[d] = WindowOut(in[d], w.kernel[d], w.stride[d], w.pad_l[d], 1, p.full);
    // "full": the last window may hang over the right pad; oneDNN sees that as more right padding.
    w.pad_r[d] = std::max<int64_t>(w.pad_r[d], (out[d] - 1) * w.stride[d] + w.kernel[d] - in[d] - w.pad_l[d]);
  }
  w.oh = out[0];
  w.ow = out[1];
  return w;
}

namespace {

using cpu::PlainDesc;
using dnnl::memory;

struct PoolPrims {
  cpu::PlainCall train, infer, bwd;
  int64_t argmax_bytes = 0;
};

PoolPrims MakePoolPrims(const PoolParams& p, const Shape& xs, DType t, Layout xl, Layout yl) {
  if (t == DType::kBFloat16) cpu::RequireBf16();
  using namespace dnnl;
  const Window w = WindowFor(p, xs);
  const Shape ys{xs[0], xs[1], w.oh, w.ow};
  const Layout run = xl == Layout::kNhwc || yl == Layout::kNhwc ? Layout::kNhwc : Layout::kPlain;
  const memory::desc x = cpu::LayoutDesc(xs.dims(), t, run), y = cpu::LayoutDesc(ys.dims(), t, run);  // the primitives'
  const memory::desc ux = cpu::LayoutDesc(xs.dims(), t, xl), uy = cpu::LayoutDesc(ys.dims(), t, yl);  // the user's
  const memory::dims stride{w.stride[0], w.stride[1]}, kernel{w.kernel[0], w.kernel[1]};
  const memory::dims pad_l{w.pad_l[0], w.pad_l[1]}, pad_r{w.pad_r[0], w.pad_r[1]};
  const algorithm alg = p.max                 ? algorithm::pooling_max
                        : p.count_include_pad ? algorithm::pooling_avg_include_padding
                                              : algorithm::pooling_avg_exclude_padding;
  const engine& eng = cpu::DnnlEngine();
  auto fwd = [&](prop_kind k) {
    return pooling_forward::primitive_desc(pooling_forward::desc(k, alg, x, y, stride, kernel, pad_l, pad_r),
                                           cpu::Attr(), eng);
  };
  pooling_forward::primitive_desc tpd = fwd(prop_kind::forward_training), ipd = fwd(prop_kind::forward_inference);
  pooling_backward::primitive_desc bpd(pooling_backward::desc(alg, x, y, stride, kernel, pad_l, pad_r), cpu::Attr(),
                                       eng, tpd);
  std::vector<cpu::PlainArg> targs{{DNNL_ARG_SRC, ux}, {DNNL_ARG_DST, uy, true}};
  std::vector<cpu::PlainArg> bargs{{DNNL_ARG_DIFF_DST, uy}, {DNNL_ARG_DIFF_SRC, ux, true}};
  const memory::desc ws = tpd.workspace_desc();
  if (p.max) {
    targs.push_back({DNNL_ARG_WORKSPACE, ws, true, /*write_only=*/true});
    bargs.insert(bargs.begin() + 1, {DNNL_ARG_WORKSPACE, ws});
  }
  return PoolPrims{cpu::PlainCall(tpd, pooling_forward(tpd), targs),
                   cpu::PlainCall(ipd, pooling_forward(ipd), {{DNNL_ARG_SRC, ux}, {DNNL_ARG_DST, uy, true}}),
                   cpu::PlainCall(bpd, pooling_backward(bpd), bargs), p.max ? static_cast<int64_t>(ws.get_size()) : 0};
}

const PoolPrims& Prims(const PoolParams& p, const Shape& x, DType t, Layout xl, Layout yl) {
  return cpu::Cached<PoolPrims>(Fmt("pooling", x, DTypeName(t), LayoutName(xl), LayoutName(yl), p.Key()),
                                [&] { return MakePoolPrims(p, x, t, xl, yl); });
}

void PoolInferShape(ShapeCtx& c) {
  const auto& p = c.params<PoolParams>();
  const Shape& x = c.in[0];
  RequireNchw(c, x);
  const Window w = WindowFor(p, x);
  if (w.oh <= 0 || w.ow <= 0 || w.pad_l[0] >= w.kernel[0] || w.pad_l[1] >= w.kernel[1]) {
    c.Fail(Fmt("the window ", PairStr(w.kernel), " with pad ", PairStr(w.pad_l), " does not fit x ", x,
               " (the kernel must fit the padded input and exceed the pad)"));
  }
  c.out[0] = Shape{x[0], x[1], w.oh, w.ow};
  // The argmax workspace, seen as floats (the same for float32 and bfloat16, and, as
  // far as oneDNN 2.6 goes, for both layouts; the kernel checks).
  c.out[1] = Shape{(Prims(p, x, DType::kFloat32, Layout::kPlain, Layout::kPlain).argmax_bytes + 3) / 4};
}

int64_t PoolForwardWorkspace(const WorkspaceCtx& c) {
  const PoolPrims& k = Prims(c.params<PoolParams>(), c.in[0], c.dtype, c.in_layouts[0], c.out_layouts[0]);
  return std::max(k.train.WorkspaceBytes(), k.infer.WorkspaceBytes());
}

// inputs: x   outputs: y, argmax
void PoolForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<PoolParams>();
  const PoolPrims& k = Prims(p, c.in[0].shape(), c.in[0].dtype(), c.in[0].layout(), c.out[0].layout());
  void* ws = Workspace(c);
  // The argmax is needed only when a backward pass will read it.
  if (p.max && c.is_train && c.req[1] != OpReq::kNull) {
    CHECK_LE(k.argmax_bytes, c.out[1].bytes()) << c.node.Where() << ": the argmax workspace outgrew its output";
    k.train.Run({c.in[0].raw(), c.out[0].raw(), c.out[1].raw()}, {OpReq::kWrite, c.req[0], OpReq::kWrite}, ws);
  } else {
    k.infer.Run({c.in[0].raw(), c.out[0].raw()}, {OpReq::kWrite, c.req[0]}, ws);
  }
}

// The backward's inputs (dy, argmax) do not determine x's (H, W); its output dx does.
int64_t PoolBackwardWorkspace(const WorkspaceCtx& c) {
  return Prims(c.params<PoolParams>(), c.out[0], c.dtype, c.out_layouts[0], c.in_layouts[0]).bwd.WorkspaceBytes();
}

// inputs: dy, argmax   output: dx
void PoolBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<PoolParams>();
  const PoolPrims& k = Prims(p, c.out[0].shape(), c.out[0].dtype(), c.out[0].layout(), c.in[0].layout());
  void* ws = Workspace(c);
  if (p.max) {
    k.bwd.Run({c.in[0].raw(), c.in[1].raw(), c.out[0].raw()}, {OpReq::kWrite, OpReq::kWrite, c.req[0]}, ws);
  } else {
    k.bwd.Run({c.in[0].raw(), c.out[0].raw()}, {OpReq::kWrite, c.req[0]}, ws);
  }
}

}  // namespace

PoolParams PoolParams::Parse(AttrReader& a) {
  PoolParams p;
  p.max = a.Choice("pool_type", "max", {"max", "avg"}) == "max";
  p.global = a.Bool("global_pool", false);
  p.kernel = ReadPair(a, "kernel", {0, 0}, 1, /*required=*/!p.global);
  p.stride = ReadPair(a, "stride", {1, 1}, 1);
  p.pad = ReadPair(a, "pad", {0, 0}, 0);
  p.count_include_pad = a.Bool("count_include_pad", true);
  p.full = a.Choice("pooling_convention", "valid", {"valid", "full"}) == "full";
  FRUGAL_REQUIRE(!(p.full && !p.max && p.count_include_pad), a.where(),
                 ": pooling_convention full with avg pooling needs count_include_pad false "
                 "(the overhanging window has no agreed count)");
  return p;
}

void Register_pooling(OpRegistry* r) {
  OpDef& fwd =
      r->Add("pooling")
          .Doc(
              "2-D max or average pooling over NCHW: pool_type, kernel, stride, pad, global_pool, count_include_pad, "
              "pooling_convention valid|full.")
          .Inputs({{"x"}})
          .Outputs({"y", "argmax"})
          .VisibleOutputs(1)
          .WritesOutputsTogether()
          .Params<PoolParams>()
          .InferShape(PoolInferShape)
          .Recompute(Cost::kCheap)
          .Workspace(PoolForwardWorkspace)
          .Bf16()
          .ChannelsLast({0}, {0}, /*tied=*/false)
          .CpuKernel(PoolForward);
  AddBackward(r, fwd, {OutGrad(0), Output(1)}, "dy to the argmax of each window (max) or spread over it (avg).")
      .Workspace(PoolBackwardWorkspace)
      .ChannelsLast({0}, {0}, /*tied=*/false)
      .CpuKernel(PoolBackward);
}

}  // namespace frugal
