// Validation on data.val: every val_interval updates, or at every epoch's
// end (val_interval 0), and at the end of a run whose last update fell
// between two intervals. Its metrics go to every observer.
#include "train/observer.h"
#include "train/step.h"

namespace frugal {
namespace {

class Validation : public Observer {
 public:
  Validation(Feed* feed, DataIter* val) : feed_(feed), val_(val) {}

  void OnUpdate(Run& r) override {
    if (r.sc.val_interval() <= 0 || r.updates() % r.sc.val_interval() != 0) return;
    r.s.engine->WaitAll();
    Validate(r, /*epoch_end=*/false);
  }

  void OnEpochEnd(Run& r, const MetricValues&, double) override {
    const bool last_epoch = r.done || r.epoch + 1 == r.sc.epochs();
    if (r.sc.val_interval() == 0 || (last_epoch && validated_at_ != r.iter)) Validate(r, /*epoch_end=*/true);
  }

 private:
  void Validate(Run& r, bool epoch_end) {
    validated_at_ = r.iter;
    r.AverageAcrossRanks();
    const MetricValues m = r.Reduce(Evaluate(&r.s, feed_, val_, r.sc));
    r.progress.Clear();
    if (epoch_end) r.val = m;
    r.Each([&](Observer& o) { o.OnValidation(r, m, epoch_end); });
    if (m.Has("accuracy")) r.last_acc = m.Get("accuracy");
  }

  Feed* feed_;
  DataIter* val_;
  int64_t validated_at_ = -1;  // the iteration of the last validation
};

}  // namespace

std::unique_ptr<Observer> MakeValidation(Feed* feed, DataIter* val) { return std::make_unique<Validation>(feed, val); }

}  // namespace frugal
