// Learning-rate schedules. At iteration `it` (0 for the first update;
// Caffe's definitions for the first five):
//
//   fixed      lr
//   step       lr * gamma^floor(it / stepsize)
//   multistep  lr * gamma^k,  k = how many stepvalues are <= it
//   exp        lr * gamma^it
//   inv        lr * (1 + gamma * it)^(-power)
//   poly       lr * (1 - min(it, n) / n)^power
//   cosine     min_lr + (lr - min_lr) * (1 + cos(pi * min(it, n) / n)) / 2
//              (SGDR, Loshchilov & Hutter, without restarts)
// where n is schedule_iters (solver.lr_schedule_iters), the schedule's length.
//
// With warmup_iters > 0 the rate rises linearly from warmup_start to the
// schedule's own value at warmup_iters:
//   it < warmup_iters:  warmup_start + (sched(warmup_iters) - warmup_start) * it / warmup_iters
// and follows the schedule from there; the schedule keeps counting from 0
// (stepvalues and schedule_iters are absolute iterations).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal.pb.h"

namespace frugal {

enum class LrPolicy { kFixed, kStep, kMultiStep, kExp, kInv, kPoly, kCosine };
const char* LrPolicyName(LrPolicy p);

struct LrScheduleOptions {
  LrPolicy policy = LrPolicy::kFixed;
  double base_lr = 0.01;
  double gamma = 0.1;
  int64_t stepsize = 0;             // step
  std::vector<int64_t> stepvalues;  // multistep, increasing
  double power = 1;                 // inv, poly
  int64_t schedule_iters = 0;       // poly, cosine: the config's lr_schedule_iters
  double min_lr = 0;                // cosine
  int64_t warmup_iters = 0;
  double warmup_start = 0;
};

class LrSchedule {
 public:
  // Throws Error if a parameter the policy needs is missing or out of range
  // (step without stepsize > 0, stepvalues not increasing, poly or cosine
  // without schedule_iters > 0, negative warm-up).
  explicit LrSchedule(const LrScheduleOptions& o);
  double At(int64_t it) const;
  // "cosine(lr=0.1, lr_schedule_iters=1000, min_lr=0), warmup 100 from 0" for the log.
  std::string ToString() const;
  const LrScheduleOptions& options() const { return o_; }
  // The updates a POLY or COSINE schedule runs over (schedule_iters); 0 for
  // the other policies, which have no end.
  int64_t Length() const;

 private:
  double Scheduled(int64_t it) const;  // without warm-up
  LrScheduleOptions o_;
};

// The solver's schedule fields; lr_schedule_iters 0 becomes total_iters (the run's
// length). Errors name `path` and the field.
LrSchedule LrScheduleFromConfig(const config::Solver& s, int64_t total_iters, const std::string& path);

}  // namespace frugal
