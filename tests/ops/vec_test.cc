// vec.h: every instruction-set build of the elementwise kernels gives the
// bits of the plain definitions (no FMA contraction, sums in 16 fixed
// lanes), on lengths around the vector widths, in place and accumulating;
// the bfloat16 kernels give the float32 kernels' results rounded; the
// column kernels give the contiguous kernels' bits on each column.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu/philox.h"
#include "ops/cpu/vec.h"
#include "frugal/bf16.h"

namespace frugal {
namespace {

using cpu::VecKernels;

std::vector<float> Data(int64_t n, float phase) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * i + phase) * 3 + 0.01f * (i % 7);
  return v;
}

// The sum the kernels promise: element i into lane i % 16, lanes added pairwise.
template <typename F>
float LaneSum(int64_t n, F f) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % 16] += f(i);
  for (int w = 8; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

std::vector<const VecKernels*> Builds() {
  std::vector<const VecKernels*> out;
  for (const char* isa : {"avx512", "avx2", "sse2"})
    if (const VecKernels* k = cpu::VecFor(isa)) out.push_back(k);
  return out;
}

const std::vector<int64_t> kLengths{0, 1, 7, 15, 16, 17, 31, 33, 100, 1027};

TEST(Vec, TheBaselineBuildIsAlwaysThereAndOneIsChosen) {
  ASSERT_NE(cpu::VecFor("sse2"), nullptr);
  EXPECT_EQ(cpu::VecFor("neon"), nullptr);
  const std::string chosen = cpu::Vec().isa;
  EXPECT_TRUE(chosen == "avx512" || chosen == "avx2" || chosen == "sse2") << chosen;
  EXPECT_EQ(cpu::VecFor(chosen.c_str()), &cpu::Vec());
}

TEST(Vec, ReluAndItsGradientGiveTheDefinitionsBits) {
  for (const VecKernels* k : Builds()) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = Data(n, 0.1f), dy = Data(n, 2.f);
      std::vector<float> y(n, 5.f), want(n), dx(n, 1.f), want_dx(n);
      for (int64_t i = 0; i < n; ++i) {
        want[i] = 5.f + (x[i] > 0 ? x[i] : 0.f);
        want_dx[i] = x[i] > 0 ? dy[i] : 0.f;
      }
      k->f32.relu(x.data(), y.data(), n, /*add=*/true);
      EXPECT_EQ(y, want) << k->isa << " n=" << n;
      k->f32.relu_grad(dy.data(), x.data(), dx.data(), n, false);
      EXPECT_EQ(dx, want_dx) << k->isa << " n=" << n;
      std::vector<float> inplace = x;  // y == x
      k->f32.relu(inplace.data(), inplace.data(), n, false);
      for (int64_t i = 0; i < n; ++i) want[i] = x[i] > 0 ? x[i] : 0.f;
      EXPECT_EQ(inplace, want) << k->isa << " in place, n=" << n;
    }
  }
}

TEST(Vec, AffineSumsAndGradientsGiveTheDefinitionsBits) {
  const float a = 1.37f, b = -0.21f, m = 0.05f, kk = 0.9f, c = 0.013f, q = 0.07f;
  for (const VecKernels* k : Builds()) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = Data(n, 0.4f), dy = Data(n, 1.3f);
      for (bool relu : {false, true}) {
        auto g = [&](int64_t i) {
          const float t = a * x[i] + b;
          return !relu || t > 0.f ? dy[i] : 0.f;
        };
        std::vector<float> y(n), want(n), dx = dy, want_dx(n);
        for (int64_t i = 0; i < n; ++i) {
          const float t = a * x[i] + b;
          want[i] = relu ? (t > 0.f ? t : 0.f) : t;
          want_dx[i] = kk * (g(i) - c - (x[i] - m) * q);
        }
        k->f32.affine(x.data(), a, b, relu, y.data(), n, false);
        EXPECT_EQ(y, want) << k->isa << " relu=" << relu << " n=" << n;
        float s1 = -1, s2 = -1;
        k->f32.affine_grad_sums(dy.data(), x.data(), m, relu, a, b, n, &s1, &s2);
        EXPECT_EQ(s1, LaneSum(n, g)) << k->isa << " relu=" << relu << " n=" << n;
        EXPECT_EQ(s2, LaneSum(n, [&](int64_t i) { return g(i) * (x[i] - m); })) << k->isa << " n=" << n;
        k->f32.affine_grad(dx.data(), x.data(), m, relu, a, b, kk, c, q, dx.data(), n, false);  // dx == dy
        EXPECT_EQ(dx, want_dx) << k->isa << " relu=" << relu << " n=" << n;
      }
      EXPECT_EQ(k->f32.sum(x.data(), n), LaneSum(n, [&](int64_t i) { return x[i]; })) << k->isa << " n=" << n;
      EXPECT_EQ(k->f32.sq_dev_sum(x.data(), m, n), LaneSum(n, [&](int64_t i) { return (x[i] - m) * (x[i] - m); }))
          << k->isa << " n=" << n;
    }
  }
}

