// SIGINT / SIGTERM: stop after the step. The ranks of a data-parallel run
// agree to stop at the same step, checking every kStopCheck updates (a
// one-number all-reduce), so that none waits in a collective the others
// never reach.
#include <glog/logging.h>

#include <atomic>
#include <csignal>

#include "train/observer.h"

namespace frugal {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop = true; }

class SignalStop : public Observer {
 public:
  SignalStop() {
    g_stop = false;
    old_int_ = std::signal(SIGINT, OnStopSignal);
    old_term_ = std::signal(SIGTERM, OnStopSignal);
  }

  void OnBatchEnd(Run& r) override {
    if (!r.dp) {
      r.stop = r.stop || g_stop;  // or an observer before this one asked (TrainOptions::on_event)
      return;
    }
    constexpr int64_t kStopCheck = 10;
    if (r.updates() % kStopCheck != 0 || !r.updated()) return;
    r.stop = r.dp->Sum(g_stop ? 1 : 0) > 0;
  }

  void OnStop(Run& r, float) override {
    LOG_IF(WARNING, !r.opts.quiet && g_stop) << "stopped by a signal after " << r.updates() << " updates";
  }

  void OnEnd(Run&) override {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }

 private:
  void (*old_int_)(int) = nullptr;
  void (*old_term_)(int) = nullptr;
};

}  // namespace

std::unique_ptr<Observer> MakeSignalStop() { return std::make_unique<SignalStop>(); }

}  // namespace frugal
