// Initializer specs: parsing, errors, and the statistics of each fill over a
// large tensor with a fixed seed.
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/init.h"

namespace frugal {
namespace {

struct Moments {
  double mean = 0, var = 0;
};

Moments Fill(const std::string& spec, Shape shape, uint64_t seed = 7) {
  Tensor t = Tensor::Empty(shape);
  Rng rng(seed);
  InitParam(spec, "w", &t, &rng);
  Moments m;
  for (int64_t i = 0; i < t.size(); ++i) m.mean += t.f()[i];
  m.mean /= t.size();
  for (int64_t i = 0; i < t.size(); ++i) m.var += (t.f()[i] - m.mean) * (t.f()[i] - m.mean);
  m.var /= t.size();
  return m;
}

// Mean within 4 standard errors of 0 (or `mean`), variance within 2%.
void ExpectMoments(const std::string& spec, Shape shape, double var, double mean = 0) {
  Moments m = Fill(spec, shape);
  double n = static_cast<double>(shape.Size());
  EXPECT_NEAR(m.mean, mean, 4 * std::sqrt(var / n)) << spec;
  EXPECT_NEAR(m.var, var, 0.02 * var) << spec;
}

std::string ErrorOf(const std::string& spec) {
  try {
    ParseInitSpec(spec, "parameter 'fc_weight'");
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

// A weight of 500 outputs, 200 inputs and a 2x2 kernel: fan_in 800, fan_out 2000.
const Shape kConv{500, 200, 2, 2};

TEST(Init, XavierVariants) {
  ExpectMoments("xavier", kConv, 3.0 / 1400 / 3);  // uniform, avg, 3
  ExpectMoments("xavier(gaussian,avg,3)", kConv, 3.0 / 1400);
  ExpectMoments("xavier(uniform, in, 6)", kConv, 6.0 / 800 / 3);
  ExpectMoments("xavier(out,gaussian)", kConv, 3.0 / 2000);  // any order
  ExpectMoments("msra", kConv, 2.0 / 800);
  ExpectMoments("msra(out)", kConv, 2.0 / 2000);
}

TEST(Init, UniformNormalConstant) {
  const Shape big{400000};
  ExpectMoments("uniform(0.07)", big, 0.07 * 0.07 / 3);
  ExpectMoments("uniform(1,3)", big, 4.0 / 12, 2.0);
  ExpectMoments("normal(0.01)", big, 1e-4);
  ExpectMoments("normal(5, 0.5)", big, 0.25, 5.0);
  for (const char* spec : {"constant(0.5)", "zero", "one"}) {
    Tensor t = Tensor::Empty(Shape{17});
    Rng rng(1);
    InitParam(spec, "b", &t, &rng);
    float want = std::string(spec) == "one" ? 1.f : std::string(spec) == "zero" ? 0.f : 0.5f;
    for (int i = 0; i < 17; ++i) ASSERT_EQ(t.f()[i], want) << spec;
  }
}

TEST(Init, UniformStaysInItsRange) {
  Tensor t = Tensor::Empty(Shape{10000});
  Rng rng(3);
  InitParam("uniform(-0.5,0.25)", "w", &t, &rng);
  for (int64_t i = 0; i < t.size(); ++i) ASSERT_TRUE(t.f()[i] >= -0.5f && t.f()[i] <= 0.25f) << t.f()[i];
}

TEST(Init, SameSeedSameValues) {
  Tensor a = Tensor::Empty(Shape{64, 32}), b = Tensor::Empty(Shape{64, 32});
  Rng ra(11), rb(11);
  InitParam("xavier(gaussian,in,2)", "w", &a, &ra);
  InitParam("xavier(gaussian,in,2)", "w", &b, &rb);
  for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a.f()[i], b.f()[i]);
}

TEST(Init, SpecsRoundTripToCanonicalText) {
  EXPECT_EQ(ParseInitSpec("xavier", "p").ToString(), "xavier(uniform,avg,3)");
  EXPECT_EQ(ParseInitSpec(" msra ", "p").ToString(), "msra(in)");
  EXPECT_EQ(ParseInitSpec("uniform(0.07)", "p").ToString(), "uniform(-0.07,0.07)");
  EXPECT_EQ(ParseInitSpec("zero", "p").ToString(), "constant(0)");
}

TEST(Init, BadSpecsAreClearErrors) {
  std::string e = ErrorOf("xavier(gaussian,avg");
  EXPECT_NE(e.find("parameter 'fc_weight': bad initializer 'xavier(gaussian,avg': missing ')'"), std::string::npos)
      << e;
  EXPECT_NE(e.find("forms: xavier("), std::string::npos) << e;
  EXPECT_NE(ErrorOf("gaussian").find("unknown initializer 'gaussian'"), std::string::npos);
  EXPECT_NE(ErrorOf("xavier(bogus)").find("'bogus' is not uniform, gaussian, in, out, avg or a number"),
            std::string::npos);
  EXPECT_NE(ErrorOf("xavier(in,out)").find("factor type is given twice"), std::string::npos);
  EXPECT_NE(ErrorOf("xavier(-1)").find("magnitude must be positive"), std::string::npos);
  EXPECT_NE(ErrorOf("normal(abc)").find("'abc' is not a finite number"), std::string::npos);
  EXPECT_NE(ErrorOf("normal(-1)").find("sigma must not be negative"), std::string::npos);
  EXPECT_NE(ErrorOf("uniform(-1)").find("range is empty"), std::string::npos);
  EXPECT_NE(ErrorOf("constant()").find("constant takes one value"), std::string::npos);
  EXPECT_NE(ErrorOf("zero(1)").find("zero takes no arguments"), std::string::npos);
  EXPECT_NE(ErrorOf("msra(gaussian)").find("msra takes an optional factor type"), std::string::npos);
  EXPECT_NE(ErrorOf("normal(0.1,)").find("empty argument"), std::string::npos);
  // Weights are float32: a range beyond it would make them infinite.
  EXPECT_NE(ErrorOf("uniform(1e39)").find("'1e39' is beyond float32's range (3.4e38)"), std::string::npos);
  EXPECT_NE(ErrorOf("xavier(1e39)").find("within float32's range"), std::string::npos);
}

TEST(Rng, SaveAndLoadContinueTheSameStream) {
  Rng a(42);
  for (int i = 0; i < 1000; ++i) a.Next();
  std::string state = a.Save();
  std::vector<double> expect;
  for (int i = 0; i < 5; ++i) expect.push_back(a.Normal());
  Rng b(1);
  b.Load(state);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.Normal(), expect[i]);
  EXPECT_THROW(b.Load("12 34"), Error);
  EXPECT_THROW(b.Load(state + " 5"), Error);
}

}  // namespace
}  // namespace frugal
