// What a batch pushes to the engine. Training (Step): the data-parallel
// gradient exchange, forward and backward, the combination of iter_size
// micro-batches' gradients with clipping, and one optimizer update per
// parameter (the session's accumulate and update executors: ops like any
// other), each update waiting only for its own gradient (and, with
// clipping, for the rescale_clip node over all of them). Evaluation
// (Evaluate): load, forward, metrics.
#pragma once

#include <string>
#include <vector>

#include "frugal/dist.h"
#include "train/feed.h"
#include "train/session.h"

namespace frugal {

class Step {
 public:
  // dp: null unless data-parallel.
  Step(Session* s, DataParallel* dp, const config::Solver& sc);
  // Pushes batch `iter` (counting every micro-batch). After the last
  // micro-batch of an update, also pushes the updates at rate lr (with
  // --shard optimizer, of this rank's slices, then the broadcasts that make
  // every parameter whole).
  void Push(int64_t iter, float lr);
  // After batch `iter`: every dist.check_every updates, throws Error if the
  // ranks' parameters differ (waits for the engine then).
  void CheckRanks(int64_t iter);

 private:
  Session* s_;
  DataParallel* dp_;
  const std::vector<SlicedTensor> sliced_;  // --shard optimizer: made whole after each update
  const int iter_size_;
  const uint64_t seed_;
};

// The solver's metrics, by name.
std::vector<std::string> MetricNames(const config::Solver& sc);
// The solver's metrics of eval's forward over one epoch of `it` (from its
// start), or over its first solver.val_batches batches; `feed` is the eval
// executor's (MakeFeed over Session::Eval() and eval_inputs).
MetricSet Evaluate(Session* s, Feed* feed, DataIter* it, const config::Solver& sc);

}  // namespace frugal
