// ONNX import rules for the layers of a network: convolution and pooling
// (with the fallbacks for what frugal's ops cannot express), batch and
// layer normalisation, matrix products, softmax, dropout, activations,
// instance normalisation and LRN, MVN (recurrent layers: rules_recurrent.cc).
//
// Rule of thumb: when frugal cannot express a configuration exactly, the
// rule says so (unsupported); it never approximates.
#include <algorithm>
#include <limits>

#include "interchange/onnx/op_table.h"
#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {

// ------------------------------------------------------ convolution, pooling

namespace {

// Symmetric per-dim pads of a convolution or pooling from ONNX's auto_pad
// and pads, given the input's spatial dims (needed for SAME_*). Returns ""
// and sets *pad, or the reason frugal cannot express them.
std::string SymmetricPads(const NodeView& v, const Shape& x, const std::vector<int64_t>& kernel,
                          const std::vector<int64_t>& stride, const std::vector<int64_t>& dilate,
                          std::vector<int64_t>* pad) {
  const size_t nd = kernel.size();
  pad->assign(nd, 0);
  const std::string auto_pad = v.Str("auto_pad", "NOTSET");
  if (auto_pad == "VALID") return "";
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!x.known() || x.ndim() != static_cast<int>(nd) + 2) return "auto_pad " + auto_pad + " needs the input's shape";
    for (size_t d = 0; d < nd; ++d) {
      const int64_t in = x[static_cast<int>(d) + 2];
      const int64_t out = (in + stride[d] - 1) / stride[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * stride[d] + (kernel[d] - 1) * dilate[d] + 1 - in);
      if (total % 2)
        return Fmt("auto_pad ", auto_pad, " pads spatial dim ", d, " by ", total,
                   " (one more on one side), which frugal's symmetric pad cannot express");
      (*pad)[d] = total / 2;
    }
    return "";
  }
  if (auto_pad != "NOTSET") return "auto_pad '" + auto_pad + "' is not supported";
  const std::vector<int64_t> pads = v.Ints("pads");
  if (pads.empty()) return "";
  if (pads.size() != 2 * nd) return Fmt("pads ", TupleStr(pads), " do not match ", nd, " spatial dims");
  for (size_t d = 0; d < nd; ++d) {
    if (pads[d] != pads[d + nd])
      return Fmt("pads ", TupleStr(pads), " differ at the start and end of a dim, which frugal's symmetric pad ",
                 "cannot express");
    (*pad)[d] = pads[d];
  }
  return "";
}

// The attributes of frugal's convolution, 2-D; a deconvolution adds adj.
AttrMap ConvAttrs(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& pad, const std::vector<int64_t>& dilate, int64_t num_filter,
                  int64_t group, bool bias) {
  return {{"kernel", TupleStr(kernel)}, {"stride", TupleStr(stride)},       {"pad", TupleStr(pad)},
          {"dilate", TupleStr(dilate)}, {"num_filter", IntStr(num_filter)}, {"num_group", IntStr(group)},
          {"no_bias", BoolStr(!bias)}};
}

