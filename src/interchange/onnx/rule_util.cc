// Helpers shared by the ONNX import rules (declared in rule_util.h).
#include <algorithm>
#include <functional>
#include <map>

#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {

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

Lowering Folded(OnnxTensor t) {
  Lowering l;
  l.value = std::move(t);
  return l;
}

OnnxTensor IntValue(std::vector<int64_t> dims, std::vector<int64_t> values, const std::string& type) {
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

OnnxTensor TakeValue(const OnnxTensor& t, const std::vector<int64_t>& positions, std::vector<int64_t> dims) {
  OnnxTensor y;
  y.kind = t.kind, y.type_name = t.type_name, y.dims = std::move(dims);
  for (int64_t k : positions) {
    if (t.kind == OnnxTensor::Kind::kInt) y.i.push_back(t.i[k]);
    if (t.kind == OnnxTensor::Kind::kFloat) y.f.push_back(t.f[k]);
  }
  return y;
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
  static const std::map<std::string, std::pair<int64_t, int64_t>> ranges = {{"BOOL", {0, 1}},
                                                                            {"INT8", {INT8_MIN, INT8_MAX}},
                                                                            {"UINT8", {0, UINT8_MAX}},
                                                                            {"INT16", {INT16_MIN, INT16_MAX}},
                                                                            {"UINT16", {0, UINT16_MAX}},
                                                                            {"INT32", {INT32_MIN, INT32_MAX}},
                                                                            {"UINT32", {0, UINT32_MAX}},
                                                                            {"INT64", {INT64_MIN, INT64_MAX}}};
  auto it = ranges.find(type);
  if (it == ranges.end()) return false;
  *lo = it->second.first, *hi = it->second.second;
  return true;
}

}  // namespace frugal::onnx_map
