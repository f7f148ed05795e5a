// ONNX import rules for ops that only move elements, lowered to copies from
// positions computed at import (shapes and indices are known there): Expand,
// Tile, Pad, Resize, Scatter and their kin. Values known at import are
// rules_known.cc's.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "onnx.pb.h"
#include "interchange/onnx/op_table.h"
#include "interchange/onnx/rule_util.h"

namespace frugal::onnx_map {

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
  const OnnxTensor* known = KnownTensor(v, 0);
  if (known && known->kind != OnnxTensor::Kind::kOther && Shape(dims).Size() <= kMaxFolded)
    return Folded(TakeValue(*known, BroadcastPositions(x.dims(), dims), dims));
  return TakeInput(x, BroadcastPositions(x.dims(), dims), dims, 1);
}

// Trilu(x, k known): the upper (j - i >= k) or lower (j - i <= k) triangle
// of the last two axes, zeros elsewhere. Folded for a value known at import
// (a causal mask); else x times a 0/1 mask (aux state).
Lowering TriluRule(const NodeView& v) {
  if (auto why = v.UnknownAttr({"upper"}); !why.empty()) return Unsupported(why);
  const bool upper = v.Int("upper", 1) != 0;
  int64_t k = 0;
  if (v.HasInput(1)) {
    const auto* kv = KnownInts(v, 1);
    if (!kv || kv->size() != 1) return Unsupported(NotKnown(v, 1, "k, one integer"));
    k = (*kv)[0];
  }
  const Shape& x = v.InputShape(0);
  if (!x.known() || x.ndim() < 2) return Unsupported("needs an input of known shape with at least 2 dims");
  const int64_t rows = x[x.ndim() - 2], cols = x[x.ndim() - 1];
  const auto kept = [&](int64_t flat) {
    const int64_t i = flat / cols % rows, j = flat % cols;
    return upper ? j - i >= k : j - i <= k;
  };
  if (const OnnxTensor* t = KnownTensor(v, 0); t && t->kind != OnnxTensor::Kind::kOther) {
    OnnxTensor y = *t;
    for (int64_t e = 0; e < x.Size(); ++e) {
      if (kept(e)) continue;
      if (y.kind == OnnxTensor::Kind::kInt)
        y.i[e] = 0;
      else
        y.f[e] = 0;
    }
    return Folded(std::move(y));
  }
  Tensor mask = Tensor::Empty(Shape{rows, cols}, DType::kFloat32, {}, MemKind::kParam);
  for (int64_t e = 0; e < rows * cols; ++e) mask.f()[e] = kept(e) ? 1.f : 0.f;
  Lowering l;
  l.constants.push_back({0, "triangle", mask, false});
  Add(&l, "mul", {}, {In(0), Const(0)});
  return l;
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
  return TakeInput(x,
                   MapPositions(dims,
                                [&](const std::vector<int64_t>& c) {
                                  int64_t at = 0;
                                  for (int d = 0; d < x.ndim(); ++d) at += c[d] % x[d] * sx[d];
                                  return at;
                                }),
                   dims, 1);
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
  return TakeInput(
      x,
      MapPositions(dims,
                   [&](const std::vector<int64_t>& c) {
                     if (!to_space) {  // y[n, (i b + j) C + ch, h, w] = x[n, ch, h b + i, w b + j]
                       const int64_t ch = c[1] % x[1], ij = c[1] / x[1];
                       return c[0] * sx[0] + ch * sx[1] + (c[2] * b + ij / b) * sx[2] + (c[3] * b + ij % b) * sx[3];
                     }
                     const int64_t i = c[2] % b, j = c[3] % b, cout = dims[1];
                     const int64_t ch = mode == "DCR" ? (i * b + j) * cout + c[1] : c[1] * b * b + i * b + j;
                     return c[0] * sx[0] + ch * sx[1] + c[2] / b * sx[2] + c[3] / b * sx[3];
                   }),
      dims, 0);
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
  return TakeInput(x,
                   MapPositions(x.dims(),
                                [&](const std::vector<int64_t>& c) {
                                  std::vector<int64_t> src = c;
                                  const int64_t n = (*lens)[c[ba]];
                                  if (c[ta] < n) src[ta] = n - 1 - c[ta];
                                  return std::inner_product(src.begin(), src.end(), sx.begin(), int64_t{0});
                                }),
                   x.dims(), 1);
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
  return TakeInput(x,
                   MapPositions(dims,
                                [&](const std::vector<int64_t>& c) {
                                  if (flat) return kept[c[0]];
                                  std::vector<int64_t> src = c;
                                  src[axis] = kept[c[axis]];
                                  return std::inner_product(src.begin(), src.end(), sx.begin(), int64_t{0});
                                }),
                   dims, 1);
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
    if (nearest == "round_prefer_floor")
      right = right || r > 0.5;
    else if (nearest == "round_prefer_ceil")
      right = right || r >= 0.5;
    else if (nearest != "floor" && nearest != "ceil")
      return "nearest_mode '" + nearest + "'";
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

// A Resize's output dims and scales (from its sizes, or its scales), and
// its roi under tf_crop_and_resize; why not, where they are not known.
std::string ResizeTarget(const NodeView& v, const Shape& x, std::vector<int64_t>* out, std::vector<double>* scales,
                         std::vector<double>* roi) {
  const int rank = x.ndim();
  const int scales_at = v.op_type() == "Upsample" || v.opset() < 11 ? 1 : 2;
  out->assign(rank, 0);
  const OnnxTensor* s = KnownTensor(v, scales_at);
  if (v.HasInput(3)) {  // sizes
    const auto* sizes = KnownInts(v, 3);
    if (!sizes || static_cast<int>(sizes->size()) != rank) return NotKnown(v, 3, "sizes") + ", one a dim";
    for (int d = 0; d < rank; ++d) {
      (*out)[d] = (*sizes)[d];
      scales->push_back(static_cast<double>((*out)[d]) / x[d]);
    }
  } else if (s && s->kind == OnnxTensor::Kind::kFloat && static_cast<int>(s->f.size()) == rank) {
    for (int d = 0; d < rank; ++d) {
      scales->push_back(s->f[d]);
      (*out)[d] = static_cast<int64_t>(s->f[d] * static_cast<double>(x[d]));
    }
  } else {
    return NotKnown(v, scales_at, "scales") + ", one float a dim";
  }
  if (v.Str("coordinate_transformation_mode", "") == "tf_crop_and_resize") {
    const OnnxTensor* r = KnownTensor(v, 1);
    if (!r || r->kind != OnnxTensor::Kind::kFloat || static_cast<int>(r->f.size()) != 2 * rank)
      return NotKnown(v, 1, "roi") + ", 2 floats a dim";
    roi->assign(r->f.begin(), r->f.end());
  }
  for (int d = 0; d < rank; ++d)
    if ((*out)[d] < 1 || !((*scales)[d] > 0)) return Fmt("scale ", (*scales)[d], " of dim ", d, " makes it empty");
  return "";
}

// The interpolation as a matrix (output elements x input elements) from
// each axis's taps, and its bias: the extrapolation value where an output
// element has no tap. Whether any has none.
bool InterpolationMatrix(const std::vector<std::vector<std::vector<Tap>>>& taps, const Shape& x,
                         const std::vector<int64_t>& out, float extrapolation, Tensor* m, Tensor* bias) {
  const int rank = x.ndim();
  const int64_t n_out = Shape(out).Size(), n_in = x.Size();
  const std::vector<int64_t> sx = Strides(x.dims()), so = Strides(out);
  *m = Tensor::Empty(Shape{n_out, n_in}, DType::kFloat32, {}, MemKind::kParam);
  *bias = Tensor::Empty(Shape{n_out}, DType::kFloat32, {}, MemKind::kParam);
  std::fill(m->f(), m->f() + m->size(), 0.f);
  std::fill(bias->f(), bias->f() + bias->size(), 0.f);
  bool extrapolated = false;
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
      bias->f()[k] = extrapolation;
      extrapolated = true;
    }
    std::map<int64_t, double> row;  // one weight per input element, summed in double
    for (const auto& [at, w] : terms) row[at] += w;
    for (const auto& [at, w] : row) m->f()[k * n_in + at] = static_cast<float>(w);
  }
  return extrapolated;
}

}  // namespace

