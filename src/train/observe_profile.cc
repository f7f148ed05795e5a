// --profile: a Chrome trace of the ops of the first profile_steps steps,
// recorded through Executor::SetTrace (and a data-parallel run's exchanges,
// DataParallel::SetTrace) and written at the end.
#include <glog/logging.h>

#include "frugal/trace.h"
#include "train/observer.h"

namespace frugal {
namespace {

class Profile : public Observer {
 public:
  explicit Profile(Run& r) {
    r.s.train->SetTrace(&trace_);
    if (r.dp) r.dp->SetTrace(&trace_);
  }

  void OnBatchBegin(Run& r) override {
    if (r.updates() != r.opts.profile_steps) return;
    r.s.train->SetTrace(nullptr);
    if (r.dp) r.dp->SetTrace(nullptr);
  }

  void OnEnd(Run& r) override {
    trace_.Write(r.opts.profile);
    LOG_IF(INFO, !r.opts.quiet) << "trace of the first " << r.opts.profile_steps << " steps in " << r.opts.profile;
  }

 private:
  TraceWriter trace_;
};

}  // namespace

std::unique_ptr<Observer> MakeProfile(Run& r) { return std::make_unique<Profile>(r); }

}  // namespace frugal