TEST(Vec, AddNSumsInOrderThenStores) {
  for (const VecKernels* k : Builds()) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{600}, int64_t{1500}}) {  // across the 512-float chunks
      std::vector<float> x0 = Data(n, 0.f), x1 = Data(n, 1.f), x2 = Data(n, 2.f);
      std::vector<float> want(n), y(n, 0.5f);
      for (int64_t i = 0; i < n; ++i) want[i] = 0.5f + ((x0[i] + x1[i]) + x2[i]);
      const float* xs[] = {x0.data(), x1.data(), x2.data()};
      k->f32.add_n(xs, 3, y.data(), n, /*add=*/true);
      EXPECT_EQ(y, want) << k->isa << " n=" << n;
      for (int64_t i = 0; i < n; ++i) want[i] = (x0[i] + x1[i]) + x2[i];
      k->f32.add_n(xs, 3, x0.data(), n, false);  // into its first input
      EXPECT_EQ(x0, want) << k->isa << " in place, n=" << n;
    }
  }
}

// The LSTM cell's columns: every build gives the baseline build's bits
// (its exp, sigmoid and tanh are plain float arithmetic).
TEST(Vec, LstmColumnsGiveTheBaselineBitsOnEveryBuild) {
  const int64_t hid = 37, n = 37;  // one row, an odd width
  const std::vector<float> i2h = Data(4 * hid, 0.3f), h2h = Data(4 * hid, 1.1f), c_prev = Data(hid, 2.f);
  const std::vector<float> dh = Data(hid, 0.7f), dc = Data(hid, 1.9f);
  auto run = [&](const VecKernels* k) {
    std::vector<float> h(hid), c(hid), gates(4 * hid), da(4 * hid), dcp(hid);
    cpu::LstmColumns f;
    f.hid = hid;
    f.i2h = i2h.data(), f.h2h = h2h.data(), f.c_prev = c_prev.data();
    f.h = h.data(), f.c = c.data(), f.gates = gates.data();
    f.req_h = f.req_c = f.req_gates = OpReq::kWrite;
    k->lstm_forward(f, n);
    cpu::LstmColumns b;
    b.hid = hid;
    b.dh = dh.data(), b.dc = dc.data(), b.act = gates.data(), b.c_prev = c_prev.data();
    b.da = da.data(), b.dc_prev = dcp.data();
    b.req_da = b.req_dc_prev = OpReq::kWrite;
    k->lstm_backward(b, n);
    return std::vector<std::vector<float>>{h, c, gates, da, dcp};
  };
  const auto want = run(cpu::VecFor("sse2"));
  for (float v : want[0]) ASSERT_TRUE(std::isfinite(v) && std::fabs(v) < 1.f) << v;  // h = o tanh(c)
  for (const VecKernels* k : Builds()) EXPECT_EQ(run(k), want) << k->isa;
}

