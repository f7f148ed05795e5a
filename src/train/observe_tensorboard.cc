// TensorBoard scalars: the training window's metrics, rate, speed and peak
// memory (every `display` batches and at each epoch's end, however short the
// run); every validation's metrics. The step is the update count.
#include "frugal/tensorboard.h"
#include "train/observer.h"

namespace frugal {
namespace {

class TensorBoard : public Observer {
 public:
  explicit TensorBoard(const std::string& dir) : events_(dir) {}

  void OnWindow(Run& r, const Window& w) override {
    const int64_t step = r.updates();
    const double speed = w.samples_per_s;
    for (const auto& [name, v] : w.metrics.values) events_.AddScalar("train/" + name, v, step);
    events_.AddScalar("train/lr", w.lr, step);
    if (speed >= 0) events_.AddScalar("train/samples_per_s", speed, step);
    if (speed >= 0 && r.tokens_per_sample > 0)
      events_.AddScalar("train/tokens_per_s", speed * r.tokens_per_sample, step);
    events_.AddScalar("memory/peak_bytes", static_cast<double>(MemoryAccounting::Get().Peak(r.s.dev)), step);
    events_.Flush();
  }

  void OnValidation(Run& r, const MetricValues& m, bool) override {
    for (const auto& [name, v] : m.values) events_.AddScalar("val/" + name, v, r.updates());
  }

 private:
  EventWriter events_;
};

}  // namespace

std::unique_ptr<Observer> MakeTensorBoard(const std::string& dir) { return std::make_unique<TensorBoard>(dir); }

}  // namespace frugal
