// convolution: 2-D cross-correlation over NCHW, in groups.
//   x: (N, C, H, W)   W: (O, C/g, kh, kw)   b: (O,)   y: (N, O, OH, OW)
//   OH = floor((H + 2 pad_h - (dilate_h (kh - 1) + 1)) / stride_h) + 1, OW alike
//   y[n, o, i, j] = b[o] + sum_{c in group(o), p, q}
//                     W[o, c, p, q] x[n, c, i stride_h - pad_h + p dilate_h, j stride_w - pad_w + q dilate_w]
// grad:  dx = conv_transpose(dy, W)     dW = corr(x, dy)     db = sum_{n,i,j} dy
//        reads dy, x and W (not y, not b)
// Kernels: oneDNN convolution forward / backward data / backward weights,
// built once per shape and layouts. Activations may be plain or
// channels-last (x, y, dy, dx each; ChooseLayouts makes them nhwc between
// ops that take it). Where any is nhwc the primitives are built on nhwc and
// take those without a reorder; where all are plain they are built with
// format_tag::any (oneDNN picks its blocked nChw16c, 3-5x faster here than
// its plain-layout im2col + GEMM even with the reorders). PlainCall reorders
// whatever the primitive does not take through the workspace.
// kAdd: y by a post-op sum where y keeps the plain layout, otherwise by a
// reorder with a sum post-op from the workspace. The backward reorders dy
// once for both of its primitives.
// bfloat16 (mixed precision): x, y, dy and dx are bfloat16; W, b, dW and db
// stay float32. The reorder of W into the primitive's layout, made anyway,
// converts it; the weight gradient comes out of oneDNN in float32.
#include <glog/logging.h>

#include <optional>

#include "ops/cpu/dnnl.h"
#include "ops/conv_util.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

using cpu::AnyDesc;
using cpu::PlainDesc;
using dnnl::memory;

void ConvInferShape(ShapeCtx& c) {
  const auto& p = c.params<ConvParams>();
  InferConvInputs(c, /*transposed=*/false);
  const Shape& x = c.in[0];
  const int64_t oh = WindowOut(x[2], p.kernel[0], p.stride[0], p.pad[0], p.dilate[0]);
  const int64_t ow = WindowOut(x[3], p.kernel[1], p.stride[1], p.pad[1], p.dilate[1]);
  if (oh <= 0 || ow <= 0) {
    c.Fail(Fmt("the window ", PairStr(p.kernel), " with dilate ", PairStr(p.dilate), " does not fit x ", x,
               " padded by ", PairStr(p.pad), " (use a smaller kernel or more pad)"));
  }
  c.out[0] = Shape{x[0], p.num_filter, oh, ow};
}

// The layouts of one convolution's activations. The forward node knows x
// and y, the backward node dy, x and dx; ChooseLayouts gives dy y's layout
// and dx x's, so both nodes name the same primitives.
struct ConvLayouts {
  Layout x, y;
  bool nhwc() const { return x == Layout::kNhwc || y == Layout::kNhwc; }
};

// The three primitives of one convolution shape. When the two backward
// primitives read dy in the same non-plain layout, dy is reordered once
// into the start of the backward workspace (dy_reorder, dy_bytes) and both
// read it there.
struct ConvPrims {
  cpu::PlainCall fwd, bwd_data, bwd_weights;
  std::optional<cpu::Reorder> dy_reorder;
  int64_t dy_bytes = 0;
};

std::vector<int64_t> WeightDims(const ConvParams& p, int64_t cin) {
  const int64_t g = p.num_group;
  if (g == 1) return {p.num_filter, cin, p.kernel[0], p.kernel[1]};
  return {g, p.num_filter / g, cin / g, p.kernel[0], p.kernel[1]};  // goihw: the same bytes as (O, C/g, kh, kw)
}

