// The rules of the ONNX op table that are more than one line: ops whose
// attributes need checking against what frugal can express (pads, ceil
// mode, legacy broadcasting), whose inputs are values known at import
// (Reshape's shape, Slice's starts), or that lower to several frugal nodes
// depending on which frugal ops exist (Gemm, MatMul, old-opset Softmax).
//
// Rule of thumb: when frugal cannot express a configuration exactly, the
// rule says so (unsupported); it never approximates.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "onnx.pb.h"
#include "onnx/op_table.h"

namespace frugal::onnx_map {
namespace {

// An attribute list of n values, or n copies of dflt when absent.
std::vector<int64_t> IntsOr(const NodeView& v, const std::string& name, size_t n, int64_t dflt) {
  std::vector<int64_t> x = v.Ints(name);
  return x.empty() ? std::vector<int64_t>(n, dflt) : x;
}

// axis in [-rank, rank) -> [0, rank); false when out of range.
bool NormAxis(int64_t axis, int rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

// Input i's value known at import, where it holds the input's declared
// type (a test file may store bfloat16 as UINT16), or nullptr.
const OnnxTensor* KnownTensor(const NodeView& v, int i) {
  const OnnxTensor* t = v.InputValue(i);
  return t && (v.InputType(i).empty() || v.InputType(i) == t->type_name) ? t : nullptr;
}

// Input i as known integers, or nullptr.
const OnnxTensor* KnownIntTensor(const NodeView& v, int i) {
  const OnnxTensor* t = KnownTensor(v, i);
  return t && t->kind == OnnxTensor::Kind::kInt ? t : nullptr;
}

// The integer values of input i, known at import; nullptr if not known.
const std::vector<int64_t>* KnownInts(const NodeView& v, int i) {
  const OnnxTensor* t = KnownIntTensor(v, i);
  return t ? &t->i : nullptr;
}

std::string NotKnown(const NodeView& v, int i, const char* what) {
  return Fmt("input ", i, " (", what, ") must be known at import (an initializer or a Constant)");
}

// A float32 initializer's value as a Tensor, transposed if 2-D and asked.
Tensor InitializerTensor(const OnnxTensor& t, bool transpose) {
  Tensor x = ToTensor(t, MemKind::kParam);
  if (!transpose) return x;
  const int64_t r = t.dims[0], c = t.dims[1];
  Tensor y = Tensor::Empty(Shape{c, r}, DType::kFloat32, {}, MemKind::kParam);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) y.f()[j * r + i] = x.f()[i * c + j];
  return y;
}

bool IsFloatInitializer(const NodeView& v, int i) {
  return v.IsInitializer(i) && v.InputValue(i) && v.InputValue(i)->kind == OnnxTensor::Kind::kFloat;
}

// Appends a node and returns the operand of its output 0.
Operand Add(Lowering* l, const std::string& op, AttrMap attrs, std::vector<Operand> in) {
  l->nodes.push_back({op, std::move(attrs), std::move(in)});
  return Prev(static_cast<int>(l->nodes.size()) - 1);
}

// ------------------------------------------------------ values known at import
//
// A node whose inputs are integers known at import (shapes, axes, indices)
// is folded: its output is computed here and is a value known at import
// too, so that Shape -> Gather -> Concat -> Reshape ends in a static
// reshape. Float tensors are made here only from such values (Range,
// ConstantOfShape, a Cast of integers); float data is left to frugal's ops.

// Elements a folded value may hold: shape arithmetic is small, and a bad
// shape must not allocate without bound.
constexpr int64_t kMaxFolded = int64_t{1} << 24;

Lowering Folded(OnnxTensor t) {
  Lowering l;
  l.value = std::move(t);
  return l;
}

OnnxTensor IntValue(std::vector<int64_t> dims, std::vector<int64_t> values, const std::string& type = "INT64") {
  OnnxTensor t;
  t.kind = OnnxTensor::Kind::kInt, t.type_name = type, t.dims = std::move(dims), t.i = std::move(values);
  return t;
}

// Row-major strides of dims, and the dims' element count.
std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * dims[d + 1];
  return s;
}

// For each element of a tensor of dims `out`, f(its coordinates): the
// position it copies.
std::vector<int64_t> MapPositions(const std::vector<int64_t>& out,
                                  const std::function<int64_t(const std::vector<int64_t>&)>& f) {
  const std::vector<int64_t> so = Strides(out);
  const int64_t n = Shape(out).Size();
  std::vector<int64_t> pos(n), c(out.size());
  for (int64_t k = 0; k < n; ++k) {
    for (size_t d = 0; d < out.size(); ++d) c[d] = k / so[d] % out[d];
    pos[k] = f(c);
  }
  return pos;
}

// The numpy broadcast of `shapes` into *out; "" or why not.
std::string BroadcastDims(const std::vector<Shape>& shapes, std::vector<int64_t>* out) {
  size_t r = 0;
  for (const Shape& s : shapes) r = std::max(r, static_cast<size_t>(s.ndim()));
  out->assign(r, 1);
  for (const Shape& s : shapes)
    for (int d = 1; d <= s.ndim(); ++d) {
      int64_t& o = (*out)[r - d];
      const int64_t x = s[s.ndim() - d];
      if (x != o && x != 1 && o != 1) return Fmt("shapes ", s, " and ", Shape(*out), " do not broadcast");
      if (x != 1) o = x;
    }
  return "";
}

// For each element of a tensor of dims `out`, the flat position of the
// element of a tensor of `dims` broadcast to it.
std::vector<int64_t> BroadcastPositions(const std::vector<int64_t>& dims, const std::vector<int64_t>& out) {
  std::vector<int64_t> d(out.size() - dims.size(), 1);
  d.insert(d.end(), dims.begin(), dims.end());
  const std::vector<int64_t> sd = Strides(d), so = Strides(out);
  const int64_t n = Shape(out).Size();
  std::vector<int64_t> pos(n, 0);
  for (int64_t k = 0; k < n; ++k)
    for (size_t a = 0; a < out.size(); ++a) pos[k] += d[a] == 1 ? 0 : k / so[a] % out[a] * sd[a];
  return pos;
}

// a op b on known integers with numpy broadcasting; "" or why not.
std::string BroadcastInts(const OnnxTensor& a, const OnnxTensor& b,
                          const std::function<bool(int64_t, int64_t, int64_t*)>& op, OnnxTensor* out) {
  std::vector<int64_t> dims;
  if (std::string why = BroadcastDims({a.shape(), b.shape()}, &dims); !why.empty()) return why;
  if (Shape(dims).Size() > kMaxFolded) return Fmt("a result of shape ", Shape(dims), " is too large to fold");
  const std::vector<int64_t> pa = BroadcastPositions(a.dims, dims), pb = BroadcastPositions(b.dims, dims);
  *out = IntValue(dims, {}, a.type_name);
  for (size_t k = 0; k < pa.size(); ++k) {
    int64_t y;
    if (!op(a.i[pa[k]], b.i[pb[k]], &y)) return Fmt("no exact integer result for ", a.i[pa[k]], " and ", b.i[pb[k]]);
    out->i.push_back(y);
  }
  return "";
}

// The elements of a float tensor `source` (of n elements) at `positions`
// known at import, as a tensor of `dims`: an embedding of one column whose
// rows are the flattened source and whose indices are the positions (a
// constant made from ONNX input `from_input`), reshaped. Exact for any
// values (a copy). "" or why not.
std::string Take(Lowering* l, Operand source, int64_t n, const std::vector<int64_t>& positions,
                 const std::vector<int64_t>& dims, int from_input) {
  if (n >= (int64_t{1} << 24)) return Fmt("gathering from ", n, " elements (float indices hold up to 2^24)");
  if (positions.empty()) return "an empty result (frugal has no empty tensors)";
  Tensor at = Tensor::Empty(Shape{static_cast<int64_t>(positions.size())}, DType::kFloat32, {}, MemKind::kParam);
  for (size_t k = 0; k < positions.size(); ++k) at.f()[k] = static_cast<float>(positions[k]);
  l->constants.push_back({from_input, "positions", at, false});
  Operand flat = Add(l, "reshape", {{"shape", "(-1,1)"}}, {source});
  Operand y = Add(l, "embedding", {{"input_dim", IntStr(n)}, {"output_dim", "1"}},
                  {Const(static_cast<int>(l->constants.size()) - 1), flat});
  Add(l, "reshape", {{"shape", TupleStr(dims)}}, {y});
  return "";
}

// The range of an ONNX integer element type; false for other types.
bool IntTypeRange(const std::string& type, int64_t* lo, int64_t* hi) {
  static const std::map<std::string, std::pair<int64_t, int64_t>> ranges = {
      {"BOOL", {0, 1}},          {"INT8", {INT8_MIN, INT8_MAX}},    {"UINT8", {0, UINT8_MAX}},
      {"INT16", {INT16_MIN, INT16_MAX}}, {"UINT16", {0, UINT16_MAX}}, {"INT32", {INT32_MIN, INT32_MAX}},
      {"UINT32", {0, UINT32_MAX}},       {"INT64", {INT64_MIN, INT64_MAX}}};
  auto it = ranges.find(type);
  if (it == ranges.end()) return false;
  *lo = it->second.first, *hi = it->second.second;
  return true;
}

}  // namespace

// ------------------------------------------------------ convolution, pooling

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

namespace {

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
  Operand y = Add(&l, "deconvolution",
                  {{"kernel", TupleStr(kernel)}, {"stride", TupleStr(stride)}, {"pad", TupleStr({0, 0})},
                   {"dilate", TupleStr(dilate)}, {"adj", TupleStr({0, 0})}, {"num_filter", IntStr(m)},
                   {"num_group", IntStr(group)}, {"no_bias", "true"}},
                  {in, weight});
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

}  // namespace

// Conv(X, W[, B]): W is (M, C/group, k1, k2, ...).
Lowering ConvRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}); !why.empty())
    return Unsupported(why);
  const Shape& w = v.InputShape(1);
  if (!w.known() || w.ndim() < 3) return Unsupported("needs the weight's shape (known dims)");
  const size_t nd = w.ndim() - 2;
  std::vector<int64_t> kernel = v.Ints("kernel_shape");
  if (kernel.empty()) kernel.assign(w.dims().begin() + 2, w.dims().end());
  if (kernel.size() != nd) return Unsupported(Fmt("kernel_shape ", TupleStr(kernel), " does not match weight ", w));
  if (nd != 2) return Unsupported(Fmt("frugal's convolution is 2-D (NCHW); this one is ", nd, "-D"));
  std::vector<int64_t> stride = IntsOr(v, "strides", nd, 1), dilate = IntsOr(v, "dilations", nd, 1), pad;
  if (auto why = SymmetricPads(v, v.InputShape(0), kernel, stride, dilate, &pad); !why.empty())
    return Unsupported(why);
  const bool bias = v.HasInput(2);
  return One("convolution",
             {{"kernel", TupleStr(kernel)}, {"stride", TupleStr(stride)}, {"pad", TupleStr(pad)},
              {"dilate", TupleStr(dilate)}, {"num_filter", IntStr(w[0])},
              {"num_group", IntStr(v.Int("group", 1))}, {"no_bias", BoolStr(!bias)}},
             bias ? 3 : 2);
}