// Softmax's exponentials: within 2e-7 relative of std::exp, exactly 0 for
// masked (-inf) scores and below e^-87, the sum in 16 lanes; the same bits on
// every build, in place too.
TEST(Vec, ExpShiftGivesTheBaselineBitsAndZeroForMaskedScores) {
  for (int64_t n : kLengths) {
    std::vector<float> x = Data(n, 3.f);
    if (n > 2) x[1] = -std::numeric_limits<float>::infinity(), x[2] = -100.f;
    const float m = 1.5f;
    std::vector<float> want(n);
    const float sum = cpu::VecFor("sse2")->exp_shift(x.data(), m, want.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = x[i] - m < -87 ? 0.0 : std::exp(static_cast<double>(x[i] - m));
      ASSERT_NEAR(want[i], ref, 2e-7 * ref) << i;
    }
    EXPECT_EQ(sum, LaneSum(n, [&](int64_t i) { return want[i]; })) << n;
    for (const VecKernels* k : Builds()) {
      std::vector<float> y = x;
      EXPECT_EQ(k->exp_shift(y.data(), m, y.data(), n), sum) << k->isa << " " << n;
      EXPECT_EQ(y, want) << k->isa << " " << n;
    }
  }
}

// Philox blocks drawn many at a time give CounterStream::Block's words on
// every build (the known-answer vectors are tests/base/philox_test.cc's).
TEST(Vec, PhiloxBlocksGiveTheStreamsWords) {
  const cpu::CounterStream stream(11, 0x1234567890abcdefull, (int64_t{1} << 33) + 5);
  const uint64_t b0 = (uint64_t{1} << 32) - 40;  // the counter's high word changes inside
  for (int64_t n : kLengths) {
    std::vector<uint32_t> want(4 * n);
    for (int64_t i = 0; i < n; ++i) {
      const cpu::PhiloxCounter w = stream.Block(b0 + i);
      std::copy(w.begin(), w.end(), want.begin() + 4 * i);
    }
    for (const VecKernels* k : Builds()) {
      std::vector<uint32_t> got(4 * n);
      k->philox_blocks(stream.key(), stream.step(), b0, n, got.data());
      EXPECT_EQ(got, want) << k->isa << " " << n;
    }
  }
}

// The optimizers' vector loop against UpdateElement, element by element (the
// CUDA kernel's and the old CPU loop's formula): the same bits for every
// optimizer, three steps in a row.
TEST(Vec, OptimizerUpdatesGiveUpdateElementsBits) {
  struct Case {
    const char* name;
    UpdateArgs a;
  };
  UpdateArgs sgd;
  sgd.lr = 0.1f, sgd.wd = 1e-4f, sgd.momentum = 0.9f;
  UpdateArgs nesterov = sgd;
  nesterov.kind = OptimizerKind::kNesterov;
  UpdateArgs adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 1e-3f, adam.beta1 = 0.9f, adam.beta2 = 0.999f, adam.inv_c1 = 10.f, adam.inv_c2 = 1000.5f, adam.l2 = 1e-2f;
  adam.eps = 1e-8f;
  UpdateArgs adamw = adam;
  adamw.kind = OptimizerKind::kAdamW, adamw.l2 = 0.f, adamw.shrink = 0.999f;
  UpdateArgs rms;
  rms.kind = OptimizerKind::kRmsProp, rms.lr = 1e-2f, rms.wd = 1e-3f, rms.rho = 0.9f, rms.eps = 1e-6f;
  UpdateArgs centered = rms;
  centered.centered = true;
  const Case cases[] = {{"sgd", sgd},     {"nesterov", nesterov}, {"adam", adam},
                        {"adamw", adamw}, {"rmsprop", rms},       {"rmsprop centered", centered}};
  for (const VecKernels* k : Builds()) {
    for (const Case& c : cases) {
      for (int64_t n : kLengths) {
        std::vector<float> w = Data(n, 0.3f), s0(n, 0.f), s1(n, 0.f);
        std::vector<float> want_w = w, want_s0 = s0, want_s1 = s1;
        const bool two = c.a.kind == OptimizerKind::kAdam || c.a.kind == OptimizerKind::kAdamW || c.a.centered;
        for (int step = 0; step < 3; ++step) {
          const std::vector<float> g = Data(n, 1.f + step);
          k->update(c.a, w.data(), g.data(), s0.data(), two ? s1.data() : nullptr, n);
          for (int64_t i = 0; i < n; ++i)
            UpdateElement(c.a, i, want_w.data(), g.data(), want_s0.data(), two ? want_s1.data() : nullptr);
        }
        EXPECT_EQ(w, want_w) << k->isa << " " << c.name << " n=" << n;
        EXPECT_EQ(s0, want_s0) << k->isa << " " << c.name << " n=" << n;
        EXPECT_EQ(s1, want_s1) << k->isa << " " << c.name << " n=" << n;
      }
    }
  }
}