ConvPrims MakeConvPrims(const ConvParams& p, const Shape& xs, DType t, ConvLayouts l) {
  if (t == DType::kBFloat16) cpu::RequireBf16();
  using namespace dnnl;
  const std::vector<int64_t> x = xs.dims(), w = WeightDims(p, xs[1]), b{p.num_filter};
  const std::vector<int64_t> y{xs[0], p.num_filter, WindowOut(xs[2], p.kernel[0], p.stride[0], p.pad[0], p.dilate[0]),
                               WindowOut(xs[3], p.kernel[1], p.stride[1], p.pad[1], p.dilate[1])};
  const memory::dims stride{p.stride[0], p.stride[1]}, pad{p.pad[0], p.pad[1]};
  const memory::dims dil{p.dilate[0] - 1, p.dilate[1] - 1};  // oneDNN counts the gaps
  const auto alg = algorithm::convolution_direct;
  const engine& eng = cpu::DnnlEngine();
  // The primitives' activations, and the user's.
  auto act = [&](const std::vector<int64_t>& dims) {
    return l.nhwc() ? cpu::LayoutDesc(dims, t, Layout::kNhwc) : AnyDesc(dims, t);
  };
  const memory::desc ux = cpu::LayoutDesc(x, t, l.x), uy = cpu::LayoutDesc(y, t, l.y);
  auto fwd_desc = [&](const memory::desc& xd, const memory::desc& wd, const memory::desc& yd) {
    return p.no_bias ? convolution_forward::desc(prop_kind::forward_training, alg, xd, wd, yd, stride, dil, pad, pad)
                     : convolution_forward::desc(prop_kind::forward_training, alg, xd, wd, AnyDesc(b), yd, stride, dil,
                                                 pad, pad);
  };
  convolution_forward::primitive_desc fpd(fwd_desc(act(x), AnyDesc(w, t), act(y)), cpu::Attr(), eng);
  // A post-op sum variant with the same layouts, for kAdd straight into the user's y.
  primitive fwd_sum;
  if (fpd.dst_desc() == uy) {
    convolution_forward::primitive_desc spd(fwd_desc(fpd.src_desc(), fpd.weights_desc(), fpd.dst_desc()),
                                            cpu::Attr(/*sum=*/true), eng, /*allow_empty=*/true);
    if (spd) fwd_sum = convolution_forward(spd);
  }
  std::vector<cpu::PlainArg> fargs{{DNNL_ARG_SRC, ux}, {DNNL_ARG_WEIGHTS, PlainDesc(w)}};
  if (!p.no_bias) fargs.push_back({DNNL_ARG_BIAS, PlainDesc(b)});
  fargs.push_back({DNNL_ARG_DST, uy, true});

  convolution_backward_data::primitive_desc dpd(
      convolution_backward_data::desc(alg, act(x), AnyDesc(w, t), act(y), stride, dil, pad, pad), cpu::Attr(), eng,
      fpd);
  auto wdesc = p.no_bias ? convolution_backward_weights::desc(alg, act(x), AnyDesc(w), act(y), stride, dil, pad, pad)
                         : convolution_backward_weights::desc(alg, act(x), AnyDesc(w), AnyDesc(b), act(y), stride, dil,
                                                              pad, pad);
  convolution_backward_weights::primitive_desc wpd(wdesc, cpu::Attr(), eng, fpd);
  const bool share_dy = dpd.diff_dst_desc() == wpd.diff_dst_desc() && dpd.diff_dst_desc() != uy;
  const memory::desc dy = share_dy ? dpd.diff_dst_desc() : uy;  // what the backward calls are given
  std::vector<cpu::PlainArg> wargs{
      {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_SRC, ux}, {DNNL_ARG_DIFF_WEIGHTS, PlainDesc(w), true}};
  if (!p.no_bias) wargs.push_back({DNNL_ARG_DIFF_BIAS, PlainDesc(b), true});
  ConvPrims k{
      cpu::PlainCall(fpd, convolution_forward(fpd), fargs, fwd_sum),
      cpu::PlainCall(dpd, convolution_backward_data(dpd),
                     {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, PlainDesc(w)}, {DNNL_ARG_DIFF_SRC, ux, true}}),
      cpu::PlainCall(wpd, convolution_backward_weights(wpd), wargs),
  };
  if (share_dy) {
    k.dy_reorder.emplace(uy, dy);
    k.dy_bytes = cpu::AlignUp(dy.get_size());
  }
  return k;
}