// ConvTranspose beyond frugal's deconvolution (output_shape, SAME pads,
// pads that differ at the two ends, output_padding, 1-D): the full
// transposed convolution (no pads), its rows [begin, begin + out) copied
// (zeros beyond its ends), then the bias.
Lowering DeconvByCrop(const NodeView& v, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                      std::vector<int64_t> dilate, const std::vector<int64_t>& adj) {
  const Shape &x = v.InputShape(0), &w = v.InputShape(1);
  const int nd = static_cast<int>(kernel.size());
  if (nd != 1 && nd != 2) return Unsupported(Fmt("frugal's deconvolution is 2-D (NCHW); this one is ", nd, "-D"));
  if (!x.known() || x.ndim() != nd + 2) return Unsupported("needs the input's shape");
  const std::string auto_pad = v.Str("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return Unsupported("auto_pad '" + auto_pad + "'");
  std::vector<int64_t> shape = v.Ints("output_shape"), pads = v.Ints("pads");
  if (shape.size() == static_cast<size_t>(nd) + 2) shape.erase(shape.begin(), shape.begin() + 2);
  if ((!shape.empty() && shape.size() != static_cast<size_t>(nd)) || (!pads.empty() && pads.size() != 2u * nd))
    return Unsupported(Fmt("output_shape ", TupleStr(shape), " or pads ", TupleStr(pads), " for ", nd, " dims"));
  const int64_t group = v.Int("group", 1), m = w[1] * group;
  std::vector<int64_t> full = {x[0], m}, dims = {x[0], m}, begin(nd);
  for (int d = 0; d < nd; ++d) {
    const int64_t in = x[d + 2], eff = (kernel[d] - 1) * dilate[d] + 1;
    full.push_back(stride[d] * (in - 1) + eff);
    if (!shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = shape.empty() ? in * stride[d] : shape[d];
      const int64_t total = full.back() + adj[d] - out;  // negative: rows past the end, as ONNX's floor division has
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      begin[d] = auto_pad == "SAME_UPPER" ? half : total - half;
      dims.push_back(out);
    } else {
      begin[d] = auto_pad == "VALID" || pads.empty() ? 0 : pads[d];
      dims.push_back(full.back() + adj[d] - begin[d] - (auto_pad == "VALID" || pads.empty() ? 0 : pads[d + nd]));
    }
    if (dims.back() < 1) return Unsupported(Fmt("an empty output dim ", d + 2));
  }
  Lowering l;
  Operand in = In(0), weight = In(1);
  if (nd == 1) {  // (N, C, L) as (N, C, L, 1)
    in = Add(&l, "reshape", {{"shape", "(0,0,-1,1)"}}, {in});
    weight = Add(&l, "reshape", {{"shape", "(0,0,-1,1)"}}, {weight});
    kernel.push_back(1), stride.push_back(1), dilate.push_back(1);
  }
  AttrMap attrs = ConvAttrs(kernel, stride, {0, 0}, dilate, m, group, /*bias=*/false);
  attrs["adj"] = TupleStr({0, 0});
  Operand y = Add(&l, "deconvolution", std::move(attrs), {in, weight});
  const std::vector<int64_t> sf = Strides(full);
  const int64_t n_full = Shape(full).Size();
  const std::vector<int64_t> pos = MapPositions(dims, [&](const std::vector<int64_t>& c) {
    int64_t at = c[0] * sf[0] + c[1] * sf[1];
    for (int d = 0; d < nd; ++d) {
      const int64_t f = c[d + 2] + begin[d];
      if (f < 0 || f >= full[d + 2]) return n_full;  // the stacked zero
      at += f * sf[d + 2];
    }
    return at;
  });
  Tensor zero = Tensor::Empty(Shape{1}, DType::kFloat32, {}, MemKind::kParam);
  zero.f()[0] = 0;
  l.constants.push_back({0, "zero", zero, false});
  Operand flat = Add(&l, "reshape", {{"shape", "(-1)"}}, {y});
  Operand both = Add(&l, "concat", {{"dim", "0"}, {"num_args", "2"}}, {flat, Const(0)});
  if (std::string why = Take(&l, both, n_full + 1, pos, dims, 0); !why.empty()) return Unsupported(why);
  if (v.HasInput(2)) {
    const Operand cropped = Prev(static_cast<int>(l.nodes.size()) - 1);
    std::vector<int64_t> per_channel(nd + 2, 1);
    per_channel[1] = m;
    Operand b = Add(&l, "reshape", {{"shape", TupleStr(per_channel)}}, {In(2)});
    Add(&l, "add", {}, {cropped, b});
  }
  return l;
}

// The spatial kernel of a Conv or ConvTranspose: kernel_shape, or the
// weight's (input 1's) dims past the first two. Returns why not, or "".
std::string KernelOf(const NodeView& v, std::vector<int64_t>* kernel) {
  const Shape& w = v.InputShape(1);
  if (!w.known() || w.ndim() < 3) return "needs the weight's shape (known dims)";
  *kernel = v.Ints("kernel_shape");
  if (kernel->empty()) kernel->assign(w.dims().begin() + 2, w.dims().end());
  if (kernel->size() != static_cast<size_t>(w.ndim() - 2))
    return Fmt("kernel_shape ", TupleStr(*kernel), " does not match weight ", w);
  return "";
}

}  // namespace

// Conv(X, W[, B]): W is (M, C/group, k1, k2, ...).
Lowering ConvRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}); !why.empty())
    return Unsupported(why);
  std::vector<int64_t> kernel;
  if (auto why = KernelOf(v, &kernel); !why.empty()) return Unsupported(why);
  const Shape& w = v.InputShape(1);
  const size_t nd = kernel.size();
  if (nd != 2) return Unsupported(Fmt("frugal's convolution is 2-D (NCHW); this one is ", nd, "-D"));
  std::vector<int64_t> stride = IntsOr(v, "strides", nd, 1), dilate = IntsOr(v, "dilations", nd, 1), pad;
  if (auto why = SymmetricPads(v, v.InputShape(0), kernel, stride, dilate, &pad); !why.empty()) return Unsupported(why);
  const bool bias = v.HasInput(2);
  return One("convolution", ConvAttrs(kernel, stride, pad, dilate, w[0], v.Int("group", 1), bias), bias ? 3 : 2);
}

// ConvTranspose(X, W[, B]): W is (C, M/group, k1, k2, ...).
Lowering ConvTransposeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr(
          {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"});
      !why.empty())
    return Unsupported(why);
  const std::string auto_pad = v.Str("auto_pad", "NOTSET");
  std::vector<int64_t> kernel;
  if (auto why = KernelOf(v, &kernel); !why.empty()) return Unsupported(why);
  const Shape& w = v.InputShape(1);
  const size_t nd = kernel.size();
  std::vector<int64_t> stride = IntsOr(v, "strides", nd, 1), dilate = IntsOr(v, "dilations", nd, 1), pad;
  const std::vector<int64_t> adj = IntsOr(v, "output_padding", nd, 0);
  // frugal's deconvolution as it is: 2-D, symmetric pads, and MXNet's adj
  // (which trims padding, where ONNX's output_padding adds rows).
  bool native = nd == 2 && !v.Has("output_shape") && (auto_pad == "NOTSET" || auto_pad == "VALID") &&
                SymmetricPads(v, v.InputShape(0), kernel, stride, dilate, &pad).empty();
  for (size_t d = 0; native && d < nd; ++d) native = adj[d] <= pad[d] && adj[d] < stride[d];
  if (!native) return DeconvByCrop(v, kernel, stride, dilate, adj);
  const int64_t group = v.Int("group", 1);
  const bool bias = v.HasInput(2);
  AttrMap attrs = ConvAttrs(kernel, stride, pad, dilate, w[1] * group, group, bias);
  attrs["adj"] = TupleStr(adj);
  return One("deconvolution", std::move(attrs), bias ? 3 : 2);
}

