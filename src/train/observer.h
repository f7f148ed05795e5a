// The fit loop's observers (MXNet's batch and epoch callbacks, Keras'
// Callback): everything a run reports or keeps besides the step itself and
// validation, which are the loop's (trainer.cc). The loop calls them at fixed
// points, in the order Observers() (trainer.cc) registers them from
// TrainOptions; each event carries what it reports (the rate, the metrics),
// and no observer calls another. Each lives in its own file,
// src/train/observe_<what>.cc; a new one is a class there, its Make function
// below and one line in Observers().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frugal/dist.h"
#include "frugal/progress.h"
#include "train/session.h"

namespace frugal {

using Clock = std::chrono::steady_clock;
inline double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Where a run is: its configuration and counters. The loop owns it and
// moves it forward; observers read it (and may set stop).
struct Run {
  Run(const ConfigFile& cfg, const TrainOptions& opts, Session* s, DataParallel* dp, int64_t batches);

  const ConfigFile& cfg;
  const config::Solver& sc;
  const TrainOptions& opts;
  Session& s;
  DataParallel* dp;  // null unless data-parallel
  const int iter_size;
  const int64_t batches;                   // per epoch, the same on every rank
  const std::vector<std::string> metrics;  // the solver's, by name
  // A language model's tokens per sample (a label per input position:
  // data.label_shape equals a non-empty sample_shape), else 0: its speed is
  // reported in tokens/s beside samples/s.
  const int64_t tokens_per_sample;
  // The length of the POLY or COSINE schedule (LrSchedule::Length),
  // checkpointed so that a resume continues it.
  int64_t lr_schedule_iters = 0;
  ProgressLine progress;  // erased before every log line

  int64_t epoch = 0;
  int64_t batch = 0;        // batches of this epoch done
  int64_t first_batch = 0;  // this epoch's first (> 0 when resumed inside it)
  int64_t iter = 0;         // batches done in all: iter_size per update
  Clock::time_point epoch_start;
  MetricSet epoch_m;  // this epoch's so far; filled by pushed functions: read after the loop's wait
  bool done = false;  // max_iters reached
  bool stop = false;  // set by an observer: the run ends after this batch

  int64_t updates() const { return iter / iter_size; }
  bool updated() const { return iter % iter_size == 0; }
  // Metrics, and a count, over every rank (collectives: every rank calls them).
  MetricValues Reduce(const MetricSet& m) const;
  int64_t Sum(int64_t v) const;
  // Every rank's BatchNorm statistics come from its own shard: their mean is
  // validated with and checkpointed. Inside an iter_size accumulation the
  // gradient sums are averaged too, so a checkpoint written there holds
  // every rank's micro-batches, not rank 0's: the update averages sum plus
  // the rest over the ranks, which is linear, so replacing each rank's sum
  // by the mean changes nothing but rounding. Called where every rank gets to.
  void AverageAcrossRanks();
  // With the metrics of this epoch's batches up to `iter` in (after a wait):
  // throws Error if one is not a number (batch `iter` broke the model, when
  // the check before it passed), naming the first weight that is not, or
  // the largest, and the fixes (lr: the rate of the last update). A look at
  // a few sums.
  void CheckFinite(int64_t iter, float lr);
};

// What to do about a loss or state that is not a number, trained at rate lr.
std::string NonFiniteAdvice(float lr);

// A window of `display` batches, or the last batches of an epoch or of the
// run however few (Observer::OnWindow).
struct Window {
  int64_t first = 0;     // the window is batches [first, r.batch) of the epoch
  MetricValues metrics;  // the window's, over every rank
  // Over every rank, timed from when the batch before the window was in;
  // -1 when the window is the epoch's first batch alone (nothing timed).
  double samples_per_s = -1;
  float lr = 0;  // the rate of the last update
};

// An epoch's end (Observer::OnEpochEnd).
struct EpochEnd {
  MetricValues train;               // the epoch's training metrics over every rank
  std::optional<MetricValues> val;  // the validation at its end, if one ran
  // The samples trained over every rank (a language model's metrics count
  // tokens, not samples).
  int64_t samples = 0;
  double secs = 0;
  float lr = 0;  // the rate of the last update
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Before batch r.iter is pushed.
  virtual void OnBatchBegin(Run& r) {}
  // Every `display` batches, and the last batches of an epoch or of the run.
  virtual void OnWindow(Run& r, const Window& w) {}
  // Every batch, once the metrics of this epoch's batches before it are in
  // (r.epoch_m); lr: the rate of the last update.
  virtual void OnMetrics(Run& r, float lr) {}
  // After a batch is pushed and counted, unless it ended the run (max_iters).
  virtual void OnBatchEnd(Run& r) {}
  // After an update at rate lr (and the validation due there), unless the
  // run stops there.
  virtual void OnUpdate(Run& r, float lr) {}
  // A validation's metrics over every rank: every val_interval updates
  // (before OnUpdate), or at an epoch's end (epoch_end: before OnEpochEnd,
  // whose EpochEnd::val they are too).
  virtual void OnValidation(Run& r, const MetricValues& m, bool epoch_end) {}
  // An epoch's end, after its validation.
  virtual void OnEpochEnd(Run& r, const EpochEnd& e) {}
  // The run stopped before its end (a signal, or an observer set r.stop),
  // after r.batch batches of the epoch; lr: the rate of the last update.
  virtual void OnStop(Run& r, float lr) {}
  // The end of the run, the engine idle.
  virtual void OnEnd(Run& r) {}
};

// observe_progress.cc: the live line on a terminal (opts.progress).
std::unique_ptr<Observer> MakeProgressLine();
// observe_log.cc: MXNet's log lines (batch windows, validation, epochs).
std::unique_ptr<Observer> MakeLogLines();
// observe_tensorboard.cc: scalars in TensorBoard event files in dir.
std::unique_ptr<Observer> MakeTensorBoard(const std::string& dir);
// observe_json.cc: a JSON line per window, mid-epoch validation and epoch.
std::unique_ptr<Observer> MakeJsonLog(const std::string& path);
// observe_json.cc: the JSON log's lines to a callback (TrainOptions::on_event),
// whose true stops the run after the batch.
std::unique_ptr<Observer> MakeEventCallback(std::function<bool(const TrainEvent&)> f);
// observe_signals.cc: SIGINT / SIGTERM stop the run after the step (every
// rank at the same one).
std::unique_ptr<Observer> MakeSignalStop();
// observe_checkpoint.cc: checkpoints as the solver asks and on a signal
// (into solver.checkpoint_dir; without one only the BatchNorm statistics
// are averaged over ranks where a checkpoint would be). Throws Error if the
// folder holds checkpoints of a run other than the one resumed from
// (`resume`: --resume's file or folder, or empty).
std::unique_ptr<Observer> MakeCheckpoints(const config::Solver& sc, const std::string& resume);
// observe_profile.cc: a Chrome trace of the first steps' ops.
std::unique_ptr<Observer> MakeProfile(Run& r);

}  // namespace frugal
