// ONNX import rules for values known at import: shape arithmetic and masks
// folded to constants (src/interchange/onnx/rule_util.h), Cast, Shape, Range, Gather,
// Where, comparisons. rules_copy.cc holds the ops that only move elements.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx.pb.h"
#include "interchange/onnx/op_table.h"
#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {

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

// ONNX's INT8 ... INT64 and UINT8 ... UINT64.
bool IsIntegerType(const std::string& type) { return type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0; }

// Cast / CastLike to ONNX type `to`: folded when the input is known at
// import (a float to float stays the value it is); a float tensor cast to
// float is itself, cast to integers is itself as integers, which only
// Gather's indices read (embedding refuses values that are not whole numbers,
// where the Cast would truncate).
Lowering CastTo(const NodeView& v, const std::string& to) {
  const OnnxTensor* x = KnownTensor(v, 0);
  if (x && x->kind != OnnxTensor::Kind::kOther && (x->kind == OnnxTensor::Kind::kInt || to != "FLOAT")) {
    OnnxTensor y;
    if (std::string why = CastValue(*x, to, &y); !why.empty()) return Unsupported(why);
    return Folded(std::move(y));
  }
  if (to != "FLOAT" && !(IsIntegerType(to) && v.InputType(0) == "FLOAT"))
    return Unsupported(Fmt("a cast to ", to, " of a tensor not known at import (frugal computes in float32 only)"));
  Lowering l;  // a tensor of another type is refused as an input, with its type named
  l.alias = In(0);
  if (to != "FLOAT") l.alias_type = to;
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
  if (y.kind == OnnxTensor::Kind::kFloat)
    y.f.assign(n, y.f[0]);
  else
    y.i.assign(n, y.i[0]);
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
    if (y.kind == OnnxTensor::Kind::kFloat)
      y.f.push_back(static_cast<float>(x[0] + k * x[2]));
    else
      y.i.push_back(v.InputValue(0)->i[0] + k * v.InputValue(2)->i[0]);
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
  // As a reshape that holds no batch size: 0 copies the dims before the
  // first one dropped, -1 stands for the first kept after it (the batch's
  // place when a split along axis 0 is squeezed), the rest as they are.
  const int first = static_cast<int>(std::find(drop.begin(), drop.end(), true) - drop.begin());
  std::vector<int64_t> shape;
  bool inferred = false;
  for (int d = 0; d < x.ndim(); ++d) {
    if (drop[d]) continue;
    shape.push_back(d < first ? 0 : inferred ? x[d] : -1);
    inferred = inferred || d > first;
  }
  return One("reshape", {{"shape", TupleStr(shape)}}, 1);
}

// Gather / GatherElements (data, indices known at import, axis): folded
// for known integers, else the data's elements taken at the positions the
// indices name (needs the data's shape). Gather of rows (axis 0) of a 2-D
// float tensor at indices Cast from a float tensor is an embedding.
Lowering GatherRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"axis"}); !why.empty()) return Unsupported(why);
  const bool elements = v.op_type() == "GatherElements";
  const OnnxTensor *known = KnownIntTensor(v, 0), *idx = KnownIntTensor(v, 1);
  const Shape& rows = v.InputShape(0);
  if (!idx && !elements && !known && IsIntegerType(v.InputType(1)) && v.InputType(0) == "FLOAT" && rows.known() &&
      rows.ndim() == 2 && (v.Int("axis", 0) == 0 || v.Int("axis", 0) == -2)) {
    Lowering l = One("embedding", {{"input_dim", IntStr(rows[0])}, {"output_dim", IntStr(rows[1])}}, 0);
    l.nodes[0].inputs = {Indices(1), In(0)};
    return l;
  }
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

// Where(condition known at import, a, b): folded where a and b are known
// values of one kind (integers; floats, as an attention mask), else the
// elements of a and b (stacked) taken where the condition picks them.
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
  std::vector<int64_t> pos(pc.size());
  for (size_t k = 0; k < pc.size(); ++k) pos[k] = c->i[pc[k]] ? pa[k] : a.Size() + pb[k];
  const OnnxTensor *ka = KnownTensor(v, 1), *kb = KnownTensor(v, 2);
  if (ka && kb && ka->kind == kb->kind && ka->kind != OnnxTensor::Kind::kOther) {
    OnnxTensor both = *ka;  // a's elements, then b's: the positions above
    both.i.insert(both.i.end(), kb->i.begin(), kb->i.end());
    both.f.insert(both.f.end(), kb->f.begin(), kb->f.end());
    return Folded(TakeValue(both, pos, dims));
  }
  Lowering l;
  Operand ra = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(1)}), rb = Add(&l, "reshape", {{"shape", "(-1)"}}, {In(2)});
  Operand both = Add(&l, "concat", {{"dim", "0"}, {"num_args", "2"}}, {ra, rb});
  if (std::string why = Take(&l, both, a.Size() + b.Size(), pos, dims, 0); !why.empty()) return Unsupported(why);
  return l;
}

// Equal, Less, Greater, LessOrEqual, GreaterOrEqual of values known at
// import (BOOL), as shape arithmetic and masks need; frugal has no
// comparison op. Integers compare as integers; a float with either as doubles
// (exact for both).
Lowering CompareRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  const OnnxTensor *a = KnownTensor(v, 0), *b = KnownTensor(v, 1);
  const auto number = [](const OnnxTensor* t) { return t && t->kind != OnnxTensor::Kind::kOther; };
  if (!number(a) || !number(b)) return Unsupported("compares values not known at import (frugal has no comparison op)");
  const std::string& op = v.op_type();
  auto compare = [&op](auto x, auto z) -> int64_t {
    return op == "Equal"         ? x == z
           : op == "Less"        ? x < z
           : op == "Greater"     ? x > z
           : op == "LessOrEqual" ? x <= z
                                 : x >= z;
  };
  std::vector<int64_t> dims;
  if (std::string why = BroadcastDims({a->shape(), b->shape()}, &dims); !why.empty()) return Unsupported(why);
  if (Shape(dims).Size() > kMaxFolded) return Unsupported(Fmt("a result of shape ", Shape(dims), " is too large"));
  const std::vector<int64_t> pa = BroadcastPositions(a->dims, dims), pb = BroadcastPositions(b->dims, dims);
  const bool ints = a->kind == OnnxTensor::Kind::kInt && b->kind == OnnxTensor::Kind::kInt;
  const auto real = [](const OnnxTensor* t, int64_t k) {
    return t->kind == OnnxTensor::Kind::kInt ? static_cast<double>(t->i[k]) : static_cast<double>(t->f[k]);
  };
  OnnxTensor y = IntValue(dims, {}, "BOOL");
  for (size_t k = 0; k < pa.size(); ++k)
    y.i.push_back(ints ? compare(a->i[pa[k]], b->i[pb[k]]) : compare(real(a, pa[k]), real(b, pb[k])));
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

}  // namespace frugal::onnx_map
