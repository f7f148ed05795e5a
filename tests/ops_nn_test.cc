// The oneDNN-backed ops through the one harness (tests/op_harness.h), each
// against a reference written here as plain loops.
#include <gtest/gtest.h>

#include <cmath>

#include "op_harness.h"

namespace frugal::test {
namespace {

void ExpectCovered(const OpReport& r) {
  EXPECT_GT(r.forward_checked, 0);
  EXPECT_GT(r.grads_checked, 0);
  EXPECT_GT(r.kernels_checked, 0);
}

// ---------------------------------------------------------------- convolution

struct Conv {
  int64_t n, c, h, w, o, kh, kw, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, g = 1;
  bool bias = true;
  int64_t oh() const { return (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1; }
  AttrMap Attrs() const {
    return {{"kernel", Fmt("(", kh, ",", kw, ")")}, {"stride", Fmt("(", sh, ",", sw, ")")},
            {"pad", Fmt("(", ph, ",", pw, ")")},    {"dilate", Fmt("(", dh, ",", dw, ")")},
            {"num_filter", Fmt(o)},                 {"num_group", Fmt(g)},
            {"no_bias", bias ? "false" : "true"}};
  }
  std::vector<Shape> InShapes() const {
    std::vector<Shape> s{Shape{n, c, h, w}, Shape{o, c / g, kh, kw}};
    if (bias) s.push_back(Shape{o});
    return s;
  }
  // y[n, o, i, j] = b[o] + sum W[o, ci, p, q] x[n, g0 + ci, i sh - ph + p dh, j sw - pw + q dw]
  Values Reference(const Values& in) const {
    const int64_t cg = c / g, og = o / g;
    std::vector<float> y(n * o * oh() * ow());
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t i = 0; i < oh(); ++i)
          for (int64_t j = 0; j < ow(); ++j) {
            double s = bias ? in[2][oc] : 0;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t p = 0; p < kh; ++p)
                for (int64_t q = 0; q < kw; ++q) {
                  int64_t yy = i * sh - ph + p * dh, xx = j * sw - pw + q * dw;
                  if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                  int64_t chan = oc / og * cg + ci;
                  s += static_cast<double>(in[1][((oc * cg + ci) * kh + p) * kw + q]) *
                       in[0][((b * c + chan) * h + yy) * w + xx];
                }
            y[((b * o + oc) * oh() + i) * ow() + j] = static_cast<float>(s);
          }
    return {y};
  }
};

OpReport CheckConv(const Conv& k) {
  OpCase c;
  c.op = "convolution";
  c.attrs = k.Attrs();
  c.in_shapes = k.InShapes();
  c.differentiable.assign(c.in_shapes.size(), true);
  c.reference = [k](const Values& in) { return k.Reference(in); };
  return CheckOp(c);
}

TEST(OpsNn, Convolution3x3Pad1) {
  Conv k{2, 3, 6, 6, 4, 3, 3};
  k.ph = k.pw = 1;
  ExpectCovered(CheckConv(k));
}

TEST(OpsNn, ConvolutionStrideDilatePadNoBias) {
  Conv k{2, 3, 9, 8, 5, 3, 2};
  k.sh = 2; k.sw = 1; k.ph = 1; k.pw = 0; k.dh = 2; k.dw = 3;
  k.bias = false;
  ExpectCovered(CheckConv(k));
}

TEST(OpsNn, ConvolutionGroups) {
  Conv k{2, 4, 5, 5, 6, 3, 3};
  k.g = 2; k.ph = k.pw = 1; k.sh = k.sw = 2;
  ExpectCovered(CheckConv(k));
}

// 16 channels: oneDNN picks its blocked layout (nChw16c), so the kernels
// reorder through the workspace, and kAdd goes through a summing reorder.
TEST(OpsNn, ConvolutionBlockedLayout) {
  Conv k{2, 16, 5, 5, 16, 3, 3};
  k.ph = k.pw = 1;
  ExpectCovered(CheckConv(k));
}

TEST(OpsNn, Convolution1x1) {
  Conv k{2, 32, 4, 4, 16, 1, 1};
  ExpectCovered(CheckConv(k));
}

}  // namespace
}  // namespace frugal::test