namespace {

// Pooling that frugal's op cannot express (ceil_mode, dilations, pads that
// differ at the two ends, other than 1-D or 2-D): every window's elements
// copied to a last axis (positions known at import; outside the input, a
// stacked -inf for max, 0 for avg), then their max, or their sum divided by
// the number of input elements in the window (count_include_pad=0).
Lowering PoolByCopies(const NodeView& v, bool avg, const std::vector<int64_t>& kernel,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& dilate) {
  const Shape& x = v.InputShape(0);
  const int nd = static_cast<int>(kernel.size());
  if (!x.known() || x.ndim() != nd + 2) return Unsupported(Fmt("needs the input's shape, (N, C) and ", nd, " dims"));
  if (avg && v.Int("count_include_pad", 0) != 0)
    return Unsupported("count_include_pad=1 with ceil_mode, dilations or pads frugal's pooling lacks");
  const std::string auto_pad = v.Str("auto_pad", "NOTSET");
  const std::vector<int64_t> pads = v.Ints("pads");
  if (!pads.empty() && pads.size() != 2 * kernel.size()) return Unsupported(Fmt("pads ", TupleStr(pads)));
  std::vector<int64_t> begin(nd, 0), out(nd);
  for (int d = 0; d < nd; ++d) {
    const int64_t in = x[d + 2], eff = (kernel[d] - 1) * dilate[d] + 1, s = stride[d];
    if (s < 1 || kernel[d] < 1 || dilate[d] < 1) return Unsupported("strides, kernel and dilations must be positive");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[d] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out[d] - 1) * s + eff - in);
      begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "NOTSET" || auto_pad == "VALID") {
      if (auto_pad == "NOTSET" && !pads.empty()) begin[d] = pads[d];
      const int64_t span = in + begin[d] + (auto_pad == "NOTSET" && !pads.empty() ? pads[d + nd] : 0) - eff;
      if (span < 0) return Unsupported(Fmt("a window larger than padded dim ", d + 2));
      out[d] = (v.Int("ceil_mode", 0) ? (span + s - 1) / s : span / s) + 1;
      if (v.Int("ceil_mode", 0) && (out[d] - 1) * s >= in + begin[d]) --out[d];  // a window must start inside
    } else {
      return Unsupported("auto_pad '" + auto_pad + "'");
    }
  }
  const int64_t taps = Shape(kernel).Size();
  std::vector<int64_t> dims = {x[0], x[1]};
  dims.insert(dims.end(), out.begin(), out.end());
  dims.push_back(taps);
  if (Shape(dims).Size() > kMaxFolded) return Unsupported(Fmt("windows of shape ", Shape(dims), " are too large"));
  const std::vector<int64_t> sx = Strides(x.dims()), sk = Strides(kernel);
  Tensor count = Tensor::Empty(Shape(out), DType::kFloat32, {}, MemKind::kParam);
  std::fill(count.f(), count.f() + count.size(), 0.f);
  const std::vector<int64_t> so = Strides(out);
  const std::vector<int64_t> pos = MapPositions(dims, [&](const std::vector<int64_t>& c) {
    int64_t at = c[0] * sx[0] + c[1] * sx[1], o = 0;
    for (int d = 0; d < nd; ++d) {
      const int64_t i = c[d + 2] * stride[d] - begin[d] + c[nd + 2] / sk[d] % kernel[d] * dilate[d];
      if (i < 0 || i >= x[d + 2]) return x.Size();  // the stacked pad value
      at += i * sx[d + 2];
      o += c[d + 2] * so[d];
    }
    if (c[0] == 0 && c[1] == 0) count.f()[o] += 1;
    return at;
  });
  Tensor fill = Tensor::Empty(Shape{1}, DType::kFloat32, {}, MemKind::kParam);
  fill.f()[0] = avg ? 0.f : -std::numeric_limits<float>::infinity();
  Lowering l;
  l.constants.push_back({0, "pad_value", fill, false});
  Operand rx = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(0)});
  Operand both = Add(&l, "concat", {{"dim", "0"}, {"num_args", "2"}}, {rx, Const(0)});
  if (std::string why = Take(&l, both, x.Size() + 1, pos, dims, 0); !why.empty()) return Unsupported(why);
  Operand windows = Prev(static_cast<int>(l.nodes.size()) - 1);
  Operand y = Add(&l, avg ? "sum" : "max", {{"axis", IntStr(nd + 2)}, {"keepdims", "false"}}, {windows});
  if (avg) {
    l.constants.push_back({0, "window_count", count, false});
    Add(&l, "div", {}, {y, Const(static_cast<int>(l.constants.size()) - 1)});
  }
  return l;
}

}  // namespace