// ---------------------------------------------------------------- bfloat16

// Every activation kernel of one element type T (float, or uint16_t for
// bfloat16 bits) on the same inputs: what each stored and each sum returned,
// in a fixed order. Outputs start as y0 (they matter with add); relu and
// add_n also run in place.
template <typename T>
struct ActResults {
  std::vector<std::vector<T>> stored;
  std::vector<float> sums;
  bool operator==(const ActResults& o) const { return stored == o.stored && sums == o.sums; }
};

template <typename T>
ActResults<T> RunActKernels(const cpu::ActKernels<T>& v, const std::vector<T>& x, const std::vector<T>& dy,
                            const std::vector<T>& x2, const std::vector<T>& y0, bool add) {
  const float a = 1.37f, b = -0.21f, m = 0.05f, kk = 0.9f, c = 0.013f, q = 0.07f;
  const int64_t n = static_cast<int64_t>(x.size());
  ActResults<T> r;
  std::vector<T> y = y0;
  v.relu(x.data(), y.data(), n, add);
  r.stored.push_back(y);
  y = x;
  v.relu(y.data(), y.data(), n, add);  // in place
  r.stored.push_back(y);
  y = y0;
  v.relu_grad(dy.data(), x.data(), y.data(), n, add);
  r.stored.push_back(y);
  for (bool relu : {false, true}) {
    y = y0;
    v.affine(x.data(), a, b, relu, y.data(), n, add);
    r.stored.push_back(y);
    float s1 = -1, s2 = -1;
    v.affine_grad_sums(dy.data(), x.data(), m, relu, a, b, n, &s1, &s2);
    r.sums.insert(r.sums.end(), {s1, s2});
    y = y0;
    v.affine_grad(dy.data(), x.data(), m, relu, a, b, kk, c, q, y.data(), n, add);
    r.stored.push_back(y);
  }
  r.sums.insert(r.sums.end(), {v.sum(x.data(), n), v.sq_dev_sum(x.data(), m, n)});
  const T* xs[] = {x.data(), dy.data(), x2.data()};
  y = y0;
  v.add_n(xs, 3, y.data(), n, add);
  r.stored.push_back(y);
  y = x;
  const T* into_first[] = {y.data(), dy.data()};
  v.add_n(into_first, 2, y.data(), n, add);
  r.stored.push_back(y);
  return r;
}

// Inputs of both types holding the same values: Data rounded to bfloat16,
// with a few of the largest finite bfloat16 (so that sums overflow and
// round to infinity) and negative zeros.
struct Bf16Inputs {
  std::vector<float> f;
  std::vector<uint16_t> b;
};
Bf16Inputs Bf16Data(int64_t n, float phase) {
  Bf16Inputs in{Data(n, phase), {}};
  for (int64_t i = 0; i < n; ++i) {
    if (i % 97 == 13) in.f[i] = 3.3895314e38f;  // 0x7F7F
    if (i % 89 == 5) in.f[i] = -0.f;
    in.b.push_back(FloatToBf16(in.f[i]));
    in.f[i] = Bf16ToFloat(in.b.back());
  }
  return in;
}

std::vector<uint16_t> Rounded(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(FloatToBf16(f));
  return out;
}

