// Every op through the one harness (tests/ops/op_harness.h).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/op_test_util.h"

namespace frugal::test {
namespace {

TEST(Ops, Relu) {
  OpCase c;
  c.op = "relu";
  c.in_shapes = {Shape{4, 7}};
  c.differentiable = {true};
  c.reference = [](const Values& in) {
    Values out{in[0]};
    for (float& v : out[0]) v = std::max(v, 0.f);
    return out;
  };
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2);  // relu and its gradient both run in place
}

TEST(Ops, ReluKinkIsSkippedNotFailed) {
  OpCase c;
  c.op = "relu";
  c.in_shapes = {Shape{8}};
  c.differentiable = {true};
  c.fill = [](int, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = i % 2 ? 0.f : 0.5f;  // half the points sit on the kink
  };
  c.reference = [](const Values& in) {
    Values out{in[0]};
    for (float& v : out[0]) v = std::max(v, 0.f);
    return out;
  };
  OpReport r = CheckOp(c);
  EXPECT_EQ(r.kinks_skipped, 4);
  EXPECT_EQ(r.grads_checked, 4);
}

Values FcReference(const Values& in, int64_t n, int64_t k, int64_t m, bool bias) {
  Values out{std::vector<float>(n * m)};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = bias ? in[2][j] : 0;
      for (int64_t t = 0; t < k; ++t) s += static_cast<double>(in[0][i * k + t]) * in[1][j * k + t];
      out[0][i * m + j] = static_cast<float>(s);
    }
  return out;
}

TEST(Ops, FullyConnectedFlattens) {
  OpCase c;
  c.op = "fully_connected";
  c.attrs = {{"num_hidden", "5"}};
  c.in_shapes = {Shape{3, 2, 2, 2}, Shape{5, 8}, Shape{5}};
  c.differentiable = {true, true, true};
  c.reference = [](const Values& in) { return FcReference(in, 3, 8, 5, true); };
  ExpectCovered(CheckOp(c));
}

TEST(Ops, FullyConnectedNoBiasNoFlatten) {
  OpCase c;
  c.op = "fully_connected";
  c.attrs = {{"num_hidden", "4"}, {"no_bias", "true"}, {"flatten", "false"}};
  c.in_shapes = {Shape{2, 3, 6}, Shape{4, 6}};
  c.differentiable = {true, true};
  c.reference = [](const Values& in) { return FcReference(in, 6, 6, 4, false); };
  ExpectCovered(CheckOp(c));
}

TEST(Ops, Flatten) {
  OpCase c;
  c.op = "flatten";
  c.in_shapes = {Shape{2, 3, 4}};
  c.differentiable = {true};
  c.reference = [](const Values& in) { return in; };
  OpReport r = CheckOp(c);
  ExpectCovered(r);
  EXPECT_GE(r.inplace_checked, 2);
}

TEST(Ops, Reshape) {
  OpCase c;
  c.op = "reshape";
  c.attrs = {{"shape", "(0, -1, 2)"}};
  c.in_shapes = {Shape{2, 3, 4}};
  c.differentiable = {true};
  c.reference = [](const Values& in) { return in; };
  ExpectCovered(CheckOp(c));
}

TEST(Ops, AddN) {
  OpCase c;
  c.op = "add_n";
  c.attrs = {{"num_args", "3"}};
  c.in_shapes = {Shape{5, 3}, Shape{5, 3}, Shape{5, 3}};
  c.differentiable = {true, true, true};
  c.reference = [](const Values& in) {
    Values out{in[0]};
    for (size_t i = 0; i < out[0].size(); ++i) out[0][i] += in[1][i] + in[2][i];
    return out;
  };
  ExpectCovered(CheckOp(c));
}

TEST(Ops, SoftmaxCrossEntropy) {
  OpCase c;
  c.op = "softmax_cross_entropy";
  c.in_shapes = {Shape{4, 6}, Shape{4}};
  c.differentiable = {true, false};
  c.fill = [](int k, std::vector<float>* v) {
    for (size_t i = 0; i < v->size(); ++i) (*v)[i] = k == 0 ? std::sin(3.f * i) * 2 : static_cast<float>((i * 5) % 6);
  };
  c.reference = [](const Values& in) {
    Values out{std::vector<float>(24)};
    for (int i = 0; i < 4; ++i) {
      double z = 0;
      for (int j = 0; j < 6; ++j) z += std::exp(in[0][i * 6 + j]);
      for (int j = 0; j < 6; ++j) out[0][i * 6 + j] = static_cast<float>(std::exp(in[0][i * 6 + j]) / z);
    }
    return out;
  };
  c.loss = [](const Values& in, const Values& out) { return SceLoss(in, out, -1, "batch"); };
  c.fd_eps = 1e-3;
  ExpectCovered(CheckOp(c));
}

TEST(Ops, SoftmaxCrossEntropyRejectsBadLabel) {
  OpCase c;
  c.op = "softmax_cross_entropy";
  c.in_shapes = {Shape{2, 3}, Shape{2}};
  c.differentiable = {true, false};
  c.fill = [](int k, std::vector<float>* v) {
    if (k == 1) (*v) = {0.f, 3.f};
  };
  c.reference = [](const Values& in) { return Values{}; };
  c.loss = [](const Values& in, const Values& out) { return SceLoss(in, out, -1, "batch"); };
  EXPECT_THROW(CheckOp(c), Error);
}

}  // namespace
}  // namespace frugal::test