// MaxPool / AveragePool(X); frugal's pooling floors the output size.
Lowering PoolRule(const NodeView& v, const std::string& pool_type) {
  const bool avg = pool_type == "avg";
  std::vector<std::string> known = {"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides"};
  for (const char* a :
       avg ? std::vector<const char*>{"count_include_pad"} : std::vector<const char*>{"dilations", "storage_order"})
    known.push_back(a);
  if (auto why = v.UnknownAttr(known); !why.empty()) return Unsupported(why);
  if (v.num_outputs() > 1) return Unsupported("the Indices output is not supported");
  std::vector<int64_t> kernel = v.Ints("kernel_shape");
  if (kernel.empty()) return Unsupported("kernel_shape is missing");
  const size_t nd = kernel.size();
  const std::vector<int64_t> dilate = IntsOr(v, "dilations", nd, 1);
  std::vector<int64_t> stride = IntsOr(v, "strides", nd, 1), pad;
  if (v.Int("ceil_mode", 0) != 0 || (nd != 2 && nd != 1) ||
      std::any_of(dilate.begin(), dilate.end(), [](int64_t d) { return d != 1; }) ||
      !SymmetricPads(v, v.InputShape(0), kernel, stride, dilate, &pad).empty())
    return PoolByCopies(v, avg, kernel, stride, dilate);
  Lowering l;
  Operand in = In(0);
  if (nd == 1) {  // (N, C, L) pooled as (N, C, L, 1)
    kernel.push_back(1), stride.push_back(1), pad.push_back(0);
    in = Add(&l, "reshape", {{"shape", "(0,0,-1,1)"}}, {in});
  }
  AttrMap a{
      {"pool_type", pool_type}, {"kernel", TupleStr(kernel)}, {"stride", TupleStr(stride)}, {"pad", TupleStr(pad)}};
  if (avg) a["count_include_pad"] = BoolStr(v.Int("count_include_pad", 0) != 0);  // ONNX's default is 0
  Operand y = Add(&l, "pooling", std::move(a), {in});
  if (nd == 1) Add(&l, "reshape", {{"shape", "(0,0,-1)"}}, {y});
  return l;
}

Lowering GlobalPoolRule(const NodeView& v, const std::string& pool_type) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  return One("pooling", {{"pool_type", pool_type}, {"global_pool", "true"}}, 1);
}

namespace {

// BatchNormalization's training mode (opset 14 on), as ONNX's reference:
// the batch's mean and population variance over every axis but 1 normalise
// X, and the running statistics are input * momentum + batch's * (1 - momentum).
Lowering BatchNormTraining(const NodeView& v) {
  const Shape& x = v.InputShape(0);
  if (!x.known() || x.ndim() < 2) return Unsupported(Fmt("needs an input (N, C, ...) of known shape, got ", x));
  std::vector<int64_t> axes = {0}, per_channel(x.ndim(), 1);
  for (int d = 2; d < x.ndim(); ++d) axes.push_back(d);
  per_channel[1] = x[1];
  const AttrMap over{{"axis", TupleStr(axes)}, {"keepdims", "true"}};
  const double momentum = v.Float("momentum", 0.9);
  Lowering l;
  Operand mean = Add(&l, "mean", over, {In(0)});
  Operand dev = Add(&l, "sub", {}, {In(0), mean});
  Operand var = Add(&l, "mean", over, {Add(&l, "square", {}, {dev})});
  Operand stddev = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("epsilon", 1e-5))}}, {var});
  stddev = Add(&l, "sqrt", {}, {stddev});
  Operand y = Add(&l, "mul", {}, {dev, Add(&l, "reshape", {{"shape", TupleStr(per_channel)}}, {In(1)})});
  y = Add(&l, "div", {}, {y, stddev});
  y = Add(&l, "add", {}, {y, Add(&l, "reshape", {{"shape", TupleStr(per_channel)}}, {In(2)})});
  l.outputs = {y};
  for (const auto& [batch, running] : {std::pair{mean, In(3)}, std::pair{var, In(4)}}) {
    Operand now = Add(&l, "reshape", {{"shape", "(-1)"}}, {batch});
    now = Add(&l, "mul_scalar", {{"scalar", FloatStr(1 - momentum)}}, {now});
    Operand old = Add(&l, "mul_scalar", {{"scalar", FloatStr(momentum)}}, {running});
    l.outputs.push_back(Add(&l, "add", {}, {old, now}));
  }
  l.outputs.resize(v.num_outputs());
  return l;
}

}  // namespace

// BatchNormalization(X, scale, B, mean, var), inference form.
Lowering BatchNormRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"epsilon", "momentum", "spatial", "training_mode", "is_test", "consumed_inputs"});
      !why.empty())
    return Unsupported(why);
  if (v.Int("spatial", 1) != 1) return Unsupported("spatial=0 (per-activation statistics) is not supported");
  if (v.num_inputs() != 5) return Unsupported(Fmt(v.num_inputs(), " inputs; expected 5"));
  if (v.Int("training_mode", 0) != 0 && v.opset() >= 14) return BatchNormTraining(v);
  if (v.num_outputs() > 1) return Unsupported("running statistics as outputs before opset 14 are not supported");
  return One("batch_norm",
             {{"eps", FloatStr(v.Float("epsilon", 1e-5))},
              {"momentum", FloatStr(v.Float("momentum", 0.9))},
              {"fix_gamma", "false"}},
             5);
}