// ConvTranspose(X, W[, B]): W is (C, M/group, k1, k2, ...).
Lowering ConvTransposeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape",
                                "pads", "strides"});
      !why.empty())
    return Unsupported(why);
  const std::string auto_pad = v.Str("auto_pad", "NOTSET");
  const Shape& w = v.InputShape(1);
  if (!w.known() || w.ndim() < 3) return Unsupported("needs the weight's shape (known dims)");
  const size_t nd = w.ndim() - 2;
  std::vector<int64_t> kernel = v.Ints("kernel_shape");
  if (kernel.empty()) kernel.assign(w.dims().begin() + 2, w.dims().end());
  if (kernel.size() != nd) return Unsupported(Fmt("kernel_shape ", TupleStr(kernel), " does not match weight ", w));
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
  return One("deconvolution",
             {{"kernel", TupleStr(kernel)}, {"stride", TupleStr(stride)}, {"pad", TupleStr(pad)},
              {"dilate", TupleStr(dilate)}, {"adj", TupleStr(IntsOr(v, "output_padding", nd, 0))},
              {"num_filter", IntStr(w[1] * group)}, {"num_group", IntStr(group)}, {"no_bias", BoolStr(!bias)}},
             bias ? 3 : 2);
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
  for (const char* a : avg ? std::vector<const char*>{"count_include_pad"}
                           : std::vector<const char*>{"dilations", "storage_order"})
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
  AttrMap a{{"pool_type", pool_type}, {"kernel", TupleStr(kernel)}, {"stride", TupleStr(stride)},
            {"pad", TupleStr(pad)}};
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
             {{"eps", FloatStr(v.Float("epsilon", 1e-5))}, {"momentum", FloatStr(v.Float("momentum", 0.9))},
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

// ---------------------------------------------------------------- shapes

// Flatten(axis): (d0..d_{a-1}, d_a..) -> (prod(d[:a]), prod(d[a:])).
Lowering FlattenRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  int64_t axis = v.Int("axis", 1);
  if (axis == 1) return One("flatten", {}, 1);
  if (!x.known()) return Unsupported(Fmt("axis ", axis, " needs the input's shape"));
  if (axis < 0) axis += x.ndim();  // ONNX allows [-rank, rank]
  if (axis < 0 || axis > x.ndim()) return Unsupported(Fmt("axis ", v.Int("axis", 1), " out of range"));
  if (axis == 1) return One("flatten", {}, 1);
  if (axis == 0) return One("reshape", {{"shape", "(1,-1)"}}, 1);
  const int64_t tail = x.Prod(static_cast<int>(axis), x.ndim());
  if (tail == 0) return Unsupported("zero-size dims");
  return One("reshape", {{"shape", TupleStr({-1, tail})}}, 1);  // -1: the batch stays free
}

// Reshape(data, shape): 0 copies a dim, -1 is inferred, as in frugal.
Lowering ReshapeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"allowzero", "shape"}); !why.empty()) return Unsupported(why);
  std::vector<int64_t> shape;
  if (v.opset() < 5) {
    shape = v.Ints("shape");
  } else {
    const auto* s = KnownInts(v, 1);
    if (!s) return Unsupported(NotKnown(v, 1, "shape"));
    shape = *s;
  }
  if (v.Int("allowzero", 0) != 0 && std::count(shape.begin(), shape.end(), 0))
    return Unsupported("allowzero=1 with a 0 in the shape (an empty dim)");
  return One("reshape", {{"shape", TupleStr(shape)}}, 1);
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

// --------------------------------------------------------------- elementwise

// Sum(x0, x1, ...): add_n when the shapes agree, else broadcasting adds.
Lowering SumRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"consumed_inputs"}); !why.empty()) return Unsupported(why);
  const int n = v.num_inputs();
  if (n == 1) {
    Lowering l;
    l.alias = In(0);
    return l;
  }
  bool same = true;
  for (int i = 1; i < n; ++i)
    same = same && (!v.InputShape(i).known() || !v.InputShape(0).known() || v.InputShape(i) == v.InputShape(0));
  if (same) return One("add_n", {{"num_args", IntStr(n)}}, n);
  if (!v.OpAvailable("add")) return Unsupported("inputs of different shapes need frugal's broadcasting add op");
  Lowering l;
  Operand y = Add(&l, "add", {}, {In(0), In(1)});
  for (int i = 2; i < n; ++i) y = Add(&l, "add", {}, {y, In(i)});
  return l;
}

// Add / Sub / Mul / Div with numpy broadcasting. Add of two tensors of one
// known shape is add_n until frugal has add.
Lowering BroadcastRule(const NodeView& v, const std::string& frugal_op) {
  if (auto why = v.UnknownAttr({"broadcast", "axis", "consumed_inputs"}); !why.empty()) return Unsupported(why);
  if (v.Has("axis")) return Unsupported("legacy broadcasting along an axis is not supported");
  const OnnxTensor *a = KnownIntTensor(v, 0), *b = KnownIntTensor(v, 1);
  if (a && b) {  // shape arithmetic; Div only where exact
    const std::map<std::string, std::function<bool(int64_t, int64_t, int64_t*)>> ops = {
        {"add", [](int64_t x, int64_t y, int64_t* z) { return !__builtin_add_overflow(x, y, z); }},
        {"sub", [](int64_t x, int64_t y, int64_t* z) { return !__builtin_sub_overflow(x, y, z); }},
        {"mul", [](int64_t x, int64_t y, int64_t* z) { return !__builtin_mul_overflow(x, y, z); }},
        {"div", [](int64_t x, int64_t y, int64_t* z) { return y != 0 && x % y == 0 && (*z = x / y, true); }}};
    auto op = ops.find(frugal_op);
    if (op == ops.end()) return Unsupported(Fmt(v.op_type(), " of integers"));
    OnnxTensor y;
    if (std::string why = BroadcastInts(*a, *b, op->second, &y); !why.empty()) return Unsupported(why);
    return Folded(std::move(y));
  }
  const auto small = [](int64_t e) { return std::abs(e) < int64_t{1} << 24; };
  if (b && frugal_op == "power" && std::all_of(b->i.begin(), b->i.end(), small)) {
    // A float to integer powers known at import: the exponents as floats (exact below 2^24).
    Tensor e = Tensor::Empty(b->shape(), DType::kFloat32, {}, MemKind::kParam);
    for (size_t k = 0; k < b->i.size(); ++k) e.f()[k] = static_cast<float>(b->i[k]);
    Lowering l;
    l.constants.push_back({1, "float", e, false});
    Add(&l, "power", {}, {In(0), Const(0)});
    return l;
  }
  if (frugal_op == "add" && !v.OpAvailable("add") && v.InputShape(0).known() && v.InputShape(0) == v.InputShape(1))
    return One("add_n", {{"num_args", "2"}}, 2);
  return One(frugal_op, {}, 2);
}

// Max, Min (variadic, broadcasting): a chain of maximum / minimum nodes;
// one input is an alias of it.
Lowering VariadicRule(const NodeView& v, const std::string& frugal_op) {
  if (auto why = v.UnknownAttr({"consumed_inputs"}); !why.empty()) return Unsupported(why);
  if (v.num_inputs() == 1) return Alias(v);
  Lowering l;
  Operand acc = In(0);
  for (int i = 1; i < v.num_inputs(); ++i) acc = Add(&l, frugal_op, {}, {acc, In(i)});
  return l;
}

// Clip(x, min, max): bounds are attributes before opset 11, inputs after.
Lowering ClipRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"min", "max"}); !why.empty()) return Unsupported(why);
  double lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (v.opset() < 11) {
    lo = v.Float("min", lo);
    hi = v.Float("max", hi);
  } else {
    for (int i : {1, 2}) {
      if (!v.HasInput(i)) continue;
      const OnnxTensor* t = v.InputValue(i);
      if (!t) return Unsupported(NotKnown(v, i, i == 1 ? "min" : "max"));
      if (t->kind != OnnxTensor::Kind::kFloat || t->f.size() != 1)
        return Unsupported(Fmt("bound of type ", t->type_name, " with ", t->NumElements(), " values"));
      (i == 1 ? lo : hi) = t->f[0];
    }
  }
  return One("clip", {{"a_min", FloatStr(lo)}, {"a_max", FloatStr(hi)}}, 1);
}

// ------------------------------------------------------- tensor layout ops

Lowering ConcatRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  int64_t axis = v.Int("axis", 1);
  const Shape& x = v.InputShape(0);
  if (x.known() && !NormAxis(axis, x.ndim(), &axis)) return Unsupported(Fmt("axis ", axis, " out of range"));
  const int n = v.num_inputs();
  std::vector<const OnnxTensor*> known;
  for (int i = 0; i < n && KnownIntTensor(v, i); ++i) known.push_back(KnownIntTensor(v, i));
  if (static_cast<int>(known.size()) == n && n > 0) {  // shape arithmetic: join along axis
    const Shape& s0 = known[0]->shape();
    if (!NormAxis(v.Int("axis", 1), s0.ndim(), &axis))
      return Unsupported(Fmt("axis ", v.Int("axis", 1), " out of range"));
    const int a = static_cast<int>(axis);
    OnnxTensor y = IntValue(s0.dims(), {}, known[0]->type_name);
    y.dims[a] = 0;
    for (const OnnxTensor* t : known) {
      Shape s = t->shape();
      s[a] = s0[a];
      if (s != s0) return Unsupported(Fmt("inputs of shapes ", s0, " and ", t->shape(), " do not join along ", a));
      y.dims[a] += t->dims[a];
    }
    const int64_t outer = s0.Prod(0, a);
    for (int64_t o = 0; o < outer; ++o)
      for (const OnnxTensor* t : known) {
        const int64_t chunk = t->shape().Prod(a, s0.ndim());
        y.i.insert(y.i.end(), t->i.begin() + o * chunk, t->i.begin() + (o + 1) * chunk);
      }
    return Folded(std::move(y));
  }
  return One("concat", {{"dim", IntStr(axis)}, {"num_args", IntStr(n)}}, n);
}

// Split into equal parts only: frugal's split has no sizes.
Lowering SplitRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis", "split"}); !why.empty()) return Unsupported(why);
  int64_t axis = v.Int("axis", 0);
  const Shape& x = v.InputShape(0);
  if (x.known() && !NormAxis(axis, x.ndim(), &axis)) return Unsupported(Fmt("axis ", axis, " out of range"));
  const int n = v.num_outputs();
  std::vector<int64_t> split = v.Ints("split");
  if (v.opset() >= 13 && v.HasInput(1)) {
    const auto* s = KnownInts(v, 1);
    if (!s) return Unsupported(NotKnown(v, 1, "split"));
    split = *s;
  }
  if (!split.empty() && std::any_of(split.begin(), split.end(), [&](int64_t s) { return s != split[0]; })) {
    // Unequal parts: one slice each.
    if (!x.known()) return Unsupported("unequal parts need the input's shape");
    const int a = static_cast<int>(axis);
    if (static_cast<int>(split.size()) != n || std::accumulate(split.begin(), split.end(), int64_t{0}) != x[a] ||
        std::count(split.begin(), split.end(), 0))
      return Unsupported(Fmt("parts ", TupleStr(split), " do not cut dim ", x[a], " into ", n, " non-empty ones"));
    Lowering l;
    std::vector<int64_t> begin(x.ndim(), 0), end(x.dims()), step(x.ndim(), 1);
    for (int k = 0; k < n; ++k) {
      end[a] = begin[a] + split[k];
      l.outputs.push_back(
          Add(&l, "slice", {{"begin", TupleStr(begin)}, {"end", TupleStr(end)}, {"step", TupleStr(step)}}, {In(0)}));
      begin[a] = end[a];
    }
    return l;
  }
  if (x.known() && x[static_cast<int>(axis)] % n != 0)
    return Unsupported(Fmt("dim ", x[static_cast<int>(axis)], " does not split into ", n, " equal parts"));
  return One("split", {{"num_outputs", IntStr(n)}, {"axis", IntStr(axis)}}, 1);
}

