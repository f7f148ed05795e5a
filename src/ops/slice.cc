// slice:  y = x[b_0:e_0:s_0, b_1:e_1:s_1, ...]   (MXNet's slice)
//   begin, end, step: tuples like (0,None,2) with one entry per leading axis;
//   axes past the tuples are kept whole. None takes the default: for step > 0
//   begin 0 and end = the dim, for step < 0 begin = dim-1 and end = before 0.
//   Negative begin/end count from the end; out-of-range values are clamped.
//   step defaults to 1 and may not be 0. An empty result is an error.
// grad:  dx = dy at the sliced positions, 0 elsewhere        reads dy
// A strided copy (Cost::kFree): y[i] = x[base + map(i)].
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "ops/op_params.h"
#include "ops/op_util.h"

namespace frugal {
namespace {

// "(0,None,-1)" -> {0, none, -1}.
OptInts ParseOptInts(AttrReader& a, const std::string& key, bool required) {
  std::string text = a.Str(key, "");
  FRUGAL_REQUIRE(!required || !text.empty(), a.where(), ": attribute '", key,
                 "' is required (a tuple like (0,None,2))");
  for (char& ch : text)
    if (ch == '(' || ch == ')' || ch == '[' || ch == ']') ch = ' ';
  OptInts out;
  size_t pos = 0;
  while (!text.empty() && pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item == "None") {
      out.push_back(std::nullopt);
    } else if (!item.empty() || comma != std::string::npos) {
      char* endp = nullptr;
      long long v = std::strtoll(item.c_str(), &endp, 10);
      FRUGAL_REQUIRE(!item.empty() && *endp == '\0', a.where(), ": attribute '", key,
                     "' must be a tuple of integers or None like (0,None,2), got '", a.Str(key, ""), "'");
      out.push_back(v);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// The begin, step and length of the slice on every axis of x.
struct Range {
  std::vector<int64_t> begin, step, len;
};

Range SliceRange(const SliceParams& p, const Shape& x) {
  Range r;
  for (int d = 0; d < x.ndim(); ++d) {
    const int64_t dim = x[d];
    const bool given = d < static_cast<int>(p.begin.size());
    const int64_t s = given && d < static_cast<int>(p.step.size()) && p.step[d] ? *p.step[d] : 1;
    int64_t b = given && p.begin[d] ? *p.begin[d] : (s < 0 ? dim - 1 : 0);
    int64_t e = given && p.end[d] ? *p.end[d] : (s < 0 ? -1 : dim);
    if (b < 0) b += dim;
    if (given && p.end[d] && e < 0) e += dim;
    if (s > 0) {
      b = std::max<int64_t>(b, 0);
      e = std::min(e, dim);
    } else {
      b = std::min(b, dim - 1);
      e = std::max<int64_t>(e, -1);
    }
    int64_t len = 0;
    if (b >= 0 && b < dim) len = s > 0 ? (e > b ? (e - b - 1) / s + 1 : 0) : (e < b ? (b - e - 1) / (-s) + 1 : 0);
    r.begin.push_back(b);
    r.step.push_back(s);
    r.len.push_back(len);
  }
  return r;
}

void SliceInferShape(ShapeCtx& c) {
  const auto& p = c.params<SliceParams>();
  const Shape& x = c.in[0];
  if (!x.known()) c.Fail("the shape of input x is unknown");
  if (static_cast<int>(p.begin.size()) > x.ndim()) {
    c.Fail(Fmt("begin has ", p.begin.size(), " entries but x ", x, " has ", x.ndim(), " dims"));
  }
  const Range r = SliceRange(p, x);
  for (int d = 0; d < x.ndim(); ++d) {
    if (r.len[d] == 0) {
      c.Fail(Fmt("the slice of axis ", d, " (size ", x[d], ") is empty; check begin, end and step"));
    }
  }
  c.out[0] = Shape(r.len);
}

}  // namespace

// y[i] = x[base + map(i)]: map walks y's index space with x's strides times step.
void SliceMap(const SliceParams& p, const Shape& x, int64_t* base, StridedIndex* map) {
  const Range r = SliceRange(p, x);
  const std::vector<int64_t> xs = Strides(x);
  std::vector<int64_t> strides(x.ndim());
  *base = 0;
  for (int d = 0; d < x.ndim(); ++d) {
    *base += r.begin[d] * xs[d];
    strides[d] = r.step[d] * xs[d];
  }
  *map = StridedIndex(r.len, strides);
}

namespace {

void SliceForward(const KernelCtx& c) {
  int64_t base;
  StridedIndex map;
  SliceMap(c.params<SliceParams>(), c.in[0].shape(), &base, &map);
  const float* x = c.in[0].f() + base;
  ForEach(c.out[0].size(), Out(c, 0), c.req[0], [&](int64_t i) { return x[map(i)]; });
}

// inputs: dy    output: dx (zeros, then dy at the sliced positions)
void SliceBackward(const KernelCtx& c) {
  if (c.req[0] == OpReq::kNull) return;
  int64_t base;
  StridedIndex map;
  SliceMap(c.params<SliceParams>(), c.out[0].shape(), &base, &map);
  if (c.req[0] == OpReq::kWrite) ForEach(c.out[0].size(), Out(c, 0), OpReq::kWrite, [](int64_t) { return 0.f; });
  float* dx = Out(c, 0) + base;
  const float* dy = c.in[0].f();
  const int64_t n = c.in[0].size();
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[map(i)] += dy[i];  // sliced positions are distinct
}

}  // namespace

SliceParams SliceParams::Parse(AttrReader& a) {
  SliceParams p;
  p.begin = ParseOptInts(a, "begin", true);
  p.end = ParseOptInts(a, "end", true);
  p.step = ParseOptInts(a, "step", false);
  FRUGAL_REQUIRE(p.begin.size() == p.end.size(), a.where(), ": begin has ", p.begin.size(), " entries but end has ",
                 p.end.size());
  FRUGAL_REQUIRE(p.step.empty() || p.step.size() == p.begin.size(), a.where(), ": step has ", p.step.size(),
                 " entries but begin has ", p.begin.size());
  for (const auto& s : p.step) FRUGAL_REQUIRE(!s || *s != 0, a.where(), ": step may not be 0");
  return p;
}

void Register_slice(OpRegistry* r) {
  OpDef& fwd = r->Add("slice")
                   .Doc("MXNet slice: x[begin:end:step] per leading axis; tuples may hold None.")
                   .Unary()
                   .Params<SliceParams>()
                   .InferShape(SliceInferShape)
                   .Recompute(Cost::kFree)
                   .CpuKernel(SliceForward);
  AddBackward(r, fwd, {OutGrad(0)}, "dx = dy at the sliced positions, 0 elsewhere.").CpuKernel(SliceBackward);
}

}  // namespace frugal