// LayerNormalization(X, Scale[, B]) over the axes from axis on, its Mean
// and InvStdDev outputs layer_norm's hidden ones (the same shapes).
Lowering LayerNormRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis", "epsilon", "stash_type"}); !why.empty()) return Unsupported(why);
  if (v.Int("stash_type", 1) != 1) return Unsupported("stash_type other than 1 (float statistics) is not supported");
  const double eps = v.Float("epsilon", 1e-5);
  if (!(eps > 0)) return Unsupported(Fmt("epsilon ", eps, " (frugal's layer_norm needs a positive one)"));
  AttrMap attrs{{"axis", IntStr(v.Int("axis", -1))}, {"eps", FloatStr(eps)}};
  if (!v.HasInput(2)) attrs["no_bias"] = "true";
  Lowering l = One("layer_norm", attrs, v.HasInput(2) ? 3 : 2);
  l.hidden_outputs_too = true;
  return l;
}

// Attention (opset 23) over (batch, heads, T, D) q, k, v with as many heads
// each (no grouped queries, no cache): frugal's attention, is_causal its
// causal (both top-left aligned), scale its scale, a float attn_mask added
// to the scores as its mask input. src/interchange/onnx/fuse.cc makes these nodes of
// frugal's exported MatMul, Softmax, ... composition too.
Lowering AttentionRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"is_causal", "scale", "softcap", "qk_matmul_output_mode", "softmax_precision"});
      !why.empty())
    return Unsupported(why);
  if (v.Float("softcap", 0) != 0) return Unsupported("softcap is not supported");
  if (v.Int("qk_matmul_output_mode", 0) != 0) return Unsupported("qk_matmul_output_mode other than 0");
  if (v.num_inputs() > 4 || v.num_outputs() > 1) return Unsupported("a key/value cache (past_key, present_key)");
  const Shape &q = v.InputShape(0), &k = v.InputShape(1), &val = v.InputShape(2);
  if (!q.known() || !k.known() || !val.known() || q.ndim() != 4 || k.ndim() != 4 || val.ndim() != 4)
    return Unsupported(Fmt("needs 4-D (batch, heads, T, D) q, k and v, got ", q, ", ", k, " and ", val));
  if (k[1] != q[1]) return Unsupported(Fmt("grouped queries (", q[1], " query heads, ", k[1], " key heads)"));
  const double scale = v.Float("scale", 0);  // absent: 1/sqrt(D), frugal's 0
  if (v.Has("scale") && !(scale > 0))
    return Unsupported(Fmt("scale ", scale, " (frugal's attention takes a positive one)"));
  AttrMap attrs{{"causal", BoolStr(v.Int("is_causal", 0) != 0)}, {"scale", FloatStr(scale)}};
  if (v.HasInput(3)) attrs["masked"] = "true";
  return One("attention", attrs, v.HasInput(3) ? 4 : 3);
}

// -------------------------------------------------------- matrix products

// Gemm: Y = alpha * A' B' + beta * C, A' = transA ? A^T : A, B' likewise.
// fully_connected computes x W^T + b with W (N, K): B' = W^T, so transB=1
// passes B as W; transB=0 needs B^T (folded into an initializer, or a
// transpose node once frugal has one).
Lowering GemmRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"alpha", "beta", "transA", "transB", "broadcast"}); !why.empty())
    return Unsupported(why);
  const Shape& b = v.InputShape(1);
  if (!b.known() || b.ndim() != 2) return Unsupported("needs B's shape (2 known dims)");
  const bool trans_b = v.Int("transB", 0) != 0;
  const int64_t n = trans_b ? b[0] : b[1];
  Lowering l;
  Operand x = In(0), w = In(1);
  if (v.Int("transA", 0) != 0) {
    if (!v.OpAvailable("transpose")) return Unsupported("transA=1 needs frugal's transpose op");
    x = Add(&l, "transpose", {{"axes", "(1,0)"}}, {In(0)});
  }
  if (!trans_b) {
    if (IsFloatInitializer(v, 1)) {
      l.constants.push_back({1, "T", InitializerTensor(*v.InputValue(1), true)});
      w = Const(0);
    } else if (v.OpAvailable("transpose")) {
      w = Add(&l, "transpose", {{"axes", "(1,0)"}}, {In(1)});
    } else {
      return Unsupported("transB=0 with a B that is not an initializer needs frugal's transpose op");
    }
  }
  AttrMap fc{{"num_hidden", IntStr(n)}, {"flatten", "true"}};
  const double alpha = v.Float("alpha", 1), beta = v.HasInput(2) ? v.Float("beta", 1) : 1;
  if (alpha != 1 || beta != 1) {  // alpha (A' B') + beta C, each scaled on its own
    fc["no_bias"] = "true";
    Operand y = Add(&l, "fully_connected", fc, {x, w});
    if (alpha != 1) y = Add(&l, "mul_scalar", {{"scalar", FloatStr(alpha)}}, {y});
    if (!v.HasInput(2)) return l;
    Operand c = In(2);
    if (beta != 1) c = Add(&l, "mul_scalar", {{"scalar", FloatStr(beta)}}, {c});
    Add(&l, "add", {}, {y, c});
    return l;
  }
  if (!v.HasInput(2)) {
    fc["no_bias"] = "true";
    Add(&l, "fully_connected", fc, {x, w});
    return l;
  }
  const Shape& c = v.InputShape(2);
  if (!c.known()) return Unsupported("needs C's shape");
  if (c == Shape{n}) {
    Add(&l, "fully_connected", fc, {x, w, In(2)});
  } else if (c == Shape{1, n} && IsFloatInitializer(v, 2)) {
    Tensor bias = InitializerTensor(*v.InputValue(2), false).Reshaped(Shape{n});
    l.constants.push_back({2, "row", bias});
    Add(&l, "fully_connected", fc, {x, w, Const(static_cast<int>(l.constants.size()) - 1)});
  } else if (c == Shape{1, n}) {
    Operand bias = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(2)});
    Add(&l, "fully_connected", fc, {x, w, bias});
  } else if (v.OpAvailable("add")) {
    fc["no_bias"] = "true";
    Operand y = Add(&l, "fully_connected", fc, {x, w});
    Add(&l, "add", {}, {y, In(2)});
  } else {
    return Unsupported(Fmt("C of shape ", c, " (not (N,) or (1,N)) needs frugal's add op"));
  }
  return l;
}