// Slice: ONNX's starts/ends/axes/steps, clamped as ONNX does, written as
// frugal's begin/end/step over every dim (needs the input's shape).
Lowering SliceRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"starts", "ends", "axes"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  std::vector<int64_t> starts, ends, axes, steps;
  if (v.opset() < 10) {
    starts = v.Ints("starts"), ends = v.Ints("ends"), axes = v.Ints("axes");
  } else {
    const char* what[] = {"", "starts", "ends", "axes", "steps"};
    std::vector<int64_t>* dst[] = {nullptr, &starts, &ends, &axes, &steps};
    for (int i = 1; i <= 4; ++i) {
      if (!v.HasInput(i)) continue;
      const auto* s = KnownInts(v, i);
      if (!s) return Unsupported(NotKnown(v, i, what[i]));
      *dst[i] = *s;
    }
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return Unsupported("starts, ends, axes and steps differ in length");
  std::vector<int64_t> begin(x.ndim(), 0), end(x.dims()), step(x.ndim(), 1);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a;
    if (!NormAxis(axes[k], x.ndim(), &a)) return Unsupported(Fmt("axis ", axes[k], " out of range"));
    const int64_t d = x[static_cast<int>(a)], s = steps[k];
    if (s == 0) return Unsupported("step 0");
    auto clamp = [](int64_t i, int64_t d, int64_t lo, int64_t hi) {
      if (i < 0) i = i < -d ? lo : i + d;  // also avoids overflow at INT64_MIN
      return std::clamp(i, lo, hi);
    };
    begin[a] = s > 0 ? clamp(starts[k], d, 0, d) : clamp(starts[k], d, 0, d - 1);
    end[a] = s > 0 ? clamp(ends[k], d, 0, d) : clamp(ends[k], d, -1, d - 1);
    step[a] = s;
    if (KnownIntTensor(v, 0)) continue;  // folded below: an empty or open-ended slice is fine
    if (end[a] < 0) return Unsupported("a negative step running to the start needs an open end, which frugal lacks");
    if ((end[a] - begin[a]) * s <= 0) return Unsupported(Fmt("the slice of axis ", a, " is empty (frugal has no empty tensors)"));
  }
  if (const OnnxTensor* t = KnownIntTensor(v, 0)) {  // shape arithmetic
    std::vector<int64_t> dims(x.ndim());
    for (int d = 0; d < x.ndim(); ++d)
      dims[d] = std::max<int64_t>(0, (end[d] - begin[d] + step[d] + (step[d] > 0 ? -1 : 1)) / step[d]);
    OnnxTensor y = IntValue(dims, {}, t->type_name);
    const std::vector<int64_t> sx = Strides(x.dims()), sy = Strides(dims);
    const int64_t n = Shape(dims).Size();
    for (int64_t k = 0; k < n; ++k) {
      int64_t at = 0;
      for (int d = 0; d < x.ndim(); ++d) at += (begin[d] + k / sy[d] % dims[d] * step[d]) * sx[d];
      y.i.push_back(t->i[at]);
    }
    return Folded(std::move(y));
  }
  return One("slice", {{"begin", TupleStr(begin)}, {"end", TupleStr(end)}, {"step", TupleStr(step)}}, 1);
}

// Unsqueeze(axes): one expand_dims per new axis, in ascending order of the
// axis in the output.
Lowering UnsqueezeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axes"}); !why.empty()) return Unsupported(why);
  std::vector<int64_t> axes = v.Ints("axes");
  if (v.opset() >= 13) {
    const auto* s = KnownInts(v, 1);
    if (!s) return Unsupported(NotKnown(v, 1, "axes"));
    axes = *s;
  }
  if (axes.empty()) return Unsupported("no axes");
  const Shape& x = v.InputShape(0);
  if (std::any_of(axes.begin(), axes.end(), [](int64_t a) { return a < 0; }) && !x.known())
    return Unsupported("negative axes need the input's rank");
  const int rank = (x.known() ? x.ndim() : 0) + static_cast<int>(axes.size());
  for (int64_t& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return Unsupported("repeated axes");
  if (const OnnxTensor* t = KnownIntTensor(v, 0)) {  // shape arithmetic
    OnnxTensor y = *t;
    for (int64_t a : axes) {
      if (a > static_cast<int64_t>(y.dims.size())) return Unsupported(Fmt("axis ", a, " out of range"));
      y.dims.insert(y.dims.begin() + a, 1);
    }
    return Folded(std::move(y));
  }
  Lowering l;
  Operand y = In(0);
  for (int64_t a : axes) y = Add(&l, "expand_dims", {{"axis", IntStr(a)}}, {y});
  return l;
}

// ReduceSum / ReduceMean / ReduceMax; no axes reduces every axis.
namespace {
// A reduction's axes: the attribute, or input 1 (known at import) from
// opset 18; "" or why not.
std::string ReduceAxes(const NodeView& v, std::vector<int64_t>* axes) {
  if (auto why = v.UnknownAttr({"axes", "keepdims", "noop_with_empty_axes"}); !why.empty()) return why;
  *axes = v.Ints("axes");
  if (v.HasInput(1)) {
    const auto* s = KnownInts(v, 1);
    if (!s) return NotKnown(v, 1, "axes");
    *axes = *s;
  }
  return "";
}
}  // namespace

Lowering ReduceRule(const NodeView& v, const std::string& frugal_op) {
  std::vector<int64_t> axes;
  if (auto why = ReduceAxes(v, &axes); !why.empty()) return Unsupported(why);
  if (axes.empty() && v.Int("noop_with_empty_axes", 0) != 0) {
    Lowering l;
    l.alias = In(0);
    return l;
  }
  AttrMap a{{"keepdims", BoolStr(v.Int("keepdims", 1) != 0)}};  // ONNX keeps dims by default
  if (!axes.empty()) a["axis"] = TupleStr(axes);
  Lowering l = One(frugal_op, a, 1);
  const Shape& x = v.InputShape(0);
  std::vector<bool> reduced(x.known() ? x.ndim() : 0, axes.empty());
  for (int64_t ax : axes)
    if (NormAxis(ax, x.ndim(), &ax)) reduced[ax] = true;
  const bool every = x.known() && std::count(reduced.begin(), reduced.end(), true) == x.ndim();
  if (!v.Int("keepdims", 1) && (axes.empty() || every))  // frugal's full reduction is (1); ONNX's a scalar
    Add(&l, "reshape", {{"shape", "()"}}, {Prev(0)});
  return l;
}

// ReduceL1 / ReduceL2 / ReduceSumSquare / ReduceLogSum / ReduceLogSumExp:
// `pre` elementwise (abs, square, exp; "" none), then frugal's sum, then
// `post` (sqrt, log; "" none).
Lowering ComposedReduceRule(const NodeView& v, const std::string& pre, const std::string& post) {
  Lowering r = ReduceRule(v, "sum");
  if (!r.unsupported.empty()) return r;
  if (r.alias) return Unsupported("noop_with_empty_axes=1 with no axes (the input itself) is not supported");
  Lowering l;
  Operand y = In(0);
  if (!pre.empty()) y = Add(&l, pre, {}, {y});
  y = Add(&l, "sum", r.nodes[0].attrs, {y});
  if (!post.empty()) y = Add(&l, post, {}, {y});
  if (r.nodes.size() > 1) Add(&l, r.nodes[1].op, r.nodes[1].attrs, {y});  // to a scalar
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

// ------------------------------------------------------ values known at import

namespace {

// Cast's value for a known input, converted to ONNX type `to` as numpy's
// astype does (floats truncate toward zero); "" or why not.
std::string CastValue(const OnnxTensor& x, const std::string& to, OnnxTensor* y) {
  y->dims = x.dims, y->type_name = to;
  if (to == "FLOAT") {
    y->kind = OnnxTensor::Kind::kFloat;
    y->f = x.f;
    for (int64_t i : x.i) y->f.push_back(static_cast<float>(i));
    return "";
  }
  int64_t lo, hi;
  if (!IntTypeRange(to, &lo, &hi)) return Fmt("a cast to ", to, " (frugal holds float32 and integers)");
  y->kind = OnnxTensor::Kind::kInt;
  for (int64_t i : x.i) {
    if (to != "BOOL" && (i < lo || i > hi)) return Fmt("value ", i, " is out of the range of ", to);
    y->i.push_back(to == "BOOL" ? i != 0 : i);
  }
  for (float f : x.f) {
    const double t = std::trunc(static_cast<double>(f));
    if (to != "BOOL" && !(t >= static_cast<double>(lo) && t < static_cast<double>(hi) + 1.0))
      return Fmt("value ", f, " is out of the range of ", to);
    y->i.push_back(to == "BOOL" ? f != 0 : static_cast<int64_t>(t));
  }
  return "";
}

// Cast / CastLike to ONNX type `to`: folded when the input is known at
// import (a float to float stays the value it is); a float tensor cast to
// float is itself.
Lowering CastTo(const NodeView& v, const std::string& to) {
  const OnnxTensor* x = KnownTensor(v, 0);
  if (x && x->kind != OnnxTensor::Kind::kOther && (x->kind == OnnxTensor::Kind::kInt || to != "FLOAT")) {
    OnnxTensor y;
    if (std::string why = CastValue(*x, to, &y); !why.empty()) return Unsupported(why);
    return Folded(std::move(y));
  }
  if (to != "FLOAT")
    return Unsupported(Fmt("a cast to ", to, " of a tensor not known at import (frugal computes in float32 only)"));
  Lowering l;  // a tensor of another type is refused as an input, with its type named
  l.alias = In(0);
  return l;
}

}  // namespace

Lowering CastRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"to", "saturate"}); !why.empty()) return Unsupported(why);
  const int64_t to = v.Int("to", 0);
  if (!onnx::TensorProto::DataType_IsValid(static_cast<int>(to)))
    return Unsupported(Fmt("to ", to, " is no ONNX type"));
  return CastTo(v, onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(to)));
}

Lowering CastLikeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"saturate"}); !why.empty()) return Unsupported(why);
  if (v.InputType(1).empty()) return Unsupported("input 1 (target_type) is not a tensor");
  return CastTo(v, v.InputType(1));
}

// Shape(x)[start:end] and Size(x), from x's shape.
Lowering ShapeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"start", "end"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  const int64_t r = x.ndim();
  auto clamp = [r](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r); };
  const int64_t b = clamp(v.Int("start", 0)), e = std::max(b, clamp(v.Int("end", r)));
  return Folded(IntValue({e - b}, std::vector<int64_t>(x.dims().begin() + b, x.dims().begin() + e)));
}

Lowering SizeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  return Folded(IntValue({}, {x.Size()}));
}

// ConstantOfShape(shape): the one-element `value` (float 0 by default) repeated.
Lowering ConstantOfShapeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"value"}); !why.empty()) return Unsupported(why);
  const OnnxTensor* s = KnownIntTensor(v, 0);
  if (!s) return Unsupported(NotKnown(v, 0, "shape"));
  OnnxTensor y;
  if (v.Has("value")) {
    y = *v.TensorAttr("value");
  } else {
    y.kind = OnnxTensor::Kind::kFloat, y.type_name = "FLOAT", y.f = {0.f};
  }
  if (y.kind == OnnxTensor::Kind::kOther || y.NumElements() != 1)
    return Unsupported(Fmt("value of type ", y.type_name, " with ", y.NumElements(), " elements (one number)"));
  int64_t n = 1;
  for (int64_t d : s->i) {
    if (d < 0) return Unsupported(Fmt("shape ", TupleStr(s->i), " has a negative dim"));
    if (d > 0 && n > kMaxFolded / d) return Unsupported(Fmt("shape ", TupleStr(s->i), " is too large to fold"));
    n *= d;
  }
  y.dims = s->i;
  if (y.kind == OnnxTensor::Kind::kFloat) y.f.assign(n, y.f[0]);
  else y.i.assign(n, y.i[0]);
  return Folded(std::move(y));
}

