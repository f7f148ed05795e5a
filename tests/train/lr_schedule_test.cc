// Learning-rate schedules against their formulas at chosen iterations.
#include <gtest/gtest.h>

#include <cmath>

#include "frugal/base.h"
#include "frugal/lr_schedule.h"
#include "test_util.h"

namespace frugal {
namespace {

LrScheduleOptions Opts(LrPolicy p) {
  LrScheduleOptions o;
  o.policy = p;
  o.base_lr = 0.1;
  return o;
}

std::string ErrorOf(const LrScheduleOptions& o) {
  try {
    LrSchedule s(o);
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

TEST(LrSchedule, FixedStepMultistep) {
  EXPECT_DOUBLE_EQ(LrSchedule(Opts(LrPolicy::kFixed)).At(12345), 0.1);
  LrScheduleOptions o = Opts(LrPolicy::kStep);
  o.gamma = 0.5;
  o.stepsize = 100;
  LrSchedule step(o);
  EXPECT_DOUBLE_EQ(step.At(0), 0.1);
  EXPECT_DOUBLE_EQ(step.At(99), 0.1);
  EXPECT_DOUBLE_EQ(step.At(100), 0.05);
  EXPECT_DOUBLE_EQ(step.At(350), 0.1 * 0.125);
  o = Opts(LrPolicy::kMultiStep);
  o.stepvalues = {10, 30, 60};
  LrSchedule multi(o);  // gamma 0.1
  EXPECT_DOUBLE_EQ(multi.At(9), 0.1);
  EXPECT_DOUBLE_EQ(multi.At(10), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(multi.At(45), 0.1 * 0.01);
  EXPECT_NEAR(multi.At(1000), 0.1 * 1e-3, 1e-15);
}

TEST(LrSchedule, ExpInvPoly) {
  LrScheduleOptions o = Opts(LrPolicy::kExp);
  o.gamma = 0.99;
  EXPECT_DOUBLE_EQ(LrSchedule(o).At(7), 0.1 * std::pow(0.99, 7));
  o = Opts(LrPolicy::kInv);
  o.gamma = 1e-4;
  o.power = 0.75;
  EXPECT_DOUBLE_EQ(LrSchedule(o).At(5000), 0.1 * std::pow(1 + 1e-4 * 5000, -0.75));
  o = Opts(LrPolicy::kPoly);
  o.power = 2;
  o.schedule_iters = 1000;
  LrSchedule poly(o);
  EXPECT_DOUBLE_EQ(poly.At(0), 0.1);
  EXPECT_DOUBLE_EQ(poly.At(250), 0.1 * 0.75 * 0.75);
  EXPECT_DOUBLE_EQ(poly.At(1000), 0.0);
  EXPECT_DOUBLE_EQ(poly.At(2000), 0.0);  // clamped past schedule_iters
}

TEST(LrSchedule, Cosine) {
  LrScheduleOptions o = Opts(LrPolicy::kCosine);
  o.schedule_iters = 100;
  o.min_lr = 0.001;
  LrSchedule cos(o);
  EXPECT_DOUBLE_EQ(cos.At(0), 0.1);
  EXPECT_NEAR(cos.At(50), 0.001 + 0.099 * 0.5, 1e-15);
  EXPECT_NEAR(cos.At(25), 0.001 + 0.099 * (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  EXPECT_NEAR(cos.At(100), 0.001, 1e-15);
  EXPECT_NEAR(cos.At(150), 0.001, 1e-15);
}

TEST(LrSchedule, LinearWarmupMeetsTheSchedule) {
  LrScheduleOptions o = Opts(LrPolicy::kCosine);
  o.schedule_iters = 100;
  o.warmup_iters = 10;
  o.warmup_start = 0.01;
  LrSchedule s(o);
  const double at10 = 0.1 * (1 + std::cos(M_PI * 0.1)) / 2;
  EXPECT_DOUBLE_EQ(s.At(0), 0.01);
  EXPECT_NEAR(s.At(4), 0.01 + (at10 - 0.01) * 0.4, 1e-15);
  EXPECT_DOUBLE_EQ(s.At(10), at10);
  EXPECT_DOUBLE_EQ(s.At(50), 0.05);  // the schedule counts from 0, not from the warm-up's end
  o = Opts(LrPolicy::kFixed);
  o.warmup_iters = 4;
  EXPECT_DOUBLE_EQ(LrSchedule(o).At(1), 0.025);
  EXPECT_EQ(LrSchedule(o).ToString(), "fixed(lr=0.1), warmup 4 from 0");
}

TEST(LrSchedule, MissingParametersAreErrors) {
  EXPECT_NE(ErrorOf(Opts(LrPolicy::kStep)).find("step needs stepsize > 0"), std::string::npos);
  EXPECT_NE(ErrorOf(Opts(LrPolicy::kMultiStep)).find("at least one stepvalue"), std::string::npos);
  LrScheduleOptions o = Opts(LrPolicy::kMultiStep);
  o.stepvalues = {30, 10};
  EXPECT_NE(ErrorOf(o).find("stepvalues must increase, got 30 then 10"), std::string::npos) << ErrorOf(o);
  EXPECT_NE(ErrorOf(Opts(LrPolicy::kCosine)).find("cosine needs lr_schedule_iters > 0"), std::string::npos);
}

TEST(LrSchedule, FromConfigUsesTheRunLengthForMaxIter) {
  config::Solver s;
  s.set_lr(0.2f);
  s.set_lr_policy(config::Solver::POLY);
  s.set_power(1);
  LrSchedule sched = LrScheduleFromConfig(s, 400, "net.prototxt");
  EXPECT_EQ(sched.options().schedule_iters, 400);
  EXPECT_NEAR(sched.At(100), 0.2 * 0.75, 1e-7);
  s.set_lr_policy(config::Solver::STEP);
  try {
    LrScheduleFromConfig(s, 400, "net.prototxt");
    FAIL() << "step without stepsize accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("net.prototxt: solver: lr policy step needs stepsize"), std::string::npos)
        << e.what();
  }
  // A negative length was once read as "the run's"; numbers that are not
  // numbers or negative are refused.
  s.set_lr_policy(config::Solver::POLY);
  s.set_lr_schedule_iters(-5);
  test::ExpectError([&] { LrScheduleFromConfig(s, 400, "net.prototxt"); },
                    {"net.prototxt: solver: lr_schedule_iters must be 0 (the run's updates) or more, got -5"});
  s.set_lr_schedule_iters(0);
  s.set_min_lr(-1);
  test::ExpectError([&] { LrScheduleFromConfig(s, 400, "net.prototxt"); }, {"min_lr must be a non-negative number"});
  s.set_min_lr(0);
  s.set_gamma(std::nanf(""));
  test::ExpectError([&] { LrScheduleFromConfig(s, 400, "net.prototxt"); }, {"gamma must be a non-negative number"});
}

}  // namespace
}  // namespace frugal