// MatMul(A, B) with numpy semantics. A (..., M, K) times a constant B (K, N)
// is fully_connected (flatten=false) with W = B^T; the general case is
// frugal's matmul op.
Lowering MatMulRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const Shape &a = v.InputShape(0), &b = v.InputShape(1);
  const bool fc_shapes = a.known() && a.ndim() >= 2 && b.known() && b.ndim() == 2;
  AttrMap fc{{"num_hidden", IntStr(fc_shapes ? b[1] : 0)}, {"flatten", "false"}, {"no_bias", "true"}};
  Lowering l;
  if (fc_shapes && IsFloatInitializer(v, 1)) {
    l.constants.push_back({1, "T", InitializerTensor(*v.InputValue(1), true)});
    Add(&l, "fully_connected", fc, {In(0), Const(0)});
  } else if (v.OpAvailable("matmul") && a.known() && b.known() && a.ndim() == 2 && b.ndim() == 2) {
    return One("matmul", {}, 2);
  } else if (v.OpAvailable("batch_dot") && a.known() && b.known() && a.ndim() == 3 && b.ndim() == 3) {
    return One("batch_dot", {}, 2);
  } else if (v.OpAvailable("batch_dot") && a.known() && b.known() && a.ndim() > 3 && a.ndim() == b.ndim() &&
             a.Prod(0, a.ndim() - 2) == b.Prod(0, b.ndim() - 2) &&
             std::equal(a.dims().begin(), a.dims().end() - 2, b.dims().begin())) {
    // Equal batch dims (no broadcasting): batch_dot over them flattened.
    const int r = a.ndim();
    Operand x = Add(&l, "reshape", {{"shape", TupleStr({-1, a[r - 2], a[r - 1]})}}, {In(0)});
    Operand y = Add(&l, "reshape", {{"shape", TupleStr({-1, b[r - 2], b[r - 1]})}}, {In(1)});
    std::vector<int64_t> dims(a.dims().begin(), a.dims().end() - 1);
    dims.push_back(b[r - 1]);
    Add(&l, "reshape", {{"shape", TupleStr(dims)}}, {Add(&l, "batch_dot", {}, {x, y})});
  } else if (a.known() && b.known() && (a.ndim() > 3 || b.ndim() > 3 || a.ndim() != b.ndim())) {
    return Unsupported(Fmt("frugal's matmul takes 2-D operands and batch_dot 3-D ones; got ", a, " and ", b));
  } else if (fc_shapes && v.OpAvailable("transpose")) {
    Operand w = Add(&l, "transpose", {{"axes", "(1,0)"}}, {In(1)});
    Add(&l, "fully_connected", fc, {In(0), w});
  } else {
    return Unsupported("needs frugal's matmul op (B is not a 2-D initializer)");
  }
  return l;
}

// Softmax / LogSoftmax. From opset 13 along one axis; before, over the
// input coerced to 2-D at `axis`: reshape to (d0..d_{a-1}, -1), along the
// last axis, and back.
Lowering SoftmaxRule(const NodeView& v, const std::string& frugal_op) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  int64_t axis = v.Int("axis", v.opset() >= 13 ? -1 : 1);
  if (x.known() && !NormAxis(axis, x.ndim(), &axis)) return Unsupported(Fmt("axis ", axis, " out of range"));
  if (v.opset() >= 13 || (x.known() && axis == x.ndim() - 1) || axis == -1)
    return One(frugal_op, {{"axis", IntStr(axis)}}, 1);
  if (!x.known()) return Unsupported("an opset < 13 softmax over several axes needs the input's shape");
  std::vector<int64_t> flat(axis, 0), back(axis, 0);
  flat.push_back(-1);
  for (int d = static_cast<int>(axis); d < x.ndim(); ++d) back.push_back(x[d]);
  Lowering l;
  Operand y = Add(&l, "reshape", {{"shape", TupleStr(flat)}}, {In(0)});
  y = Add(&l, frugal_op, {{"axis", "-1"}}, {y});
  Add(&l, "reshape", {{"shape", TupleStr(back)}}, {y});
  return l;
}

