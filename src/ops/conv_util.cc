#include "ops/conv_util.h"

#include <cmath>

namespace frugal {

Pair ReadPair(AttrReader& a, const std::string& key, Pair dflt, int64_t min, bool required) {
  std::vector<int64_t> v;
  if (required) {
    v = a.Ints(key);
  } else {
    std::string s = a.Str(key, "");
    if (s.empty()) return dflt;
    AttrMap one{{key, s}};
    AttrReader r([&a] { return a.where(); }, one);
    v = r.Ints(key);
  }
  FRUGAL_REQUIRE(v.size() == 1 || v.size() == 2, a.where(), ": attribute '", key, "' must be 2-D like (3,3), got ",
                 v.size(), " values");
  Pair p{v[0], v.size() == 2 ? v[1] : v[0]};
  FRUGAL_REQUIRE(p[0] >= min && p[1] >= min, a.where(), ": attribute '", key, "' is ", PairStr(p),
                 "; entries must be at least ", min);
  return p;
}

std::string PairStr(const Pair& p) { return Fmt("(", p[0], ",", p[1], ")"); }

int64_t WindowOut(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilate, bool ceil_mode) {
  const int64_t span = dilate * (kernel - 1) + 1;
  const int64_t room = in + 2 * pad - span;
  if (room < 0) return 0;
  return (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
}

std::string ConvParams::Key() const {
  return Fmt(PairStr(kernel), PairStr(stride), PairStr(dilate), PairStr(pad), "f", num_filter, "g", num_group,
             no_bias ? "nb" : "b", PairStr(adj), PairStr(target_shape), has_target_shape);
}

ConvParams ReadConvParams(AttrReader& a) {
  ConvParams p;
  p.kernel = ReadPair(a, "kernel", {}, 1, /*required=*/true);
  p.stride = ReadPair(a, "stride", {1, 1}, 1);
  p.dilate = ReadPair(a, "dilate", {1, 1}, 1);
  p.pad = ReadPair(a, "pad", {0, 0}, 0);
  p.num_filter = a.Int("num_filter");
  p.num_group = a.Int("num_group", 1);
  p.no_bias = a.Bool("no_bias", false);
  FRUGAL_REQUIRE(p.num_filter > 0, a.where(), ": num_filter must be positive, got ", p.num_filter);
  FRUGAL_REQUIRE(p.num_group > 0 && p.num_filter % p.num_group == 0, a.where(), ": num_filter ", p.num_filter,
                 " must be a positive multiple of num_group ", p.num_group);
  return p;
}

int ConvNumInputs(const std::any& p) { return std::any_cast<const ConvParams&>(p).no_bias ? 2 : 3; }

void RequireNchw(const ShapeCtx& c, const Shape& x) {
  if (!x.known()) c.Fail("the shape of input x is unknown");
  if (x.ndim() != 4) c.Fail(Fmt("x has shape ", x, "; expected 4 dims (N, C, H, W)"));
}

namespace {
// Sets in[k] to want if unknown, else checks it is want.
void SetOrCheck(ShapeCtx& c, int k, const Shape& want, const std::string& what) {
  if (!c.in[k].known()) c.in[k] = want;
  if (c.in[k] != want) c.Fail(Fmt(what, " has shape ", c.in[k], " but x ", c.in[0], " needs ", want));
}
}  // namespace

void InferConvInputs(ShapeCtx& c, bool transposed) {
  const auto& p = c.params<ConvParams>();
  const Shape& x = c.in[0];
  RequireNchw(c, x);
  const int64_t cin = x[1], g = p.num_group;
  if (cin % g != 0) c.Fail(Fmt("x has ", cin, " channels, not a multiple of num_group ", g));
  const Shape weight = transposed ? Shape{cin, p.num_filter / g, p.kernel[0], p.kernel[1]}
                                  : Shape{p.num_filter, cin / g, p.kernel[0], p.kernel[1]};
  SetOrCheck(c, 1, weight, "weight");
  if (!p.no_bias) SetOrCheck(c, 2, Shape{p.num_filter}, "bias");
}

}  // namespace frugal
