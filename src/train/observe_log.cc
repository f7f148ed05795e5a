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
  void OnWindow(Run& r, const MetricValues& m, double speed) override {
    std::ostringstream rate;
    if (speed >= 0) rate << std::fixed << std::setprecision(2) << speed << " samples/sec";
    if (speed >= 0 && r.tokens_per_sample > 0) rate << " (" << speed * r.tokens_per_sample << " tokens/sec)";
    LOG(INFO) << Fmt("Epoch[", r.epoch, "] Batch [", r.window_first, "-", r.batch,
                     "]  Speed: ", speed >= 0 ? rate.str() : "- samples/sec", "  window: ", m.ToString(), "  lr=")
              << std::setprecision(6) << r.rate;
  }

  void OnValidation(Run& r, const MetricValues& m, bool) override {
    LOG(INFO) << "Epoch[" << r.epoch << "] " << m.ToString("Validation-");
  }

  void OnEpochEnd(Run& r, const MetricValues& train, double secs) override {
    LOG(INFO) << "Epoch[" << r.epoch << "] " << train.ToString("Train-");
    LOG(INFO) << "Epoch[" << r.epoch << "] Time cost=" << std::setprecision(3) << secs;
  }
};

}  // namespace

std::unique_ptr<Observer> MakeLogLines() { return std::make_unique<LogLines>(); }

}  // namespace frugal