// Dropout: the ratio is an attribute before opset 12, an input after.
Lowering DropoutRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"ratio", "is_test", "seed", "consumed_inputs"}); !why.empty()) return Unsupported(why);
  if (v.num_outputs() > 1) return Unsupported("the mask output is not supported");
  double p = v.Float("ratio", 0.5);
  if (v.HasInput(1)) {
    const OnnxTensor* t = v.InputValue(1);
    if (!t || t->kind != OnnxTensor::Kind::kFloat || t->f.size() != 1) return Unsupported(NotKnown(v, 1, "ratio"));
    p = t->f[0];
  }
  if (v.HasInput(2)) {
    const auto* t = KnownInts(v, 2);
    if (!t || t->size() != 1) return Unsupported(NotKnown(v, 2, "training_mode"));
    if ((*t)[0] != 0 && p == 0) {  // nothing dropped: the input itself
      Lowering l;
      l.alias = In(0);
      return l;
    }
    if ((*t)[0] != 0) return Unsupported("training_mode=true: ONNX's random mask cannot be reproduced");
  }
  return One("dropout", {{"p", FloatStr(p)}}, 1);
}

// ------------------------------------------------------- activations

namespace {
// The ONNX attribute `name` (default dflt), which must be >= 0 for
// frugal's leaky_relu; "" or why not.
std::string NonNegative(const NodeView& v, const std::string& name, double dflt, double* out) {
  *out = v.Float(name, dflt);
  return *out >= 0 ? "" : Fmt(name, " ", *out, " < 0 (frugal's elu needs a slope >= 0)");
}
}  // namespace

// Elu(alpha), Selu(alpha, gamma) = gamma elu(x, alpha), Celu(alpha) =
// alpha elu(x / alpha, 1): frugal's leaky_relu of act_type elu, scaled.
Lowering EluRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"alpha", "gamma"}); !why.empty()) return Unsupported(why);
  const std::string& op = v.op_type();
  if (v.Has("gamma") && op != "Selu") return Unsupported("attribute 'gamma' is not supported");
  double alpha;
  if (auto why = NonNegative(v, "alpha", op == "Selu" ? 1.67326319217681884765625 : 1.0, &alpha); !why.empty())
    return Unsupported(why);
  Lowering l;
  Operand y = In(0);
  if (op == "Celu") {
    if (alpha == 0) return Unsupported("alpha 0");
    y = Add(&l, "div_scalar", {{"scalar", FloatStr(alpha)}}, {y});
  }
  y = Add(&l, "leaky_relu", {{"act_type", "elu"}, {"slope", FloatStr(op == "Celu" ? 1.0 : alpha)}}, {y});
  if (op == "Celu") Add(&l, "mul_scalar", {{"scalar", FloatStr(alpha)}}, {y});
  if (op == "Selu") Add(&l, "mul_scalar", {{"scalar", FloatStr(v.Float("gamma", 1.05070102214813232421875))}}, {y});
  return l;
}

// HardSigmoid(alpha, beta) = clip(alpha x + beta, 0, 1); HardSwish = x HardSigmoid(x; 1/6, 1/2).
Lowering HardSigmoidRule(const NodeView& v) {
  const bool swish = v.op_type() == "HardSwish";
  if (auto why = v.UnknownAttr(swish ? std::vector<std::string>{} : std::vector<std::string>{"alpha", "beta"});
      !why.empty())
    return Unsupported(why);
  Lowering l;
  Operand y = Add(&l, "mul_scalar", {{"scalar", FloatStr(swish ? 1.0 / 6 : v.Float("alpha", 0.2))}}, {In(0)});
  y = Add(&l, "add_scalar", {{"scalar", FloatStr(swish ? 0.5 : v.Float("beta", 0.5))}}, {y});
  y = Add(&l, "clip", {{"a_min", "0"}, {"a_max", "1"}}, {y});
  if (swish) Add(&l, "mul", {}, {In(0), y});
  return l;
}

// Softsign = x / (1 + |x|).
Lowering SoftsignRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  Lowering l;
  Operand d = Add(&l, "abs", {}, {In(0)});
  d = Add(&l, "add_scalar", {{"scalar", "1"}}, {d});
  Add(&l, "div", {}, {In(0), d});
  return l;
}

