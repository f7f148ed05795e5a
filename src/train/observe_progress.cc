// The live progress line: the epoch's metrics so far, its speed, and the
// time left at that speed.
#include <algorithm>

#include "train/observer.h"

namespace frugal {
namespace {

class ProgressObserver : public Observer {
 public:
  void OnMetrics(Run& r, float lr) override {
    if (r.batch == r.first_batch) return;
    const double secs_per_batch = Seconds(r.epoch_start) / static_cast<double>(r.batch - r.first_batch);
    int64_t left = (r.batches - r.batch) + (r.sc.epochs() - r.epoch - 1) * r.batches;
    if (r.sc.max_iters() > 0) left = std::min(left, r.sc.max_iters() - r.iter);
    r.progress.Show({r.epoch, r.sc.epochs(), r.batch, r.batches, r.epoch_m.count() / Seconds(r.epoch_start),
                     r.tokens_per_sample, r.epoch_m.ToString(), lr, static_cast<double>(left) * secs_per_batch});
  }
};

}  // namespace

std::unique_ptr<Observer> MakeProgressLine() { return std::make_unique<ProgressObserver>(); }

}  // namespace frugal