// Range(start, limit, delta) of known scalars: ceil((limit - start) / delta) values.
Lowering RangeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const char* what[] = {"start", "limit", "delta"};
  double x[3];
  for (int i = 0; i < 3; ++i) {
    const OnnxTensor* t = v.InputValue(i);
    if (!t || t->kind == OnnxTensor::Kind::kOther || t->NumElements() != 1 || t->kind != v.InputValue(0)->kind)
      return Unsupported(NotKnown(v, i, what[i]) + Fmt("; a scalar of start's type"));
    x[i] = t->kind == OnnxTensor::Kind::kFloat ? t->f[0] : static_cast<double>(t->i[0]);
  }
  if (x[2] == 0) return Unsupported("delta 0");
  const double count = std::max(0.0, std::ceil((x[1] - x[0]) / x[2]));
  if (!(count <= kMaxFolded)) return Unsupported(Fmt("a range of ", count, " values is too large to fold"));
  OnnxTensor y = *v.InputValue(0);
  const auto n = static_cast<int64_t>(count);
  y.dims = {n}, y.f.clear(), y.i.clear();
  for (int64_t k = 0; k < n; ++k) {
    if (y.kind == OnnxTensor::Kind::kFloat) y.f.push_back(static_cast<float>(x[0] + k * x[2]));
    else y.i.push_back(v.InputValue(0)->i[0] + k * v.InputValue(2)->i[0]);
  }
  return Folded(std::move(y));
}

// Squeeze(axes, default: every dim of size 1): a reshape to the known
// result shape, or folded for known integers.
Lowering SqueezeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axes"}); !why.empty()) return Unsupported(why);
  std::vector<int64_t> axes = v.Ints("axes");
  if (v.HasInput(1)) {
    const auto* s = KnownInts(v, 1);
    if (!s) return Unsupported(NotKnown(v, 1, "axes"));
    axes = *s;
  }
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  std::vector<bool> drop(x.ndim(), false);
  for (int d = 0; d < x.ndim(); ++d) drop[d] = axes.empty() && x[d] == 1;
  for (int64_t a : axes) {
    if (!NormAxis(a, x.ndim(), &a)) return Unsupported(Fmt("axis ", a, " out of range for ", x));
    if (x[static_cast<int>(a)] != 1) return Unsupported(Fmt("axis ", a, " of ", x, " is not of size 1"));
    drop[a] = true;
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < x.ndim(); ++d)
    if (!drop[d]) dims.push_back(x[d]);
  if (const OnnxTensor* t = KnownIntTensor(v, 0)) {
    OnnxTensor y = *t;
    y.dims = dims;
    return Folded(std::move(y));
  }
  if (dims.empty() || std::count(dims.begin(), dims.end(), 0))
    return Unsupported(Fmt("the result ", Shape(dims), " is a scalar or empty, which frugal's reshape cannot make"));
  return One("reshape", {{"shape", TupleStr(dims)}}, 1);
}

// Gather / GatherElements (data, indices known at import, axis): folded
// for known integers, else the data's elements taken at the positions the
// indices name (needs the data's shape).
Lowering GatherRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  const bool elements = v.op_type() == "GatherElements";
  const OnnxTensor *known = KnownIntTensor(v, 0), *idx = KnownIntTensor(v, 1);
  if (!idx) return Unsupported(NotKnown(v, 1, "indices"));
  const Shape x = known ? known->shape() : v.InputShape(0);
  if (!x.known()) return Unsupported("needs the data's shape");
  int64_t axis;
  if (!NormAxis(v.Int("axis", 0), x.ndim(), &axis))
    return Unsupported(Fmt("axis ", v.Int("axis", 0), " out of range for ", x));
  const int a = static_cast<int>(axis);
  const int64_t dim = x[a];
  if (elements && idx->dims.size() != x.dims().size())
    return Unsupported(Fmt("indices ", idx->shape(), " and data ", x, " differ in rank"));
  for (int d = 0; elements && d < x.ndim(); ++d)
    if (d != a && idx->dims[d] > x[d]) return Unsupported(Fmt("indices ", idx->shape(), " exceed data ", x));
  std::vector<int64_t> dims = idx->dims;
  if (!elements) {
    dims.insert(dims.begin(), x.dims().begin(), x.dims().begin() + a);
    dims.insert(dims.end(), x.dims().begin() + a + 1, x.dims().end());
  }
  const std::vector<int64_t> sx = Strides(x.dims()), sy = Strides(dims), si = Strides(idx->dims);
  const int64_t n = Shape(dims).Size(), r = static_cast<int64_t>(idx->dims.size());
  if (n > kMaxFolded) return Unsupported(Fmt("a result of shape ", Shape(dims), " is too large"));
  std::vector<int64_t> pos(n, 0);
  for (int64_t k = 0; k < n; ++k) {
    // Gather: y[o.., i.., j..] = x[o.., idx[i..], j..]; GatherElements: y[m] = x[m with m_a = idx[m]].
    int64_t at = 0;
    for (int64_t d = 0; d < r; ++d) at += k / sy[elements ? d : a + d] % dims[elements ? d : a + d] * si[d];
    int64_t i = idx->i[at];
    if (i < -dim || i >= dim) return Unsupported(Fmt("index ", i, " out of range for dim ", dim));
    if (i < 0) i += dim;
    for (int d = 0; d < x.ndim(); ++d) {
      const int yd = elements || d < a ? d : static_cast<int>(d + r - 1);
      pos[k] += (d == a ? i : k / sy[yd] % dims[yd]) * sx[d];
    }
  }
  if (known) {
    OnnxTensor y = IntValue(dims, {}, known->type_name);
    for (int64_t p : pos) y.i.push_back(known->i[p]);
    return Folded(std::move(y));
  }
  Lowering l;
  if (std::string why = Take(&l, In(0), x.Size(), pos, dims, 1); !why.empty()) return Unsupported(why);
  return l;
}

// Where(condition known at import, a, b): folded for known integers, else
// the elements of a and b (stacked) taken where the condition picks them.
Lowering WhereRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const OnnxTensor* c = KnownIntTensor(v, 0);
  if (!c) return Unsupported(NotKnown(v, 0, "condition"));
  const Shape &a = v.InputShape(1), &b = v.InputShape(2);
  if (!a.known() || !b.known()) return Unsupported("needs the shapes of both branches");
  std::vector<int64_t> dims;
  if (std::string why = BroadcastDims({c->shape(), a, b}, &dims); !why.empty()) return Unsupported(why);
  if (Shape(dims).Size() > kMaxFolded) return Unsupported(Fmt("a result of shape ", Shape(dims), " is too large"));
  const std::vector<int64_t> pc = BroadcastPositions(c->dims, dims), pa = BroadcastPositions(a.dims(), dims),
                             pb = BroadcastPositions(b.dims(), dims);
  const OnnxTensor *ka = KnownIntTensor(v, 1), *kb = KnownIntTensor(v, 2);
  if (ka && kb) {
    OnnxTensor y = IntValue(dims, {}, ka->type_name);
    for (size_t k = 0; k < pc.size(); ++k) y.i.push_back(c->i[pc[k]] ? ka->i[pa[k]] : kb->i[pb[k]]);
    return Folded(std::move(y));
  }
  std::vector<int64_t> pos(pc.size());
  for (size_t k = 0; k < pc.size(); ++k) pos[k] = c->i[pc[k]] ? pa[k] : a.Size() + pb[k];
  Lowering l;
  Operand ra = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(1)}), rb = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(2)});
  Operand both = Add(&l, "concat", {{"dim", "0"}, {"num_args", "2"}}, {ra, rb});
  if (std::string why = Take(&l, both, a.Size() + b.Size(), pos, dims, 0); !why.empty()) return Unsupported(why);
  return l;
}

// Equal, Less, Greater, LessOrEqual, GreaterOrEqual of known integers
// (BOOL), as a mask's arithmetic needs; frugal has no comparison op.
Lowering CompareRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const OnnxTensor *a = KnownIntTensor(v, 0), *b = KnownIntTensor(v, 1);
  if (!a || !b) return Unsupported("compares values not known at import as integers (frugal has no comparison op)");
  const std::string& op = v.op_type();
  OnnxTensor y;
  auto compare = [&op](int64_t x, int64_t z, int64_t* r) {
    *r = op == "Equal"         ? x == z
         : op == "Less"        ? x < z
         : op == "Greater"     ? x > z
         : op == "LessOrEqual" ? x <= z
                               : x >= z;
    return true;
  };
  std::string why = BroadcastInts(*a, *b, compare, &y);
  if (!why.empty()) return Unsupported(why);
  y.type_name = "BOOL";
  return Folded(std::move(y));
}

// Neg: folded for known integers (Axis1D -> NumReducedAxes), else negative.
Lowering NegRule(const NodeView& v) {
  const OnnxTensor* x = KnownIntTensor(v, 0);
  if (!x) return Simple("negative")(v);
  OnnxTensor y = *x;
  for (int64_t& i : y.i) {
    if (i == std::numeric_limits<int64_t>::min()) return Unsupported(Fmt("-(", i, ") overflows"));
    i = -i;
  }
  return Folded(std::move(y));
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

// Mean(x0, x1, ...) = Sum / n.
Lowering MeanRule(const NodeView& v) {
  Lowering l = SumRule(v);
  if (!l.unsupported.empty() || l.alias) return l;
  Add(&l, "div_scalar", {{"scalar", IntStr(v.num_inputs())}}, {Prev(static_cast<int>(l.nodes.size()) - 1)});
  return l;
}

// ------------------------------------------------------------------ losses

namespace {

// The loss of NegativeLogLikelihoodLoss on log-probabilities `logp` (the
// shape of ONNX input 0, (N, C, d1, ...)), ONNX input 1 the class indices
// (known at import: they become a one-hot mask, aux state) and input 2 the
// optional class weights: loss[n, d] = -logp[n, t, d] w[t], t = target[n, d],
// 0 where t is ignore_index; reduced by `reduction`. "" or why not.
std::string NllNodes(const NodeView& v, Lowering* l, Operand logp) {
  const Shape& x = v.InputShape(0);
  const OnnxTensor* t = KnownIntTensor(v, 1);
  if (!x.known() || x.ndim() < 2) return "needs the shape of input 0, (N, C, ...)";
  if (!t) return NotKnown(v, 1, "target");
  std::vector<int64_t> target_dims = x.dims();
  target_dims.erase(target_dims.begin() + 1);
  if (t->dims != target_dims) return Fmt("target of shape ", t->shape(), " does not match input ", x);
  const std::string reduction = v.Str("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return "reduction '" + reduction + "' is not supported";
  const bool ignore = v.Has("ignore_index");
  const int64_t ii = v.Int("ignore_index", 0), classes = x[1], inner = x.Prod(2, x.ndim());
  Tensor mask = Tensor::Empty(x, DType::kFloat32, {}, MemKind::kParam);
  std::fill(mask.f(), mask.f() + mask.size(), 0.f);
  int64_t counted = 0;
  for (int64_t n = 0; n < x[0]; ++n)
    for (int64_t d = 0; d < inner; ++d) {
      const int64_t c = t->i[n * inner + d];
      if (ignore && c == ii) continue;
      if (c < 0 || c >= classes) return Fmt("target ", c, " is not a class in [0, ", classes, ")");
      mask.f()[(n * classes + c) * inner + d] = 1;
      ++counted;
    }
  if (reduction == "mean" && !v.HasInput(2) && counted == 0) return "every target is ignored (a mean of nothing)";
  l->constants.push_back({1, "onehot", mask, false});
  Operand picked = Add(l, "mul", {}, {logp, Const(static_cast<int>(l->constants.size()) - 1)});
  Operand w;
  if (v.HasInput(2)) {
    if (v.InputShape(2) != Shape{classes}) return Fmt("weight of shape ", v.InputShape(2), ", not (", classes, ")");
    std::vector<int64_t> per_class(x.ndim(), 1);
    per_class[1] = classes;
    w = Add(l, "reshape", {{"shape", TupleStr(per_class)}}, {In(2)});
    picked = Add(l, "mul", {}, {picked, w});
  }
  Operand loss = Add(l, "sum", {{"axis", "(1)"}, {"keepdims", "false"}}, {picked});
  loss = Add(l, "negative", {}, {loss});
  if (reduction == "none") return "";
  loss = Add(l, "sum", {{"keepdims", "false"}}, {loss});  // frugal's full sum is (1); ONNX's is ()
  if (reduction == "mean" && !v.HasInput(2)) {
    loss = Add(l, "div_scalar", {{"scalar", IntStr(counted)}}, {loss});
  } else if (reduction == "mean") {
    Operand weights = Add(l, "mul", {}, {Const(static_cast<int>(l->constants.size()) - 1), w});
    weights = Add(l, "sum", {{"keepdims", "false"}}, {weights});
    loss = Add(l, "div", {}, {loss, weights});
  }
  Add(l, "reshape", {{"shape", "()"}}, {loss});
  return "";
}

}  // namespace

Lowering NllLossRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"ignore_index", "reduction"}); !why.empty()) return Unsupported(why);
  Lowering l;
  if (std::string why = NllNodes(v, &l, In(0)); !why.empty()) return Unsupported(why);
  return l;
}