// PRelu(x, slope) = relu(x) - slope relu(-x), slope broadcast to x (numpy
// rules; before opset 7 a (C) slope is per channel, axis 1): one of the
// terms is 0, so each element is exactly x or slope x.
Lowering PReluRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"consumed_inputs"}); !why.empty()) return Unsupported(why);
  const Shape &x = v.InputShape(0), &s = v.InputShape(1);
  if (!x.known() || !s.known()) return Unsupported("needs the shapes of x and slope");
  Lowering l;
  Operand slope = In(1);
  if (v.opset() < 7 && s.ndim() == 1 && x.ndim() > 2 && s[0] == x[1] && s[0] != 1) {
    std::vector<int64_t> per_channel(x.ndim() - 1, 1);
    per_channel[0] = s[0];
    slope = Add(&l, "reshape", {{"shape", TupleStr(per_channel)}}, {In(1)});
  } else {
    bool fits = s.ndim() <= x.ndim();
    for (int d = 1; fits && d <= s.ndim(); ++d) fits = s[s.ndim() - d] == 1 || s[s.ndim() - d] == x[x.ndim() - d];
    if (!fits) return Unsupported(Fmt("slope ", s, " does not broadcast to x ", x));
  }
  Operand pos = Add(&l, "relu", {}, {In(0)});
  Operand neg = Add(&l, "negative", {}, {In(0)});
  neg = Add(&l, "relu", {}, {neg});
  neg = Add(&l, "mul", {}, {neg, slope});
  Add(&l, "sub", {}, {pos, neg});
  return l;
}

// ------------------------------------------------------- normalisations

// InstanceNormalization(x, scale, B) = layer_norm over the axes from 2 on
// (a gamma of ones, an aux constant), then scale and B per channel.
Lowering InstanceNormRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"epsilon"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known() || x.ndim() < 3) return Unsupported(Fmt("needs an input (N, C, ...) of known shape, got ", x));
  const double eps = v.Float("epsilon", 1e-5);
  if (!(eps > 0)) return Unsupported(Fmt("epsilon ", eps, " (frugal's layer_norm needs a positive one)"));
  Tensor ones = Tensor::Empty(Shape(std::vector<int64_t>(x.dims().begin() + 2, x.dims().end())), DType::kFloat32, {},
                              MemKind::kParam);
  std::fill(ones.f(), ones.f() + ones.size(), 1.f);
  Lowering l;
  l.constants.push_back({1, "ones", ones, false});
  std::vector<int64_t> per_channel(x.ndim(), 1);
  per_channel[1] = x[1];
  Operand y = Add(&l, "layer_norm", {{"axis", "2"}, {"eps", FloatStr(eps)}, {"no_bias", "true"}}, {In(0), Const(0)});
  Operand scale = Add(&l, "reshape", {{"shape", TupleStr(per_channel)}}, {In(1)});
  Operand bias = Add(&l, "reshape", {{"shape", TupleStr(per_channel)}}, {In(2)});
  y = Add(&l, "mul", {}, {y, scale});
  Add(&l, "add", {}, {y, bias});
  return l;
}

// LRN(size odd, alpha, beta, bias) = x / (bias + alpha/size * sum of x^2
// over `size` channels around)^beta: the channel sum an average pooling of
// (N, 1, C, rest) with count_include_pad.
Lowering LrnRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"alpha", "beta", "bias", "size"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  const int64_t size = v.Int("size", 0);
  if (size < 1 || size % 2 == 0) return Unsupported(Fmt("size ", size, " (frugal's symmetric pad needs an odd one)"));
  if (!x.known() || x.ndim() < 3) return Unsupported(Fmt("needs an input (N, C, ...) of known shape, got ", x));
  Tensor beta = Tensor::Empty(Shape{1}, DType::kFloat32, {}, MemKind::kParam);
  beta.f()[0] = static_cast<float>(v.Float("beta", 0.75));
  Lowering l;
  l.constants.push_back({0, "beta", beta, false});
  Operand sq = Add(&l, "square", {}, {In(0)});
  sq = Add(&l, "reshape", {{"shape", "(0,1,0,-1)"}}, {sq});
  Operand sum = Add(&l, "pooling",
                    {{"pool_type", "avg"},
                     {"kernel", TupleStr({size, 1})},
                     {"stride", "(1,1)"},
                     {"pad", TupleStr({size / 2, 0})},
                     {"count_include_pad", "true"}},
                    {sq});
  sum = Add(&l, "reshape", {{"shape", TupleStr(x.dims())}}, {sum});
  Operand d = Add(&l, "mul_scalar", {{"scalar", FloatStr(v.Float("alpha", 1e-4))}}, {sum});  // alpha/size * sum
  d = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("bias", 1))}}, {d});
  d = Add(&l, "power", {}, {d, Const(0)});
  Add(&l, "div", {}, {In(0), d});
  return l;
}

// MeanVarianceNormalization(axes, default (0, 2, 3)) as ONNX's function:
// (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
Lowering MvnRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axes"}); !why.empty()) return Unsupported(why);
  const std::vector<int64_t> axes = v.Has("axes") ? v.Ints("axes") : std::vector<int64_t>{0, 2, 3};
  const AttrMap over{{"axis", TupleStr(axes)}, {"keepdims", "true"}};
  Lowering l;
  Operand mean = Add(&l, "mean", over, {In(0)});
  Operand ex2 = Add(&l, "mean", over, {Add(&l, "square", {}, {In(0)})});
  Operand var = Add(&l, "sub", {}, {ex2, Add(&l, "square", {}, {mean})});
  Operand stddev = Add(&l, "add_scalar", {{"scalar", "1e-09"}}, {Add(&l, "sqrt", {}, {var})});
  Add(&l, "div", {}, {Add(&l, "sub", {}, {In(0), mean}), stddev});
  return l;
}
}  // namespace frugal::onnx_map
