// ONNX import rules for tensor arithmetic and layout: shapes (Flatten,
// Reshape), elementwise ops with broadcasting, Concat/Split/Slice/
// Unsqueeze, and reductions.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "interchange/onnx/op_table.h"
#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {

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
    if ((end[a] - begin[a]) * s <= 0)
      return Unsupported(Fmt("the slice of axis ", a, " is empty (frugal has no empty tensors)"));
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

// Mean(x0, x1, ...) = Sum / n.
Lowering MeanRule(const NodeView& v) {
  Lowering l = SumRule(v);
  if (!l.unsupported.empty() || l.alias) return l;
  Add(&l, "div_scalar", {{"scalar", IntStr(v.num_inputs())}}, {Prev(static_cast<int>(l.nodes.size()) - 1)});
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
}  // namespace frugal::onnx_map