// SoftmaxCrossEntropyLoss = NegativeLogLikelihoodLoss of log_softmax over
// axis 1, which is the optional second output.
Lowering SoftmaxCrossEntropyRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"ignore_index", "reduction"}); !why.empty()) return Unsupported(why);
  Lowering l;
  Operand logp = Add(&l, "log_softmax", {{"axis", "1"}}, {In(0)});
  if (std::string why = NllNodes(v, &l, logp); !why.empty()) return Unsupported(why);
  l.outputs = {Prev(static_cast<int>(l.nodes.size()) - 1), logp};
  l.outputs.resize(v.num_outputs());
  return l;
}

// ------------------------------------------- copies at positions known at import
//
// Ops that move elements without arithmetic, on shapes and indices known at
// import, copy each output element from a position computed here (Take).

namespace {

// Take from input 0 (of known shape x) as a lowering.
Lowering TakeInput(const Shape& x, const std::vector<int64_t>& positions, const std::vector<int64_t>& dims,
                   int from_input) {
  Lowering l;
  if (Shape(dims).Size() > kMaxFolded) return Unsupported(Fmt("a result of shape ", Shape(dims), " is too large"));
  if (std::string why = Take(&l, In(0), x.Size(), positions, dims, from_input); !why.empty()) return Unsupported(why);
  return l;
}

}  // namespace

// Expand(x, shape known): x broadcast with the shape.
Lowering ExpandRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  const auto* s = KnownInts(v, 1);
  if (!s) return Unsupported(NotKnown(v, 1, "shape"));
  if (!x.known()) return Unsupported("needs the input's shape");
  std::vector<int64_t> dims;
  if (std::string why = BroadcastDims({x, Shape(*s)}, &dims); !why.empty()) return Unsupported(why);
  return TakeInput(x, BroadcastPositions(x.dims(), dims), dims, 1);
}

// Tile(x, repeats known).
Lowering TileRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  const auto* r = KnownInts(v, 1);
  if (!r) return Unsupported(NotKnown(v, 1, "repeats"));
  if (!x.known() || static_cast<int>(r->size()) != x.ndim())
    return Unsupported(Fmt("repeats ", TupleStr(*r), " for input ", x, " (one per dim, shape known)"));
  std::vector<int64_t> dims(x.dims());
  for (int d = 0; d < x.ndim(); ++d) {
    if ((*r)[d] < 1) return Unsupported(Fmt("repeats ", TupleStr(*r), " (each at least 1)"));
    dims[d] *= (*r)[d];
  }
  const std::vector<int64_t> sx = Strides(x.dims());
  return TakeInput(x, MapPositions(dims, [&](const std::vector<int64_t>& c) {
    int64_t at = 0;
    for (int d = 0; d < x.ndim(); ++d) at += c[d] % x[d] * sx[d];
    return at;
  }), dims, 1);
}

// DepthToSpace(blocksize, mode DCR or CRD) and SpaceToDepth(blocksize) on NCHW.
Lowering DepthSpaceRule(const NodeView& v) {
  const bool to_space = v.op_type() == "DepthToSpace";
  if (auto why = v.UnknownAttr(to_space ? std::vector<std::string>{"blocksize", "mode"}
                                        : std::vector<std::string>{"blocksize"});
      !why.empty())
    return Unsupported(why);
  const Shape& x = v.InputShape(0);
  const int64_t b = v.Int("blocksize", 0);
  const std::string mode = v.Str("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return Unsupported("mode '" + mode + "'");
  if (!x.known() || x.ndim() != 4 || b < 1) return Unsupported(Fmt("needs a 4-D input of known shape, got ", x));
  if (to_space ? x[1] % (b * b) : x[2] % b + x[3] % b)
    return Unsupported(Fmt("blocksize ", b, " does not divide input ", x));
  const std::vector<int64_t> dims = to_space ? std::vector<int64_t>{x[0], x[1] / (b * b), x[2] * b, x[3] * b}
                                             : std::vector<int64_t>{x[0], x[1] * b * b, x[2] / b, x[3] / b};
  const std::vector<int64_t> sx = Strides(x.dims());
  return TakeInput(x, MapPositions(dims, [&](const std::vector<int64_t>& c) {
    if (!to_space) {  // y[n, (i b + j) C + ch, h, w] = x[n, ch, h b + i, w b + j]
      const int64_t ch = c[1] % x[1], ij = c[1] / x[1];
      return c[0] * sx[0] + ch * sx[1] + (c[2] * b + ij / b) * sx[2] + (c[3] * b + ij % b) * sx[3];
    }
    const int64_t i = c[2] % b, j = c[3] % b, cout = dims[1];
    const int64_t ch = mode == "DCR" ? (i * b + j) * cout + c[1] : c[1] * b * b + i * b + j;
    return c[0] * sx[0] + ch * sx[1] + c[2] / b * sx[2] + c[3] / b * sx[3];
  }), dims, 0);
}

// ReverseSequence(x, sequence_lens known, batch_axis, time_axis).
Lowering ReverseSequenceRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"batch_axis", "time_axis"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  const auto* lens = KnownInts(v, 1);
  if (!lens) return Unsupported(NotKnown(v, 1, "sequence_lens"));
  const int64_t ba = v.Int("batch_axis", 1), ta = v.Int("time_axis", 0);
  if (!x.known() || x.ndim() < 2 || ba < 0 || ta < 0 || ba > 1 || ta > 1 || ba == ta ||
      static_cast<int64_t>(lens->size()) != x[static_cast<int>(ba)])
    return Unsupported(Fmt("batch_axis ", ba, ", time_axis ", ta, " and ", lens->size(), " lengths for input ", x));
  for (int64_t n : *lens)
    if (n < 0 || n > x[static_cast<int>(ta)]) return Unsupported(Fmt("sequence length ", n, " out of range"));
  const std::vector<int64_t> sx = Strides(x.dims());
  return TakeInput(x, MapPositions(x.dims(), [&](const std::vector<int64_t>& c) {
    std::vector<int64_t> src = c;
    const int64_t n = (*lens)[c[ba]];
    if (c[ta] < n) src[ta] = n - 1 - c[ta];
    return std::inner_product(src.begin(), src.end(), sx.begin(), int64_t{0});
  }), x.dims(), 1);
}

// Compress(x, condition known, axis): the slices (or, with no axis, the
// elements of the flattened x) where the condition holds.
Lowering CompressRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  const OnnxTensor* cond = KnownIntTensor(v, 1);
  if (!cond) return Unsupported(NotKnown(v, 1, "condition"));
  if (!x.known()) return Unsupported("needs the input's shape");
  const bool flat = !v.Has("axis");
  int64_t axis = 0;
  if (!flat && !NormAxis(v.Int("axis", 0), x.ndim(), &axis)) return Unsupported("axis out of range");
  const int64_t len = flat ? x.Size() : x[static_cast<int>(axis)];
  std::vector<int64_t> kept;
  for (int64_t k = 0; k < static_cast<int64_t>(cond->i.size()) && k < len; ++k)
    if (cond->i[k]) kept.push_back(k);
  std::vector<int64_t> dims = flat ? std::vector<int64_t>{1} : x.dims();
  dims[flat ? 0 : axis] = static_cast<int64_t>(kept.size());
  const std::vector<int64_t> sx = Strides(x.dims());
  return TakeInput(x, MapPositions(dims, [&](const std::vector<int64_t>& c) {
    if (flat) return kept[c[0]];
    std::vector<int64_t> src = c;
    src[axis] = kept[c[axis]];
    return std::inner_product(src.begin(), src.end(), sx.begin(), int64_t{0});
  }), dims, 1);
}

// EyeLike(x, k, dtype float): ones on the k-th diagonal, a value known at
// import from x's shape.
Lowering EyeLikeRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"dtype", "k"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known() || x.ndim() != 2) return Unsupported(Fmt("needs a 2-D input of known shape, got ", x));
  if (v.Has("dtype") ? v.Int("dtype", 0) != onnx::TensorProto::FLOAT : v.InputType(0) != "FLOAT")
    return Unsupported("an output type other than FLOAT");
  if (x.Size() > kMaxFolded) return Unsupported(Fmt("a ", x, " identity is too large to fold"));
  OnnxTensor y;
  y.kind = OnnxTensor::Kind::kFloat, y.type_name = "FLOAT", y.dims = x.dims();
  y.f.assign(x.Size(), 0.f);
  for (int64_t i = 0; i < x[0]; ++i)
    if (i + v.Int("k", 0) >= 0 && i + v.Int("k", 0) < x[1]) y.f[i * x[1] + i + v.Int("k", 0)] = 1;
  return Folded(std::move(y));
}

// ScatterElements / Scatter / ScatterND (data, indices known, updates), no
// reduction: data's elements, those the indices name replaced by updates'
// (data and updates stacked, then copied from).
Lowering ScatterRule(const NodeView& v) {
  const bool nd = v.op_type() == "ScatterND";
  if (auto why = v.UnknownAttr({"axis", "reduction"}); !why.empty()) return Unsupported(why);
  if (v.Str("reduction", "none") != "none") return Unsupported("reduction '" + v.Str("reduction", "") + "'");
  const Shape &x = v.InputShape(0), &u = v.InputShape(2);
  const OnnxTensor* idx = KnownIntTensor(v, 1);
  if (!idx) return Unsupported(NotKnown(v, 1, "indices"));
  if (!x.known() || !u.known()) return Unsupported("needs the shapes of data and updates");
  const std::vector<int64_t> sx = Strides(x.dims());
  const int64_t n = x.Size();
  std::vector<int64_t> pos(n);
  std::iota(pos.begin(), pos.end(), 0);
  // Each update element's target position in data.
  std::vector<int64_t> target;
  if (nd) {
    const int64_t k = idx->dims.empty() ? 0 : idx->dims.back();
    if (idx->dims.empty() || k < 1 || k > x.ndim()) return Unsupported(Fmt("indices ", idx->shape(), " for data ", x));
    std::vector<int64_t> want(idx->dims.begin(), idx->dims.end() - 1);
    want.insert(want.end(), x.dims().begin() + k, x.dims().end());
    if (u.dims() != want) return Unsupported(Fmt("updates ", u, " should be ", Shape(want)));
    const int64_t inner = x.Prod(static_cast<int>(k), x.ndim());
    for (size_t q = 0; q * k < idx->i.size(); ++q) {
      int64_t at = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t i = idx->i[q * k + d];
        const int64_t dim = x[static_cast<int>(d)];
        if (i < -dim || i >= dim) return Unsupported(Fmt("index ", i, " out of range for dim ", dim));
        at += (i < 0 ? i + dim : i) * sx[d];
      }
      for (int64_t j = 0; j < inner; ++j) target.push_back(at + j);
    }
  } else {
    int64_t axis;
    if (!NormAxis(v.Int("axis", 0), x.ndim(), &axis)) return Unsupported("axis out of range");
    if (idx->dims != u.dims() || u.ndim() != x.ndim())
      return Unsupported(Fmt("indices ", idx->shape(), " and updates ", u, " for data ", x));
    const std::vector<int64_t> su = Strides(u.dims());
    target = MapPositions(u.dims(), [&](const std::vector<int64_t>& c) {
      int64_t at = 0;
      for (int d = 0; d < x.ndim(); ++d) {
        int64_t i = d == axis ? idx->i[std::inner_product(c.begin(), c.end(), su.begin(), int64_t{0})] : c[d];
        if (d == axis && i < 0) i += x[d];
        if (i < 0 || i >= x[d]) return int64_t{-1};
        at += i * sx[d];
      }
      return at;
    });
  }
  std::vector<bool> written(n, false);
  for (size_t k = 0; k < target.size(); ++k) {
    if (target[k] < 0) return Unsupported("an index out of range");
    if (written[target[k]]) return Unsupported("an element written twice (its value would depend on the order)");
    written[target[k]] = true;
    pos[target[k]] = n + static_cast<int64_t>(k);
  }
  Lowering l;
  Operand rx = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(0)}), ru = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(2)});
  Operand both = Add(&l, "concat", {{"dim", "0"}, {"num_args", "2"}}, {rx, ru});
  if (std::string why = Take(&l, both, n + u.Size(), pos, x.dims(), 1); !why.empty()) return Unsupported(why);
  return l;
}

