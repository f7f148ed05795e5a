// Evaluation metrics behind one interface, chosen by name:
//
//   accuracy           rows whose largest output is the label
//   top_k_accuracy_K   rows whose label is among the K largest outputs
//                      (ties broken towards the lower class index, as accuracy)
//   cross_entropy      mean of -log(max(p[label], 1e-12))
//   perplexity         exp(cross_entropy)
//   mse                mean over elements of (output - label)^2
//
// The classification metrics read outputs (N, K) of class probabilities and
// labels (N) holding class indices, or, from a loss that never forms the
// probabilities (linear_cross_entropy), outputs (N, 2) of each row's loss
// -log p[label] and the label's rank among the classes (0: the top one);
// mse reads outputs and labels of the same size (N rows each). Only the
// first num_valid rows of a batch count (the rest of a last, wrapped batch
// are repeats).
//
// A graph may have several outputs, one per loss (an unrolled language model
// predicts at every step): MetricSet scores them all, output k against label
// column k, so every prediction counts against its own label.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frugal/tensor.h"

namespace frugal {

// What a graph output holds (its op says: OpDef::outputs_loss_and_rank).
enum class OutputKind { kValues, kLossAndRank };

// One graph output as the metrics read it.
struct Prediction {
  Prediction(Tensor t, OutputKind k = OutputKind::kValues) : values(std::move(t)), kind(k) {}  // NOLINT: implicit
  Tensor values;
  OutputKind kind;
};

class Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;
  virtual void Reset() = 0;
  // Throws Error for a label that is not a class index of the outputs, or
  // for outputs and labels whose rows do not match.
  virtual void Update(const Prediction& outputs, const Tensor& labels, int64_t num_valid) = 0;
  virtual double Get() const = 0;     // 0 before any row
  virtual int64_t count() const = 0;  // rows seen since Reset
};

// Throws Error naming the known metrics for an unknown name.
std::unique_ptr<Metric> MakeMetric(const std::string& name);

// The metrics a run reports, updated together.
class MetricSet {
 public:
  // The default set is accuracy and cross_entropy.
  MetricSet();
  explicit MetricSet(const std::vector<std::string>& names);

  void Reset();
  void Update(const Prediction& outputs, const Tensor& labels, int64_t num_valid);
  // Every output of a graph: one output as above; K > 1 outputs of N rows
  // against labels (N, K), output k scored against column k (each counts
  // num_valid rows). Throws Error if the labels do not hold K values per row.
  void Update(const std::vector<Prediction>& outputs, const Tensor& labels, int64_t num_valid);
  // The value of the named metric; throws Error if the set lacks it.
  double Get(const std::string& name) const;
  bool Has(const std::string& name) const;
  int64_t count() const;  // rows seen since Reset
  std::vector<std::pair<std::string, double>> Values() const;
  // "accuracy=0.912300 cross_entropy=0.251000", with an optional prefix on names.
  std::string ToString(const std::string& prefix = "") const;

 private:
  std::vector<std::unique_ptr<Metric>> m_;
  Tensor column_;  // output k's label columns, for Update with several outputs
};

}  // namespace frugal