// The bfloat16 kernels do the float32 kernels' arithmetic on the widened
// values and round what they store: on bfloat16-exact inputs, each stored
// element is the float32 result rounded (with add, round(y + v)), and each
// sum is the float32 sum.
TEST(Vec, Bf16KernelsGiveTheFloat32KernelsResultsRounded) {
  for (const VecKernels* k : Builds()) {
    for (int64_t n : kLengths) {
      const Bf16Inputs x = Bf16Data(n, 0.4f), dy = Bf16Data(n, 1.3f), x2 = Bf16Data(n, 2.9f), y0 = Bf16Data(n, 2.2f);
      for (bool add : {false, true}) {
        const ActResults<float> f = RunActKernels(k->f32, x.f, dy.f, x2.f, y0.f, add);
        const ActResults<uint16_t> b = RunActKernels(k->bf16, x.b, dy.b, x2.b, y0.b, add);
        ASSERT_EQ(b.stored.size(), f.stored.size());
        for (size_t j = 0; j < f.stored.size(); ++j) {
          EXPECT_EQ(b.stored[j], Rounded(f.stored[j])) << k->isa << " output " << j << " n=" << n << " add=" << add;
        }
        EXPECT_EQ(b.sums, f.sums) << k->isa << " n=" << n;
      }
    }
  }
}

// And they give the same bits on every build, as the float32 ones do.
TEST(Vec, Bf16KernelsGiveTheSameBitsOnEveryBuild) {
  for (int64_t n : kLengths) {
    const Bf16Inputs x = Bf16Data(n, 0.7f), dy = Bf16Data(n, 1.9f), x2 = Bf16Data(n, 0.2f), y0 = Bf16Data(n, 3.1f);
    for (bool add : {false, true}) {
      const ActResults<uint16_t> want = RunActKernels(cpu::VecFor("sse2")->bf16, x.b, dy.b, x2.b, y0.b, add);
      for (const VecKernels* k : Builds()) {
        EXPECT_TRUE(RunActKernels(k->bf16, x.b, dy.b, x2.b, y0.b, add) == want) << k->isa << " n=" << n;
      }
    }
  }
}