// OneHot(indices known, depth known, values (off, on)): values[1] where the
// index names the class along `axis`, else values[0].
Lowering OneHotRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  const OnnxTensor *idx = KnownTensor(v, 0), *depth = KnownTensor(v, 1);
  if (!idx || idx->kind == OnnxTensor::Kind::kOther) return Unsupported(NotKnown(v, 0, "indices"));
  if (!depth || depth->kind == OnnxTensor::Kind::kOther || depth->NumElements() != 1)
    return Unsupported(NotKnown(v, 1, "depth") + ", one number");
  if (v.InputShape(2) != Shape{2}) return Unsupported("values must be (off, on)");
  const double dd = depth->kind == OnnxTensor::Kind::kFloat ? depth->f[0] : static_cast<double>(depth->i[0]);
  if (!(dd >= 1 && dd <= kMaxFolded) || dd != std::floor(dd)) return Unsupported(Fmt("depth ", dd));
  const auto classes = static_cast<int64_t>(dd);
  std::vector<int64_t> at;
  for (int64_t k = 0; k < idx->NumElements(); ++k) {
    const double i = idx->kind == OnnxTensor::Kind::kFloat ? idx->f[k] : static_cast<double>(idx->i[k]);
    if (i != std::floor(i)) return Unsupported(Fmt("index ", i, " is not a whole number"));
    at.push_back(static_cast<int64_t>(i < 0 ? i + classes : i));
  }
  const int r = static_cast<int>(idx->dims.size());
  int64_t axis;
  if (!NormAxis(v.Int("axis", -1), r + 1, &axis)) return Unsupported("axis out of range");
  std::vector<int64_t> dims = idx->dims;
  dims.insert(dims.begin() + axis, classes);
  if (Shape(dims).Size() > kMaxFolded) return Unsupported(Fmt("a result of shape ", Shape(dims), " is too large"));
  const std::vector<int64_t> si = Strides(idx->dims);
  const std::vector<int64_t> pos = MapPositions(dims, [&](const std::vector<int64_t>& c) {
    int64_t k = 0;
    for (int d = 0, j = 0; d <= r; ++d)
      if (d != axis) k += c[d] * si[j++];
    return int64_t{at[k] == c[axis]};
  });
  Lowering l;
  if (std::string why = Take(&l, In(2), 2, pos, dims, 0); !why.empty()) return Unsupported(why);
  return l;
}

// ------------------------------------------------------------------ resize

namespace {

// One input element an output element reads along an axis, and its weight.
struct Tap {
  int64_t at;
  double w;
};

// Resize's taps along one axis for output coordinate o, as ONNX's reference
// computes them: o mapped to x in the input, the neighbours counted from
// ceil(x) - 1 (the left one preferred at a whole x) and clamped to the edge,
// with nearest, linear or cubic weights. No taps: the extrapolation value
// (a tf_crop_and_resize coordinate outside the input). "" or why not.
std::string AxisTaps(const NodeView& v, int64_t in, double scale, double roi0, double roi1, int64_t o,
                     std::vector<Tap>* taps) {
  const bool upsample = v.op_type() == "Upsample";
  const std::string mode = v.Str("mode", "nearest");
  const std::string ctm = v.Str("coordinate_transformation_mode", upsample ? "asymmetric" : "half_pixel");
  const std::string nearest = v.Str("nearest_mode", upsample ? "floor" : "round_prefer_floor");
  const double width = scale * static_cast<double>(in), last = static_cast<double>(in - 1);
  double x;
  if (ctm == "half_pixel") {
    x = (o + 0.5) / scale - 0.5;
  } else if (ctm == "pytorch_half_pixel") {
    x = width == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
  } else if (ctm == "align_corners") {
    x = width == 1 ? 0 : o * last / (width - 1);
  } else if (ctm == "asymmetric") {
    x = o / scale;
  } else if (ctm == "tf_half_pixel_for_nn") {
    x = (o + 0.5) / scale;
  } else if (ctm == "tf_crop_and_resize") {
    x = (width == 1 ? (roi1 - roi0) * last / 2 : o * (roi1 - roi0) * last / (width - 1)) + roi0 * last;
    taps->clear();
    if (x < 0 || x > last) return "";
  } else {
    return "coordinate_transformation_mode '" + ctm + "'";
  }
  const double base = std::ceil(x) - 1, r = x - base;  // r in (0, 1]
  std::vector<double> w;
  if (mode == "nearest") {
    bool right = r == 1 || nearest == "ceil";
    if (nearest == "round_prefer_floor") right = right || r > 0.5;
    else if (nearest == "round_prefer_ceil") right = right || r >= 0.5;
    else if (nearest != "floor" && nearest != "ceil") return "nearest_mode '" + nearest + "'";
    w = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
  } else if (mode == "linear") {
    w = {1 - r, r};
  } else if (mode == "cubic") {
    const double a = v.Float("cubic_coeff_a", -0.75), s = r + 1, t = 1 - r, u = 2 - r;
    w = {((a * s - 5 * a) * s + 8 * a) * s - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
         ((a + 2) * t - (a + 3)) * t * t + 1, ((a * u - 5 * a) * u + 8 * a) * u - 4 * a};
  } else {
    return "mode '" + mode + "'";
  }
  const int64_t first = static_cast<int64_t>(base) - (w.size() == 4 ? 1 : 0);
  taps->clear();
  double kept = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    const int64_t at = first + static_cast<int64_t>(k);
    if (v.Int("exclude_outside", 0) && (at < 0 || at >= in)) continue;
    taps->push_back({std::clamp<int64_t>(at, 0, in - 1), w[k]});
    kept += w[k];
  }
  if (v.Int("exclude_outside", 0))
    for (Tap& t : *taps) t.w /= kept;
  return "";
}

}  // namespace

// Resize (opset 10 on) and Upsample with scales or sizes known at import:
// nearest copies elements (Take); linear and cubic are a fully_connected of
// the flattened input with the interpolation weights (and the extrapolation
// value as bias), an aux constant.
Lowering ResizeRule(const NodeView& v) {
  const bool upsample = v.op_type() == "Upsample";
  const std::vector<std::string> known =
      upsample ? std::vector<std::string>{"mode"}
               : std::vector<std::string>{"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                          "exclude_outside", "extrapolation_value"};
  if (auto why = v.UnknownAttr(known); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  const int rank = x.ndim();
  const int scales_at = upsample || v.opset() < 11 ? 1 : 2;
  std::vector<double> scales, roi;
  std::vector<int64_t> out(rank);
  const OnnxTensor* s = KnownTensor(v, scales_at);
  if (v.HasInput(3)) {  // sizes
    const auto* sizes = KnownInts(v, 3);
    if (!sizes || static_cast<int>(sizes->size()) != rank) return Unsupported(NotKnown(v, 3, "sizes") + ", one a dim");
    for (int d = 0; d < rank; ++d) {
      out[d] = (*sizes)[d];
      scales.push_back(static_cast<double>(out[d]) / x[d]);
    }
  } else if (s && s->kind == OnnxTensor::Kind::kFloat && static_cast<int>(s->f.size()) == rank) {
    for (int d = 0; d < rank; ++d) {
      scales.push_back(s->f[d]);
      out[d] = static_cast<int64_t>(s->f[d] * static_cast<double>(x[d]));
    }
  } else {
    return Unsupported(NotKnown(v, scales_at, "scales") + ", one float a dim");
  }
  if (v.Str("coordinate_transformation_mode", "") == "tf_crop_and_resize") {
    const OnnxTensor* r = KnownTensor(v, 1);
    if (!r || r->kind != OnnxTensor::Kind::kFloat || static_cast<int>(r->f.size()) != 2 * rank)
      return Unsupported(NotKnown(v, 1, "roi") + ", 2 floats a dim");
    roi.assign(r->f.begin(), r->f.end());
  }
  for (int d = 0; d < rank; ++d)
    if (out[d] < 1 || !(scales[d] > 0)) return Unsupported(Fmt("scale ", scales[d], " of dim ", d, " makes it empty"));
  // Taps of every output coordinate, axis by axis.
  std::vector<std::vector<std::vector<Tap>>> taps(rank);
  for (int d = 0; d < rank; ++d) {
    taps[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o) {
      const double r0 = roi.empty() ? 0 : roi[d], r1 = roi.empty() ? 1 : roi[rank + d];
      if (auto why = AxisTaps(v, x[d], scales[d], r0, r1, o, &taps[d][o]); !why.empty()) return Unsupported(why);
    }
  }
  const int64_t n_out = Shape(out).Size(), n_in = x.Size();
  const std::vector<int64_t> sx = Strides(x.dims());
  if (v.Str("mode", "nearest") == "nearest" && roi.empty()) {  // one tap of weight 1 per axis: a copy
    return TakeInput(x, MapPositions(out, [&](const std::vector<int64_t>& c) {
      int64_t at = 0;
      for (int d = 0; d < rank; ++d)
        for (const Tap& t : taps[d][c[d]]) at += t.w == 1 ? t.at * sx[d] : 0;
      return at;
    }), out, 0);
  }
  if (n_out > kMaxFolded / n_in) return Unsupported(Fmt("a ", n_out, " x ", n_in, " interpolation is too large"));
  Tensor m = Tensor::Empty(Shape{n_out, n_in}, DType::kFloat32, {}, MemKind::kParam);
  Tensor bias = Tensor::Empty(Shape{n_out}, DType::kFloat32, {}, MemKind::kParam);
  std::fill(m.f(), m.f() + m.size(), 0.f);
  std::fill(bias.f(), bias.f() + bias.size(), 0.f);
  bool extrapolated = false;
  const std::vector<int64_t> so = Strides(out);
  for (int64_t k = 0; k < n_out; ++k) {
    // The products of one tap per axis (at most 4^rank terms).
    std::vector<std::pair<int64_t, double>> terms = {{0, 1.0}};
    for (int d = 0; d < rank && !terms.empty(); ++d) {
      const std::vector<Tap>& t = taps[d][k / so[d] % out[d]];
      std::vector<std::pair<int64_t, double>> next;
      for (const auto& [at, w] : terms)
        for (const Tap& tap : t) next.push_back({at + tap.at * sx[d], w * tap.w});
      terms = std::move(next);
    }
    if (terms.empty()) {
      bias.f()[k] = static_cast<float>(v.Float("extrapolation_value", 0));
      extrapolated = true;
    }
    std::map<int64_t, double> row;  // one weight per input element, summed in double
    for (const auto& [at, w] : terms) row[at] += w;
    for (const auto& [at, w] : row) m.f()[k * n_in + at] = static_cast<float>(w);
  }
  Lowering l;
  l.constants.push_back({0, "interpolation", m, false});
  AttrMap fc{{"num_hidden", IntStr(n_out)}, {"flatten", "true"}, {"no_bias", BoolStr(!extrapolated)}};
  std::vector<Operand> in = {Add(&l, "reshape", {{"shape", "(1,-1)"}}, {In(0)}), Const(0)};
  if (extrapolated) {
    l.constants.push_back({0, "extrapolation", bias, false});
    in.push_back(Const(1));
  }
  Operand y = Add(&l, "fully_connected", fc, in);
  Add(&l, "reshape", {{"shape", TupleStr(out)}}, {y});
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
  Operand sum = Add(&l, "pooling", {{"pool_type", "avg"}, {"kernel", TupleStr({size, 1})}, {"stride", "(1,1)"},
                                    {"pad", TupleStr({size / 2, 0})}, {"count_include_pad", "true"}}, {sq});
  sum = Add(&l, "reshape", {{"shape", TupleStr(x.dims())}}, {sum});
  Operand d = Add(&l, "mul_scalar", {{"scalar", FloatStr(v.Float("alpha", 1e-4))}}, {sum});  // alpha/size * sum
  d = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("bias", 1))}}, {d});
  d = Add(&l, "power", {}, {d, Const(0)});
  Add(&l, "div", {}, {In(0), d});
  return l;
}