// Resize (opset 10 on) and Upsample with scales or sizes known at import:
// nearest copies elements (Take); linear and cubic are a fully_connected of
// the flattened input with the interpolation weights (and the extrapolation
// value as bias), an aux constant.
Lowering ResizeRule(const NodeView& v) {
  const bool upsample = v.op_type() == "Upsample";
  const std::vector<std::string> known =
      upsample ? std::vector<std::string>{"mode"} : std::vector<std::string>{"mode",
                                                                             "coordinate_transformation_mode",
                                                                             "nearest_mode",
                                                                             "cubic_coeff_a",
                                                                             "exclude_outside",
                                                                             "extrapolation_value"};
  if (auto why = v.UnknownAttr(known); !why.empty()) return Unsupported(why);
  const Shape& x = v.InputShape(0);
  if (!x.known()) return Unsupported("needs the input's shape");
  const int rank = x.ndim();
  std::vector<double> scales, roi;
  std::vector<int64_t> out;
  if (auto why = ResizeTarget(v, x, &out, &scales, &roi); !why.empty()) return Unsupported(why);
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
  if (v.Str("mode", "nearest") == "nearest" && roi.empty()) {  // one tap of weight 1 per axis: a copy
    const std::vector<int64_t> sx = Strides(x.dims());
    return TakeInput(x,
                     MapPositions(out,
                                  [&](const std::vector<int64_t>& c) {
                                    int64_t at = 0;
                                    for (int d = 0; d < rank; ++d)
                                      for (const Tap& t : taps[d][c[d]]) at += t.w == 1 ? t.at * sx[d] : 0;
                                    return at;
                                  }),
                     out, 0);
  }
  if (n_out > kMaxFolded / n_in) return Unsupported(Fmt("a ", n_out, " x ", n_in, " interpolation is too large"));
  Tensor m, bias;
  const bool extrapolated =
      InterpolationMatrix(taps, x, out, static_cast<float>(v.Float("extrapolation_value", 0)), &m, &bias);
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

}  // namespace frugal::onnx_map
