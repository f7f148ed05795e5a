// MXNet's log lines: a window of `display` batches, a validation, an epoch.
#include <glog/logging.h>

#include <iomanip>
#include <sstream>

#include "train/observer.h"

namespace frugal {
namespace {

class LogLines : public Observer {
 public:
  // The window's metrics (not the epoch's so far: the live line shows those).
  void OnWindow(Run& r, const Window& w) override {
    const double speed = w.samples_per_s;
    std::ostringstream rate;
    if (speed >= 0) rate << std::fixed << std::setprecision(2) << speed << " samples/sec";
    if (speed >= 0 && r.tokens_per_sample > 0) rate << " (" << speed * r.tokens_per_sample << " tokens/sec)";
    LOG(INFO) << Fmt("Epoch[", r.epoch, "] Batch [", w.first, "-", r.batch,
                     "]  Speed: ", speed >= 0 ? rate.str() : "- samples/sec", "  window: ", w.metrics.ToString(),
                     "  lr=")
              << std::setprecision(6) << w.lr;
  }

  // An epoch's validation is logged after its training metrics and time.
  void OnValidation(Run& r, const MetricValues& m, bool epoch_end) override {
    if (!epoch_end) LogValidation(r, m);
  }

  void OnEpochEnd(Run& r, const EpochEnd& e) override {
    LOG(INFO) << "Epoch[" << r.epoch << "] " << e.train.ToString("Train-");
    LOG(INFO) << "Epoch[" << r.epoch << "] Time cost=" << std::setprecision(3) << e.secs;
    if (e.val) LogValidation(r, *e.val);
  }

 private:
  static void LogValidation(const Run& r, const MetricValues& m) {
    LOG(INFO) << "Epoch[" << r.epoch << "] " << m.ToString("Validation-");
  }
};

}  // namespace

std::unique_ptr<Observer> MakeLogLines() { return std::make_unique<LogLines>(); }

}  // namespace frugal
