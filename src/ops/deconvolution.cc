// deconvolution: 2-D transposed convolution over NCHW, in groups (MXNet's
// Deconvolution): the gradient of a convolution with respect to its input.
//   x: (N, C, H, W)   W: (C, O/g, kh, kw)   b: (O,)   y: (N, O, OH, OW)
//   OH = stride_h (H - 1) + dilate_h (kh - 1) + 1 - 2 pad_h + adj_h, OW alike;
//   with target_shape (th, tw) pad and adj are chosen to give OH = th (MXNet's rule:
//   total = stride (H - 1) + dilate (kh - 1) + 1 - th, adj = total % 2, pad = (total + 1) / 2)
//   y[n, o, i stride - pad + p dilate, ...] += W[c, o, p, q] x[n, c, i, j]   (c in group(o)), + b[o]
// grad:  dx = conv(dy, W)     dW = corr(dy, x) (roles of convolution's dW swapped)     db = sum dy
//        reads dy, x and W
// Kernels: oneDNN deconvolution forward / backward data / backward weights,
// in oneDNN's own layouts with reorders through the workspace (as convolution).
#include "ops/cpu/dnnl.h"
#include "ops/conv_util.h"
#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

using cpu::AnyDesc;
using cpu::PlainDesc;
using dnnl::memory;

}  // namespace

// Pad and adj in effect (target_shape overrides the given ones).
void EffectivePad(const ConvParams& p, const Shape& x, Pair* pad, Pair* adj) {
  *pad = p.pad;
  *adj = p.adj;
  if (!p.has_target_shape) return;
  for (int d = 0; d < 2; ++d) {
    const int64_t total = p.stride[d] * (x[2 + d] - 1) + p.dilate[d] * (p.kernel[d] - 1) + 1 - p.target_shape[d];
    (*adj)[d] = total % 2;
    (*pad)[d] = (total + 1) / 2;
  }
}

namespace {

int64_t DeconvOut(const ConvParams& p, const Shape& x, int d) {
  Pair pad, adj;
  EffectivePad(p, x, &pad, &adj);
  return p.stride[d] * (x[2 + d] - 1) + p.dilate[d] * (p.kernel[d] - 1) + 1 - 2 * pad[d] + adj[d];
}

void DeconvInferShape(ShapeCtx& c) {
  const auto& p = c.params<ConvParams>();
  InferConvInputs(c, /*transposed=*/true);
  const Shape& x = c.in[0];
  Pair pad, adj;
  EffectivePad(p, x, &pad, &adj);
  for (int d = 0; d < 2; ++d) {
    if (pad[d] < 0 || adj[d] > pad[d] || adj[d] >= std::max(p.stride[d], p.dilate[d])) {
      c.Fail(Fmt("pad ", PairStr(pad), " and adj ", PairStr(adj), " do not fit x ", x,
                 " (adj must be below the stride and at most the pad; for target_shape, the target must be "
                 "reachable from the input by the stride)"));
    }
  }
  const int64_t oh = DeconvOut(p, x, 0), ow = DeconvOut(p, x, 1);
  if (oh <= 0 || ow <= 0) c.Fail(Fmt("the output would be empty for x ", x, " with pad ", PairStr(pad)));
  c.out[0] = Shape{x[0], p.num_filter, oh, ow};
}

struct DeconvPrims {
  cpu::PlainCall fwd, bwd_data, bwd_weights;
};

DeconvPrims MakeDeconvPrims(const ConvParams& p, const Shape& xs) {
  using namespace dnnl;
  const int64_t g = p.num_group, cin = xs[1], o = p.num_filter;
  const std::vector<int64_t> x = xs.dims(), b{o};
  const std::vector<int64_t> y{xs[0], o, DeconvOut(p, xs, 0), DeconvOut(p, xs, 1)};
  // oneDNN's logical weights are (O, C, kh, kw); MXNet's bytes are (C, O, kh, kw): iohw.
  const memory::dims w = g == 1 ? memory::dims{o, cin, p.kernel[0], p.kernel[1]}
                                : memory::dims{g, o / g, cin / g, p.kernel[0], p.kernel[1]};
  const memory::desc w_user(w, memory::data_type::f32, g == 1 ? memory::format_tag::iohw : memory::format_tag::giohw);
  const memory::desc w_any(w, memory::data_type::f32, memory::format_tag::any);
  Pair pad, adj;
  EffectivePad(p, xs, &pad, &adj);
  const memory::dims stride{p.stride[0], p.stride[1]}, pad_l{pad[0], pad[1]};
  const memory::dims pad_r{pad[0] - adj[0], pad[1] - adj[1]};
  const memory::dims dil{p.dilate[0] - 1, p.dilate[1] - 1};
  const auto alg = algorithm::deconvolution_direct;
  const engine& eng = cpu::DnnlEngine();
  auto fdesc = p.no_bias ? deconvolution_forward::desc(prop_kind::forward_training, alg, AnyDesc(x), w_any, AnyDesc(y),
                                                       stride, dil, pad_l, pad_r)
                         : deconvolution_forward::desc(prop_kind::forward_training, alg, AnyDesc(x), w_any, AnyDesc(b),
                                                       AnyDesc(y), stride, dil, pad_l, pad_r);
  deconvolution_forward::primitive_desc fpd(fdesc, cpu::Attr(), eng);
  std::vector<cpu::PlainArg> fargs{{DNNL_ARG_SRC, PlainDesc(x)}, {DNNL_ARG_WEIGHTS, w_user}};
  if (!p.no_bias) fargs.push_back({DNNL_ARG_BIAS, PlainDesc(b)});
  fargs.push_back({DNNL_ARG_DST, PlainDesc(y), true});
  deconvolution_backward_data::primitive_desc dpd(
      deconvolution_backward_data::desc(alg, AnyDesc(x), w_any, AnyDesc(y), stride, dil, pad_l, pad_r), cpu::Attr(),
      eng, fpd);
  auto wdesc = p.no_bias
                   ? deconvolution_backward_weights::desc(alg, AnyDesc(x), w_any, AnyDesc(y), stride, dil, pad_l, pad_r)
                   : deconvolution_backward_weights::desc(alg, AnyDesc(x), w_any, AnyDesc(b), AnyDesc(y), stride, dil,
                                                          pad_l, pad_r);
  deconvolution_backward_weights::primitive_desc wpd(wdesc, cpu::Attr(), eng, fpd);
  std::vector<cpu::PlainArg> wargs{
      {DNNL_ARG_DIFF_DST, PlainDesc(y)}, {DNNL_ARG_SRC, PlainDesc(x)}, {DNNL_ARG_DIFF_WEIGHTS, w_user, true}};
  if (!p.no_bias) wargs.push_back({DNNL_ARG_DIFF_BIAS, PlainDesc(b), true});
  return DeconvPrims{
      cpu::PlainCall(fpd, deconvolution_forward(fpd), fargs),
      cpu::PlainCall(
          dpd, deconvolution_backward_data(dpd),
          {{DNNL_ARG_DIFF_DST, PlainDesc(y)}, {DNNL_ARG_WEIGHTS, w_user}, {DNNL_ARG_DIFF_SRC, PlainDesc(x), true}}),
      cpu::PlainCall(wpd, deconvolution_backward_weights(wpd), wargs),
  };
}

const DeconvPrims& Prims(const ConvParams& p, const Shape& x) {
  return cpu::Cached<DeconvPrims>(Fmt("deconvolution", x, p.Key()), [&] { return MakeDeconvPrims(p, x); });
}

// inputs: x, W[, b]   output: y
void DeconvForward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  const auto& p = c.params<ConvParams>();
  Prims(p, c.in[0].shape()).fwd.RunForward(c, !p.no_bias);
}

