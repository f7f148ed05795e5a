// How batches reach an executor and its outputs reach the metrics, chosen
// once per run by where the model runs: on the CPU the I/O thread loads
// into the executor's bound data and label; on a GPU into pinned host
// tensors, copied on the GPU's stream (decoding the next batch overlaps the
// current step), and the metrics read host copies of the outputs. A feed
// serves one executor and its batch (Session::train with train_inputs, or
// Session::Eval() with eval_inputs), so training and evaluation never load
// into each other's tensors. A data-parallel rank's feed is the same over
// its shard of the data (LoadSource).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frugal/io.h"
#include "train/session.h"

namespace frugal {

// The iterator of data.train or data.val (`what`), reading batches of the
// config's size and shapes (DataShapesOf, or a model's); a data-parallel
// rank reads its shard.
std::unique_ptr<DataIter> LoadSource(const ConfigFile& cfg, const config::DataSource& src, const std::string& what,
                                     const DataShapes& shapes, bool shuffle, Shard shard = {});

// What the metric functions of a training window count: its real rows, and
// when the last batch's metrics ran (on the engine, after that batch's
// outputs: the same point of each step on every engine).
struct WindowTally {
  int64_t samples = 0;
  std::chrono::steady_clock::time_point last_in;
};

class Feed {
 public:
  virtual ~Feed() = default;
  // On the I/O thread: the next batch of `it` (with begin_epoch >= 0, the
  // first of that epoch) into the executor's inputs, and its number of real
  // rows for the metrics of that batch.
  virtual void PushLoad(DataIter* it, int64_t begin_epoch) = 0;
  // Adds the batch's predictions (every graph output of the executor,
  // output k against label column k of its inputs when there are several)
  // to every metric in ms, and its real rows and time to *tally if given.
  virtual void PushMetrics(std::vector<MetricSet*> ms, WindowTally* tally = nullptr) = 0;
  // Reads n batches of `it` and drops them (resuming inside an epoch). The
  // engine must be idle.
  void Skip(DataIter* it, int64_t n);
  // The variable the metric functions write: wait for it before reading
  // the metric sets given to PushMetrics.
  Var metrics_var() const { return metrics_var_; }

 protected:
  Feed(Session* s, const Executor& exec, const BatchInputs& in);
  // Where the I/O thread writes a batch.
  virtual std::pair<Tensor, Tensor> LoadTargets() const = 0;
  // On the I/O thread: the next batch of `it` into LoadTargets(), writing
  // `writes`.
  void PushRead(DataIter* it, int64_t begin_epoch, const std::vector<Var>& writes);
  // The variables the metrics of the executor's outputs read (with its
  // label's).
  std::vector<Var> OutputReads() const;

  Session* s_;
  const Executor& exec_;
  const BatchInputs& in_;
  const Var metrics_var_;
  int64_t num_valid_ = 0;  // the loaded batch's real rows
};

// The feed of exec, whose data and label are `in` (the session's train
// executor and train_inputs, or Eval() and eval_inputs): a host feed on the
// CPU, a pinned-staging feed on a GPU.
std::unique_ptr<Feed> MakeFeed(Session* s, const Executor& exec, const BatchInputs& in);

}  // namespace frugal
