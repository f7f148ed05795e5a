// How batches reach the model and its outputs reach the metrics, chosen once
// per run by where the model runs: on the CPU the I/O thread loads into the
// bound data and label; on a GPU into pinned host tensors, copied on the
// GPU's stream (decoding the next batch overlaps the current step), and the
// metrics read host copies of the outputs. A data-parallel rank's feed is
// the same over its shard of the data (LoadSource).
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
  // first of that epoch) into the model's data and label, and its number of
  // real rows for the metrics of that batch.
  virtual void PushLoad(DataIter* it, int64_t begin_epoch) = 0;
  // Adds the batch's predictions (every graph output of exec, output k
  // against label column k when there are several) to every metric in ms,
  // and its real rows and time to *tally if given.
  virtual void PushMetrics(const Executor& exec, std::vector<MetricSet*> ms, WindowTally* tally = nullptr) = 0;
  // Reads n batches of `it` and drops them (resuming inside an epoch). The
  // engine must be idle.
  void Skip(DataIter* it, int64_t n);

 protected:
  // Where the I/O thread writes a batch.
  virtual std::pair<Tensor, Tensor> LoadTargets() const = 0;
  // On the I/O thread: the next batch of `it` into LoadTargets(), writing
  // `writes`.
  void PushRead(Engine* engine, DataIter* it, int64_t begin_epoch, const std::vector<Var>& writes);
  // The variables the metrics of exec's outputs read (with the label's).
  static std::vector<Var> OutputReads(const Executor& exec, Var label_var);

  int64_t num_valid_ = 0;  // the loaded batch's real rows
};

// A host feed on the CPU, a pinned-staging feed on a GPU.
std::unique_ptr<Feed> MakeFeed(Session* s);

}  // namespace frugal