// inputs: dy, x, W   outputs: dx, dW[, db]
void DeconvBackward(const KernelCtx& c) {
  const auto& p = c.params<ConvParams>();
  const DeconvPrims& k = Prims(p, c.in[1].shape());
  cpu::RunWeightedBackward(k.bwd_data, k.bwd_weights, c, c.in[0].raw(), !p.no_bias, Workspace(c));
}

}  // namespace

void Register_deconvolution(OpRegistry* r) {
  OpDef& fwd =
      r->Add("deconvolution")
          .Doc(
              "2-D transposed convolution over NCHW: kernel, stride, dilate, pad, adj, target_shape, num_filter, "
              "num_group, no_bias; weight (C, num_filter/num_group, kh, kw).")
          .Inputs({{"x"}, {"weight", VarKind::kParam, "xavier"}, {"bias", VarKind::kParam, "zero"}})
          .Outputs({"y"})
          .Params([](AttrReader& a) {
            ConvParams p = ReadConvParams(a);
            p.adj = ReadPair(a, "adj", {0, 0}, 0);
            p.target_shape = ReadPair(a, "target_shape", {0, 0}, 0);
            p.has_target_shape = p.target_shape[0] > 0 || p.target_shape[1] > 0;
            FRUGAL_REQUIRE(!p.has_target_shape || (p.target_shape[0] > 0 && p.target_shape[1] > 0), a.where(),
                           ": target_shape ", PairStr(p.target_shape), " must give both sizes");
            return std::any(p);
          })
          .NumInputsFn(ConvNumInputs)
          .InferShape(DeconvInferShape)
          .Recompute(Cost::kExpensive)
          .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
            return 2.0 * in[0].Size() * (in[1].Size() / in[1][0]);  // per input: (O/g)*kh*kw multiply-adds
          })
          .Workspace([](const WorkspaceCtx& c) { return Prims(c.params<ConvParams>(), c.in[0]).fwd.WorkspaceBytes(); })
          .CpuKernel(DeconvForward);
  AddBackward(r, fwd, {OutGrad(0), Input(0), Input(1)}, "dx = conv(dy, W), dW, db = sum(dy).")
      .Flops([](const Node&, const std::vector<Shape>& in, const std::vector<Shape>&) {
        return 4.0 * in[1].Size() * (in[2].Size() / in[2][0]);  // dx and dW: each as much as the forward
      })
      .Workspace([](const WorkspaceCtx& c) {
        const DeconvPrims& k = Prims(c.params<ConvParams>(), c.in[1]);
        return std::max(k.bwd_data.WorkspaceBytes(), k.bwd_weights.WorkspaceBytes());
      })
      .CpuKernel(DeconvBackward);
}

}  // namespace frugal
