// Learning-rate schedules (formulas in frugal/lr_schedule.h).
#include "frugal/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "frugal/base.h"

namespace frugal {

const char* LrPolicyName(LrPolicy p) {
  switch (p) {
    case LrPolicy::kFixed: return "fixed";
    case LrPolicy::kStep: return "step";
    case LrPolicy::kMultiStep: return "multistep";
    case LrPolicy::kExp: return "exp";
    case LrPolicy::kInv: return "inv";
    case LrPolicy::kPoly: return "poly";
    case LrPolicy::kCosine: return "cosine";
  }
  return "?";
}

LrSchedule::LrSchedule(const LrScheduleOptions& o) : o_(o) {
  const char* name = LrPolicyName(o.policy);
  FRUGAL_REQUIRE(o.policy != LrPolicy::kStep || o.stepsize > 0, "lr policy step needs stepsize > 0, got ", o.stepsize);
  FRUGAL_REQUIRE(o.policy != LrPolicy::kMultiStep || !o.stepvalues.empty(),
                 "lr policy multistep needs at least one stepvalue");
  for (size_t i = 1; i < o.stepvalues.size(); ++i)
    FRUGAL_REQUIRE(o.stepvalues[i] > o.stepvalues[i - 1], "stepvalues must increase, got ", o.stepvalues[i - 1],
                   " then ", o.stepvalues[i]);
  FRUGAL_REQUIRE((o.policy != LrPolicy::kPoly && o.policy != LrPolicy::kCosine) || o.schedule_iters > 0, "lr policy ",
                 name, " needs lr_schedule_iters > 0, got ", o.schedule_iters);
  FRUGAL_REQUIRE(o.warmup_iters >= 0, "warmup_iters must not be negative, got ", o.warmup_iters);
  FRUGAL_REQUIRE(o.base_lr >= 0 && std::isfinite(o.base_lr), "lr must be a non-negative number, got ", o.base_lr);
  FRUGAL_REQUIRE(o.min_lr >= 0 && std::isfinite(o.min_lr), "min_lr must be a non-negative number, got ", o.min_lr);
  FRUGAL_REQUIRE(o.gamma >= 0 && std::isfinite(o.gamma), "gamma must be a non-negative number, got ", o.gamma);
  FRUGAL_REQUIRE(std::isfinite(o.power), "power must be a number, got ", o.power);
  FRUGAL_REQUIRE(o.policy != LrPolicy::kPoly || o.power >= 0,
                 "lr policy poly needs power >= 0 (a negative power divides by zero where the schedule ends), got ",
                 o.power);
  FRUGAL_REQUIRE(o.warmup_start >= 0 && std::isfinite(o.warmup_start),
                 "warmup_start must be a non-negative number, got ", o.warmup_start);
}

double LrSchedule::Scheduled(int64_t it) const {
  switch (o_.policy) {
    case LrPolicy::kFixed: return o_.base_lr;
    case LrPolicy::kStep: return o_.base_lr * std::pow(o_.gamma, static_cast<double>(it / o_.stepsize));
    case LrPolicy::kMultiStep: {
      auto k = std::upper_bound(o_.stepvalues.begin(), o_.stepvalues.end(), it) - o_.stepvalues.begin();
      return o_.base_lr * std::pow(o_.gamma, static_cast<double>(k));
    }
    case LrPolicy::kExp: return o_.base_lr * std::pow(o_.gamma, static_cast<double>(it));
    case LrPolicy::kInv: return o_.base_lr * std::pow(1.0 + o_.gamma * static_cast<double>(it), -o_.power);
    case LrPolicy::kPoly: {
      double frac = static_cast<double>(std::min(it, o_.schedule_iters)) / static_cast<double>(o_.schedule_iters);
      return o_.base_lr * std::pow(1.0 - frac, o_.power);
    }
    case LrPolicy::kCosine: {
      double frac = static_cast<double>(std::min(it, o_.schedule_iters)) / static_cast<double>(o_.schedule_iters);
      return o_.min_lr + (o_.base_lr - o_.min_lr) * (1.0 + std::cos(M_PI * frac)) / 2.0;
    }
  }
  return o_.base_lr;
}

double LrSchedule::At(int64_t it) const {
  if (it < o_.warmup_iters) {
    double target = Scheduled(o_.warmup_iters);
    return o_.warmup_start + (target - o_.warmup_start) * static_cast<double>(it) / o_.warmup_iters;
  }
  return Scheduled(it);
}

int64_t LrSchedule::Length() const {
  return o_.policy == LrPolicy::kPoly || o_.policy == LrPolicy::kCosine ? o_.schedule_iters : 0;
}

std::string LrSchedule::ToString() const {
  std::string s = Fmt(LrPolicyName(o_.policy), "(lr=", o_.base_lr);
  switch (o_.policy) {
    case LrPolicy::kFixed: break;
    case LrPolicy::kStep: s += Fmt(", gamma=", o_.gamma, ", stepsize=", o_.stepsize); break;
    case LrPolicy::kMultiStep: {
      s += Fmt(", gamma=", o_.gamma, ", stepvalues=");
      for (size_t i = 0; i < o_.stepvalues.size(); ++i) s += Fmt(i ? "/" : "", o_.stepvalues[i]);
      break;
    }
    case LrPolicy::kExp: s += Fmt(", gamma=", o_.gamma); break;
    case LrPolicy::kInv: s += Fmt(", gamma=", o_.gamma, ", power=", o_.power); break;
    case LrPolicy::kPoly: s += Fmt(", power=", o_.power, ", lr_schedule_iters=", o_.schedule_iters); break;
    case LrPolicy::kCosine: s += Fmt(", lr_schedule_iters=", o_.schedule_iters, ", min_lr=", o_.min_lr); break;
  }
  s += ")";
  if (o_.warmup_iters > 0) s += Fmt(", warmup ", o_.warmup_iters, " from ", o_.warmup_start);
  return s;
}

LrSchedule LrScheduleFromConfig(const config::Solver& s, int64_t total_iters, const std::string& path) {
  LrScheduleOptions o;
  switch (s.lr_policy()) {
    case config::Solver::FIXED: o.policy = LrPolicy::kFixed; break;
    case config::Solver::STEP: o.policy = LrPolicy::kStep; break;
    case config::Solver::MULTISTEP: o.policy = LrPolicy::kMultiStep; break;
    case config::Solver::EXP: o.policy = LrPolicy::kExp; break;
    case config::Solver::INV: o.policy = LrPolicy::kInv; break;
    case config::Solver::POLY: o.policy = LrPolicy::kPoly; break;
    case config::Solver::COSINE: o.policy = LrPolicy::kCosine; break;
  }
  o.base_lr = s.lr();
  o.gamma = s.gamma();
  o.stepsize = s.stepsize();
  o.stepvalues.assign(s.stepvalue().begin(), s.stepvalue().end());
  o.power = s.power();
  FRUGAL_REQUIRE(s.lr_schedule_iters() >= 0, path,
                 ": solver: lr_schedule_iters must be 0 (the run's updates) or more, got ", s.lr_schedule_iters());
  o.schedule_iters = s.lr_schedule_iters() > 0 ? s.lr_schedule_iters() : total_iters;
  o.min_lr = s.min_lr();
  o.warmup_iters = s.warmup_iters();
  o.warmup_start = s.warmup_start();
  try {
    return LrSchedule(o);
  } catch (const Error& e) { throw Error(Fmt(path, ": solver: ", e.what())); }
}

}  // namespace frugal