const ConvPrims& Prims(const ConvParams& p, const Shape& x, DType t, ConvLayouts l) {
  return cpu::Cached<ConvPrims>(Fmt("convolution", x, DTypeName(t), LayoutName(l.x), LayoutName(l.y), p.Key()),
                                [&] { return MakeConvPrims(p, x, t, l); });
}

int64_t ConvForwardWorkspace(const WorkspaceCtx& c) {
  return Prims(c.params<ConvParams>(), c.in[0], c.dtype, {c.in_layouts[0], c.out_layouts[0]}).fwd.WorkspaceBytes();
}

// inputs: x, W[, b]   output: y
void ConvForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  Prims(p, c.in[0].shape(), c.in[0].dtype(), {c.in[0].layout(), c.out[0].layout()}).fwd.RunForward(c, !p.no_bias);
}

// The backward runs data then weights, one after the other in one workspace.
int64_t ConvBackwardWorkspace(const WorkspaceCtx& c) {
  const ConvPrims& k = Prims(c.params<ConvParams>(), c.in[1], c.dtype, {c.in_layouts[1], c.in_layouts[0]});
  return k.dy_bytes + std::max(k.bwd_data.WorkspaceBytes(), k.bwd_weights.WorkspaceBytes());
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void ConvBackward(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  const ConvPrims& k = Prims(p, c.in[1].shape(), c.in[1].dtype(), {c.in[1].layout(), c.in[0].layout()});
  CHECK(!c.out[0].defined() || c.out[0].layout() == c.in[1].layout()) << c.node.Where() << ": dx laid out unlike x";
  char* ws = static_cast<char*>(Workspace(c));
  void* dy = c.in[0].raw();
  if (k.dy_reorder) {  // dy in the backward primitives' layout, once for both
    k.dy_reorder->Run(dy, ws);
    dy = ws;
    ws += k.dy_bytes;
  }
  // dx = conv_transpose(dy, W), dW = corr(x, dy), db = sum(dy)
  cpu::RunWeightedBackward(k.bwd_data, k.bwd_weights, c, dy, !p.no_bias, ws);
}

}  // namespace

void Register_convolution(OpRegistry* r) {
  OpDef& fwd = r->Add("convolution")
                   .Doc("2-D convolution over NCHW: kernel, stride, dilate, pad, num_filter, num_group, no_bias.")
                   .Inputs({{"x"}, {"weight", VarKind::kParam, "xavier"}, {"bias", VarKind::kParam, "zero"}})
                   .Outputs({"y"})
                   .Params([](AttrReader& a) { return std::any(ReadConvParams(a)); })
                   .NumInputsFn(ConvNumInputs)
                   .InferShape(ConvInferShape)
                   .Recompute(Cost::kExpensive)
                   .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>& out) {
                     return 2.0 * out[0].Size() * (in[1].Size() / in[1][0]);  // per output: (C/g)*kh*kw multiply-adds
                   })
                   .Workspace(ConvForwardWorkspace)
                   .Bf16()
                   .ChannelsLast({0}, {0}, /*tied=*/false)
                   .CpuKernel(ConvForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1)}, "dx = conv_transpose(dy, W), dW = corr(x, dy), db = sum(dy).")
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 4.0 * in[0].Size() * (in[2].Size() / in[2][0]);  // dx and dW: each as much as the forward
      })
      .Workspace(ConvBackwardWorkspace)
      .ChannelsLast({0, 1}, {0}, /*tied=*/false)
      .CpuKernel(ConvBackward);
}

}  // namespace frugal