// The column kernels (channels-last rows) against the contiguous kernels of
// the same build run on each column copied out: the same bits, for sums
// (16 lanes of rows), affine and its gradient, with add, in place, with
// rows `ld` apart, across the 64-channel blocks and vector tails.
template <typename T>
std::vector<T> Column(const std::vector<T>& x, int64_t rows, int64_t ld, int64_t j) {
  std::vector<T> c(rows);
  for (int64_t r = 0; r < rows; ++r) c[r] = x[r * ld + j];
  return c;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <typename T>
void CheckColumnKernels(const cpu::ActKernels<T>& v, const std::vector<T>& x, const std::vector<T>& dy,
                        const std::vector<T>& y0, int64_t rows, int64_t cols, int64_t ld, const std::string& what) {
  std::vector<float> m(cols), a(cols), b(cols), kk(cols), c(cols), q(cols);
  for (int64_t j = 0; j < cols; ++j) {
    m[j] = 0.05f * (j % 5) - 0.1f, a[j] = 1.37f - 0.1f * (j % 7), b[j] = -0.21f + 0.03f * (j % 11);
    kk[j] = 0.9f + 0.01f * (j % 3), c[j] = 0.013f * (j % 4), q[j] = 0.07f - 0.02f * (j % 6);
  }
  std::vector<float> sums(cols, -1.f), sqs(cols, -1.f);
  v.col_sum(x.data(), rows, cols, ld, sums.data());
  v.col_sq_dev_sum(x.data(), m.data(), rows, cols, ld, sqs.data());
  for (bool relu : {false, true}) {
    const std::string where = what + " relu=" + std::to_string(relu);
    std::vector<float> sum_g(cols, -1.f), sum_gx(cols, -1.f);
    v.col_affine_grad_sums(dy.data(), x.data(), m.data(), relu, a.data(), b.data(), rows, cols, ld, sum_g.data(),
                           sum_gx.data());
    for (bool add : {false, true}) {
      std::vector<T> y = y0, in_place = x, dx = y0, dx_in_place = dy;
      v.col_affine(x.data(), a.data(), b.data(), relu, y.data(), rows, cols, ld, add);
      v.col_affine(in_place.data(), a.data(), b.data(), relu, in_place.data(), rows, cols, ld, add);
      v.col_affine_grad(dy.data(), x.data(), m.data(), relu, a.data(), b.data(), kk.data(), c.data(), q.data(),
                        dx.data(), rows, cols, ld, add);
      v.col_affine_grad(dx_in_place.data(), x.data(), m.data(), relu, a.data(), b.data(), kk.data(), c.data(), q.data(),
                        dx_in_place.data(), rows, cols, ld, add);
      for (int64_t j = 0; j < cols; ++j) {
        const std::vector<T> xj = Column(x, rows, ld, j), dyj = Column(dy, rows, ld, j);
        std::vector<T> want = Column(y0, rows, ld, j), want_in_place = xj;
        v.affine(xj.data(), a[j], b[j], relu, want.data(), rows, add);
        v.affine(want_in_place.data(), a[j], b[j], relu, want_in_place.data(), rows, add);
        ASSERT_TRUE(SameBits(Column(y, rows, ld, j), want)) << where << " add=" << add << " col_affine column " << j;
        ASSERT_TRUE(SameBits(Column(in_place, rows, ld, j), want_in_place)) << where << " in place, column " << j;
        std::vector<T> want_dx = Column(y0, rows, ld, j), want_dx_in_place = dyj;
        v.affine_grad(dyj.data(), xj.data(), m[j], relu, a[j], b[j], kk[j], c[j], q[j], want_dx.data(), rows, add);
        v.affine_grad(want_dx_in_place.data(), xj.data(), m[j], relu, a[j], b[j], kk[j], c[j], q[j],
                      want_dx_in_place.data(), rows, add);
        ASSERT_TRUE(SameBits(Column(dx, rows, ld, j), want_dx)) << where << " add=" << add << " col_affine_grad " << j;
        ASSERT_TRUE(SameBits(Column(dx_in_place, rows, ld, j), want_dx_in_place)) << where << " in place, " << j;
        if (add) continue;
        float s1 = -2.f, s2 = -2.f;
        v.affine_grad_sums(dyj.data(), xj.data(), m[j], relu, a[j], b[j], rows, &s1, &s2);
        const std::vector<float> got{sum_g[j], sum_gx[j]}, want_sums{s1, s2};
        ASSERT_TRUE(SameBits(got, want_sums)) << where << " col_affine_grad_sums column " << j;
        if (relu) continue;
        const std::vector<float> got2{sums[j], sqs[j]};
        const std::vector<float> want2{v.sum(xj.data(), rows), v.sq_dev_sum(xj.data(), m[j], rows)};
        ASSERT_TRUE(SameBits(got2, want2)) << where << " col_sum, col_sq_dev_sum column " << j;
      }
    }
  }
  // Outside the columns (ld > cols) nothing is written.
  std::vector<T> y = y0;
  v.col_affine(x.data(), a.data(), b.data(), false, y.data(), rows, cols, ld, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = cols; j < ld; ++j) ASSERT_TRUE(SameBits<T>({y[r * ld + j]}, {y0[r * ld + j]})) << what;
  }
}

TEST(Vec, ColumnKernelsGiveTheContiguousKernelsBitsOnEachColumn) {
  int checked = 0;
  for (const VecKernels* k : Builds()) {
    for (int64_t rows : {0, 1, 15, 16, 17, 40, 64, 81, 130}) {  // across the kLanes and 4 kLanes row groups
      for (int64_t cols : {1, 5, 16, 17, 64, 65, 130}) {
        for (int64_t ld : {cols, cols + 3}) {
          const std::string what = std::string(k->isa) + " rows=" + std::to_string(rows) +
                                   " cols=" + std::to_string(cols) + " ld=" + std::to_string(ld);
          const int64_t n = rows * ld;
          CheckColumnKernels(k->f32, Data(n, 0.4f), Data(n, 1.3f), Data(n, 2.2f), rows, cols, ld, what + " float32");
          CheckColumnKernels(k->bf16, Bf16Data(n, 0.4f).b, Bf16Data(n, 1.3f).b, Bf16Data(n, 2.2f).b, rows, cols, ld,
                             what + " bfloat16");
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 9 * 7 * 2);
}

}  // namespace
}  // namespace frugal