// Cosh = (e^x + e^-x) / 2 (no cancellation: exact to float rounding).
Lowering CoshRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  Lowering l;
  Operand a = Add(&l, "exp", {}, {In(0)});
  Operand b = Add(&l, "negative", {}, {In(0)});
  b = Add(&l, "exp", {}, {b});
  Operand y = Add(&l, "add", {}, {a, b});
  Add(&l, "mul_scalar", {{"scalar", "0.5"}}, {y});
  return l;
}

// GatherND(data, indices known, batch_dims 0): data's slices at the index tuples.
Lowering GatherNDRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"batch_dims"}); !why.empty()) return Unsupported(why);
  if (v.Int("batch_dims", 0) != 0) return Unsupported("batch_dims other than 0");
  const Shape& x = v.InputShape(0);
  const OnnxTensor* idx = KnownIntTensor(v, 1);
  if (!idx) return Unsupported(NotKnown(v, 1, "indices"));
  const int64_t k = idx->dims.empty() ? 0 : idx->dims.back();
  if (!x.known() || k < 1 || k > x.ndim()) return Unsupported(Fmt("indices ", idx->shape(), " for data ", x));
  std::vector<int64_t> dims(idx->dims.begin(), idx->dims.end() - 1);
  dims.insert(dims.end(), x.dims().begin() + k, x.dims().end());
  const std::vector<int64_t> sx = Strides(x.dims());
  const int64_t inner = x.Prod(static_cast<int>(k), x.ndim());
  std::vector<int64_t> pos;
  for (size_t q = 0; q * k < idx->i.size(); ++q) {
    int64_t at = 0;
    for (int64_t d = 0; d < k; ++d) {
      const int64_t i = idx->i[q * k + d], dim = x[static_cast<int>(d)];
      if (i < -dim || i >= dim) return Unsupported(Fmt("index ", i, " out of range for dim ", dim));
      at += (i < 0 ? i + dim : i) * sx[d];
    }
    for (int64_t j = 0; j < inner; ++j) pos.push_back(at + j);
  }
  return TakeInput(x, pos, dims, 1);
}

// Pad(x, pads known, constant_value, axes; mode constant, edge or reflect):
// x and the constant (given, or 0 as an aux constant) stacked, copied from.
Lowering PadRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"mode", "pads", "value"}); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  const int r = x.ndim();
  std::vector<int64_t> pads = v.Ints("pads");
  if (v.opset() >= 11) {
    const auto* p = KnownInts(v, 1);
    if (!p) return Unsupported(NotKnown(v, 1, "pads"));
    pads = *p;
  }
  std::vector<int64_t> axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  if (v.HasInput(3)) {
    const auto* a = KnownInts(v, 3);
    if (!a) return Unsupported(NotKnown(v, 3, "axes"));
    axes = *a;
  }
  if (pads.size() != 2 * axes.size()) return Unsupported(Fmt("pads ", TupleStr(pads), " for axes ", TupleStr(axes)));
  std::vector<int64_t> lo(r, 0), dims(x.dims());
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a;
    if (!NormAxis(axes[k], r, &a)) return Unsupported(Fmt("axis ", axes[k], " out of range"));
    lo[a] = pads[k];
    dims[a] += pads[k] + pads[k + axes.size()];
    if (dims[a] < 1) return Unsupported(Fmt("pads ", TupleStr(pads), " leave dim ", a, " empty"));
  }
  const std::string mode = v.Str("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") return Unsupported("mode '" + mode + "'");
  const std::vector<int64_t> sx = Strides(x.dims());
  bool bad = false;
  const std::vector<int64_t> pos = MapPositions(dims, [&](const std::vector<int64_t>& c) {
    int64_t at = 0;
    for (int d = 0; d < r; ++d) {
      int64_t i = c[d] - lo[d];
      if (i < 0 || i >= x[d]) {
        if (mode == "constant") return x.Size();  // the constant, stacked after x
        if (mode == "edge") i = std::clamp<int64_t>(i, 0, x[d] - 1);
        if (mode == "reflect") {
          const int64_t period = 2 * (x[d] - 1);
          if (period == 0 || i < -period / 2 || i >= x[d] + period / 2) bad = true;
          i = period == 0 ? 0 : (i % period + period) % period;
          if (i >= x[d]) i = period - i;
        }
      }
      at += i * sx[d];
    }
    return at;
  });
  if (bad) return Unsupported("reflect pads wider than the input");
  Lowering l;
  Operand value;
  if (v.HasInput(2)) {
    if (v.InputShape(2).known() && v.InputShape(2).Size() != 1)
      return Unsupported(Fmt("constant_value of shape ", v.InputShape(2), " (one value)"));
    value = In(2);
  } else {
    Tensor c = Tensor::Empty(Shape{1}, DType::kFloat32, {}, MemKind::kParam);
    c.f()[0] = static_cast<float>(v.Float("value", 0));
    l.constants.push_back({0, "pad_value", c, false});
    value = Const(0);
  }
  Operand rx = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(0)}), rv = Add(&l, "reshape", {{"shape", "(-1)"}}, {value});
  Operand both = Add(&l, "concat", {{"dim", "0"}, {"num_args", "2"}}, {rx, rv});
  if (std::string why = Take(&l, both, x.Size() + 1, pos, dims, 0); !why.empty()) return Unsupported(why);
  return l;
}

// ------------------------------------------------------------- recurrent

// RNN / GRU / LSTM, forward, default activations, no clip, unrolled over
// the known sequence length: X W^T + Wb + Rb for every step at once (a
// fully_connected), then per step H R^T and the gates (ONNX's order: LSTM
// i, o, f, c with peepholes P (i, o, f); GRU z, r, h with the reset applied
// before R, linear_before_reset=0). Outputs Y, Y_h (and Y_c).
Lowering RecurrentRule(const NodeView& v) {
  const std::string& op = v.op_type();
  if (auto why = v.UnknownAttr({"hidden_size", "layout", "direction", "linear_before_reset", "activations"});
      !why.empty())
    return Unsupported(why);
  if (v.Str("direction", "forward") != "forward") return Unsupported("direction '" + v.Str("direction", "") + "'");
  if (v.Has("activations")) return Unsupported("activations other than the defaults are not supported");
  if (v.Int("linear_before_reset", 0) != 0) return Unsupported("linear_before_reset=1 is not supported");
  const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  const bool batch_major = v.Int("layout", 0) != 0;
  const Shape &x = v.InputShape(0), &w = v.InputShape(1);
  const int64_t h = v.Int("hidden_size", 0);
  if (!x.known() || x.ndim() != 3 || !w.known() || w != Shape{1, gates * h, x[2]})
    return Unsupported(Fmt("X ", x, " and W ", w, " for hidden_size ", h, " (known shapes, one direction)"));
  const int64_t steps = batch_major ? x[1] : x[0], batch = batch_major ? x[0] : x[1], gh = gates * h;
  if (v.HasInput(4)) {
    const auto* lens = KnownInts(v, 4);
    if (!lens || std::any_of(lens->begin(), lens->end(), [&](int64_t n) { return n != steps; }))
      return Unsupported(NotKnown(v, 4, "sequence_lens") + ", each the full length");
  }
  if (v.HasInput(7) && op != "LSTM") return Unsupported("input 7");
  Lowering l;
  auto act = [&l](const char* type, Operand in) { return Add(&l, "activation", {{"act_type", type}}, {in}); };
  Operand seq = batch_major ? Add(&l, "transpose", {{"axes", "(1,0,2)"}}, {In(0)}) : In(0);  // (T, B, I)
  std::vector<Operand> xw_in = {seq, Add(&l, "reshape", {{"shape", TupleStr({gh, x[2]})}}, {In(1)})};
  if (v.HasInput(3)) {  // Wb + Rb
    Operand b = Add(&l, "reshape", {{"shape", TupleStr({2, gh})}}, {In(3)});
    xw_in.push_back(Add(&l, "sum", {{"axis", "(0)"}, {"keepdims", "false"}}, {b}));
  }
  AttrMap fc{{"num_hidden", IntStr(gh)}, {"flatten", "false"}, {"no_bias", BoolStr(!v.HasInput(3))}};
  const Operand xw = Add(&l, "fully_connected", fc, xw_in);  // (T, B, G H)
  const Operand r = Add(&l, "reshape", {{"shape", TupleStr({gh, h})}}, {In(2)});
  auto initial = [&](int i) {
    if (v.HasInput(i)) return Add(&l, "reshape", {{"shape", TupleStr({batch, h})}}, {In(i)});
    Tensor zeros = Tensor::Empty(Shape{batch, h}, DType::kFloat32, {}, MemKind::kParam);
    std::fill(zeros.f(), zeros.f() + zeros.size(), 0.f);
    l.constants.push_back({0, i == 5 ? "initial_h" : "initial_c", zeros, false});
    return Const(static_cast<int>(l.constants.size()) - 1);
  };
  Operand hid = initial(5), cell = op == "LSTM" ? initial(6) : Operand{};
  std::vector<Operand> peep;
  if (v.HasInput(7)) {
    Operand p = Add(&l, "reshape", {{"shape", TupleStr({3, h})}}, {In(7)});
    for (int k = 0; k < 3; ++k)
      peep.push_back(
          Add(&l, "slice", {{"begin", TupleStr({k, 0})}, {"end", TupleStr({k + 1, h})}, {"step", "(1,1)"}}, {p}));
  }
  auto columns = [&](Operand in, int64_t from, int64_t to) {
    return Add(&l, "slice", {{"begin", TupleStr({0, from})}, {"end", TupleStr({batch, to})}, {"step", "(1,1)"}}, {in});
  };
  auto product = [&](Operand in, Operand weight, int64_t n) {
    return Add(&l, "fully_connected", {{"num_hidden", IntStr(n)}, {"flatten", "false"}, {"no_bias", "true"}},
               {in, weight});
  };
  Operand r_zr = r, r_h = r;  // GRU: R's rows for z and r, and for h
  if (op == "GRU") {
    r_zr = Add(&l, "slice", {{"begin", "(0,0)"}, {"end", TupleStr({2 * h, h})}, {"step", "(1,1)"}}, {r});
    r_h = Add(&l, "slice", {{"begin", TupleStr({2 * h, 0})}, {"end", TupleStr({gh, h})}, {"step", "(1,1)"}}, {r});
  }
  std::vector<Operand> ys;
  for (int64_t t = 0; t < steps; ++t) {
    Operand xt = Add(&l, "slice", {{"begin", TupleStr({t, 0, 0})}, {"end", TupleStr({t + 1, batch, gh})},
                                   {"step", "(1,1,1)"}}, {xw});
    xt = Add(&l, "reshape", {{"shape", TupleStr({batch, gh})}}, {xt});
    if (op == "RNN") {
      hid = act("tanh", Add(&l, "add", {}, {xt, product(hid, r, h)}));
    } else if (op == "LSTM") {
      Operand g = Add(&l, "add", {}, {xt, product(hid, r, gh)});
      Operand gi = columns(g, 0, h), go = columns(g, h, 2 * h), gf = columns(g, 2 * h, 3 * h);
      if (!peep.empty()) {
        gi = Add(&l, "add", {}, {gi, Add(&l, "mul", {}, {peep[0], cell})});
        gf = Add(&l, "add", {}, {gf, Add(&l, "mul", {}, {peep[2], cell})});
      }
      Operand c_new = act("tanh", columns(g, 3 * h, 4 * h));
      cell = Add(&l, "add", {}, {Add(&l, "mul", {}, {act("sigmoid", gf), cell}),
                                 Add(&l, "mul", {}, {act("sigmoid", gi), c_new})});
      if (!peep.empty()) go = Add(&l, "add", {}, {go, Add(&l, "mul", {}, {peep[1], cell})});
      hid = Add(&l, "mul", {}, {act("sigmoid", go), act("tanh", cell)});
    } else {  // GRU
      Operand zr = act("sigmoid", Add(&l, "add", {}, {columns(xt, 0, 2 * h), product(hid, r_zr, 2 * h)}));
      Operand z = columns(zr, 0, h), reset = columns(zr, h, 2 * h);
      Operand cand = Add(&l, "add", {}, {columns(xt, 2 * h, gh), product(Add(&l, "mul", {}, {reset, hid}), r_h, h)});
      cand = act("tanh", cand);
      Operand keep = Add(&l, "mul", {}, {z, hid});  // (1 - z) cand + z H
      Operand take = Add(&l, "mul", {}, {Add(&l, "rsub_scalar", {{"scalar", "1"}}, {z}), cand});
      hid = Add(&l, "add", {}, {take, keep});
    }
    ys.push_back(Add(&l, "reshape", {{"shape", TupleStr({1, batch, h})}}, {hid}));
  }
  Operand y = ys.size() == 1 ? ys[0]
                             : Add(&l, "concat", {{"dim", "0"}, {"num_args", IntStr(steps)}}, ys);  // (T, B, H)
  if (batch_major) y = Add(&l, "transpose", {{"axes", "(1,0,2)"}}, {y});
  y = Add(&l, "reshape", {{"shape", batch_major ? TupleStr({batch, steps, 1, h}) : TupleStr({steps, 1, batch, h})}},
          {y});
  const std::string last = batch_major ? TupleStr({batch, 1, h}) : TupleStr({1, batch, h});
  l.outputs = {y, Add(&l, "reshape", {{"shape", last}}, {hid})};
  if (op == "LSTM") l.outputs.push_back(Add(&l, "reshape", {{"shape", last}}, {cell}));
  if (v.num_outputs() > static_cast<int>(l.outputs.size())) return Unsupported(Fmt(v.num_outputs(), " outputs"));
  l.outputs.resize(v.num_outputs());
  return l;
}

// ReduceProd: the reduced elements copied to a last axis (Take), then
// multiplied in order, one slice of it at a time.
Lowering ReduceProdRule(const NodeView& v) {
  std::vector<int64_t> axes;
  if (auto why = ReduceAxes(v, &axes); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known() || x.ndim() == 0) return Unsupported("needs the input's shape");
  if (axes.empty() && v.Int("noop_with_empty_axes", 0) != 0) return Alias(v);
  std::vector<bool> reduced(x.ndim(), axes.empty());
  for (int64_t a : axes) {
    if (!NormAxis(a, x.ndim(), &a)) return Unsupported(Fmt("axis ", a, " out of range"));
    reduced[a] = true;
  }
  std::vector<int64_t> kept, red, out;
  for (int d = 0; d < x.ndim(); ++d) {
    (reduced[d] ? red : kept).push_back(x[d]);
    if (!reduced[d] || v.Int("keepdims", 1)) out.push_back(reduced[d] ? 1 : x[d]);
  }
  const int64_t k = Shape(red).Size();
  if (k > 4096) return Unsupported(Fmt("a product of ", k, " elements (one node each)"));
  std::vector<int64_t> dims = kept;
  dims.push_back(k);
  const std::vector<int64_t> sx = Strides(x.dims()), sr = Strides(red);
  const std::vector<int64_t> pos = MapPositions(dims, [&](const std::vector<int64_t>& c) {
    int64_t at = 0;
    for (int d = 0, i = 0, j = 0; d < x.ndim(); ++d) {
      if (reduced[d]) {
        at += c.back() / sr[j] % red[j] * sx[d];
        ++j;
      } else {
        at += c[i++] * sx[d];
      }
    }
    return at;
  });
  Lowering l;
  if (auto why = Take(&l, In(0), x.Size(), pos, dims, 0); !why.empty()) return Unsupported(why);
  const Operand all = Prev(static_cast<int>(l.nodes.size()) - 1);
  std::vector<int64_t> begin(dims.size(), 0), end(dims), step(dims.size(), 1);
  Operand y;
  for (int64_t t = 0; t < k; ++t) {
    begin.back() = t, end.back() = t + 1;
    Operand part =
        Add(&l, "slice", {{"begin", TupleStr(begin)}, {"end", TupleStr(end)}, {"step", TupleStr(step)}}, {all});
    y = t == 0 ? part : Add(&l, "mul", {}, {y, part});
  }
  Add(&l, "reshape", {{"shape", TupleStr(out)}}, {y});
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

// HannWindow / HammingWindow / BlackmanWindow(size known, periodic): a
// float value known at import, a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
// with N = size (periodic) or size - 1.
Lowering WindowRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"periodic", "output_datatype"}); !why.empty()) return Unsupported(why);
  if (v.Int("output_datatype", onnx::TensorProto::FLOAT) != onnx::TensorProto::FLOAT)
    return Unsupported("an output type other than FLOAT");
  const OnnxTensor* size = KnownIntTensor(v, 0);
  if (!size || size->i.size() != 1) return Unsupported(NotKnown(v, 0, "size") + ", one integer");
  const int64_t n = size->i[0];
  if (n < 1 || n > kMaxFolded) return Unsupported(Fmt("size ", n));
  const std::string& op = v.op_type();
  const double a0 = op == "HannWindow" ? 0.5 : op == "HammingWindow" ? 25.0 / 46 : 0.42;
  const double a2 = op == "BlackmanWindow" ? 0.08 : 0;
  const double a1 = op == "BlackmanWindow" ? 0.5 : 1 - a0;
  const double denom = static_cast<double>(v.Int("periodic", 1) ? n : n - 1);
  OnnxTensor y;
  y.kind = OnnxTensor::Kind::kFloat, y.type_name = "FLOAT", y.dims = {n};
  for (int64_t k = 0; k < n; ++k) {
    const double angle = denom == 0 ? 0 : 2 * M_PI * static_cast<double>(k) / denom;
    y.f.push_back(static_cast<float>(a0 - a1 * std::cos(angle) + a2 * std::cos(2 * angle)));
  }
  return Folded(std::move(y));
}

// --------------------------------------------------------------- optimizers

// Adagrad, Momentum and Adam of ai.onnx.preview.training (R the learning
// rate and T the update count known at import; then the tensors X..., G...,
// and the state H... or V... (Adam: V..., H...)), elementwise as the
// operator's definition writes them. Outputs X_new..., then the new states.
Lowering OptimizerRule(const NodeView& v) {
  const std::string& op = v.op_type();
  const std::vector<std::string> known =
      op == "Adagrad"    ? std::vector<std::string>{"decay_factor", "epsilon", "norm_coefficient"}
      : op == "Momentum" ? std::vector<std::string>{"alpha", "beta", "mode", "norm_coefficient"}
                         : std::vector<std::string>{"alpha", "beta", "epsilon", "norm_coefficient",
                                                    "norm_coefficient_post"};
  if (auto why = v.UnknownAttr(known); !why.empty()) return Unsupported(why);
  const OnnxTensor* rate = KnownTensor(v, 0);
  const OnnxTensor* count = KnownIntTensor(v, 1);
  if (!rate || rate->kind != OnnxTensor::Kind::kFloat || rate->f.size() != 1)
    return Unsupported(NotKnown(v, 0, "R") + ", one float");
  if (!count || count->i.size() != 1) return Unsupported(NotKnown(v, 1, "T") + ", one integer");
  const int per = op == "Adam" ? 4 : 3;  // X, G and the states
  const int n = (v.num_inputs() - 2) / per;
  if (n < 1 || v.num_inputs() != 2 + n * per || v.num_outputs() != n * (per - 1))
    return Unsupported(Fmt(v.num_inputs(), " inputs and ", v.num_outputs(), " outputs"));
  const double r = rate->f[0], t = static_cast<double>(count->i[0]), nc = v.Float("norm_coefficient", 0);
  Lowering l;
  std::vector<Operand> xs, states[2];
  for (int k = 0; k < n; ++k) {
    const Operand x = In(2 + k), g = In(2 + n + k);
    const Operand greg = nc == 0 ? g : Add(&l, "add", {}, {Add(&l, "mul_scalar", {{"scalar", FloatStr(nc)}}, {x}), g});
    auto scaled = [&](double c, Operand e) { return Add(&l, "mul_scalar", {{"scalar", FloatStr(c)}}, {e}); };
    if (op == "Adagrad") {  // H += G^2; X -= r G / (sqrt(H) + eps), r = R / (1 + T decay)
      const Operand h = Add(&l, "add", {}, {In(2 + 2 * n + k), Add(&l, "square", {}, {greg})});
      Operand d = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("epsilon", 0))}}, {Add(&l, "sqrt", {}, {h})});
      d = Add(&l, "div", {}, {scaled(r / (1 + t * v.Float("decay_factor", 0)), greg), d});
      xs.push_back(Add(&l, "sub", {}, {x, d}));
      states[0].push_back(h);
    } else if (op == "Momentum") {  // V = alpha V + beta' G; X -= R V (or R (G + alpha V), Nesterov)
      const double alpha = v.Float("alpha", 0), beta = t > 0 ? v.Float("beta", 0) : 1;
      const std::string mode = v.Str("mode", "standard");
      if (mode != "standard" && mode != "nesterov") return Unsupported("mode '" + mode + "'");
      const Operand vel = Add(&l, "add", {}, {scaled(alpha, In(2 + 2 * n + k)), scaled(beta, greg)});
      const Operand step = mode == "standard" ? vel : Add(&l, "add", {}, {greg, scaled(alpha, vel)});
      xs.push_back(Add(&l, "sub", {}, {x, scaled(r, step)}));
      states[0].push_back(vel);
    } else {  // Adam
      if (!v.Has("epsilon"))  // ONNX's own test of two tensors expects 1e-2 where its node leaves it out
        return Unsupported("Adam without an explicit epsilon (its default is ambiguous)");
      const double alpha = v.Float("alpha", 0.9), beta = v.Float("beta", 0.999);
      const Operand vel = Add(&l, "add", {}, {scaled(alpha, In(2 + 2 * n + k)), scaled(1 - alpha, greg)});
      const Operand h = Add(&l, "add", {}, {scaled(beta, In(2 + 3 * n + k)),
                                            scaled(1 - beta, Add(&l, "square", {}, {greg}))});
      Operand d = Add(&l, "add_scalar", {{"scalar", FloatStr(v.Float("epsilon", 0))}}, {Add(&l, "sqrt", {}, {h})});
      const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
      d = scaled(ra, Add(&l, "div", {}, {vel, d}));
      Operand xn = Add(&l, "sub", {}, {x, d});
      if (v.Float("norm_coefficient_post", 0) != 0) xn = scaled(1 - v.Float("norm_coefficient_post", 0), xn);
      xs.push_back(xn);
      states[0].push_back(vel);
      states[1].push_back(h);
    }
  }
  l.outputs = xs;
  for (const auto& group : states) l.outputs.insert(l.outputs.end(), group.begin(), group.end());
  return l;
}

}  // namespace frugal::onnx_map
