// Training: the model (train and eval graphs bound to shared parameters),
// initializers, the SGD optimizer, metrics and the fit loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "frugal/config.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/graph.h"
#include "frugal/passes.h"
#include "frugal/tensor.h"

namespace frugal {

// A deterministic random source: the same seed gives the same numbers on
// every platform (std:: distributions do not promise that).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Normal();
  uint64_t Next() { return gen_(); }

 private:
  std::mt19937_64 gen_;
};

// Fills a parameter: "xavier" (uniform, MXNet's magnitude 3 over the average
// fan), "zero", "one". Throws Error naming the parameter for an unknown name.
void InitParam(const std::string& init, const std::string& name, Tensor* t, Rng* rng);

// SGD with momentum and weight decay (MXNet's form):
//   m = momentum * m - lr * (g + wd * w);   w = w + m
struct SgdOptions {
  float lr = 0.01f, momentum = 0.9f, weight_decay = 0.f;
};
void SgdUpdate(const SgdOptions& o, Tensor* w, const Tensor& g, Tensor* m);

// Running metrics over batches of class probabilities and labels; only the
// first num_valid rows of a batch count.
class Metrics {
 public:
  void Reset() { n_ = 0; correct_ = 0; ce_ = 0; }
  void Update(const Tensor& prob, const Tensor& label, int64_t num_valid);
  double accuracy() const { return n_ ? static_cast<double>(correct_) / n_ : 0; }
  double cross_entropy() const { return n_ ? ce_ / n_ : 0; }
  int64_t count() const { return n_; }
  // "accuracy=0.912300 cross_entropy=0.251000", with an optional prefix on names.
  std::string ToString(const std::string& prefix = "") const;

 private:
  int64_t n_ = 0, correct_ = 0;
  double ce_ = 0;
};

// The graphs a config defines at a batch size: training (forward, gradient,
// shapes) and evaluation (forward, shapes), with their memory plans.
struct Model {
  Graph train, eval;
  MemoryPlan train_plan, eval_plan;
  Shape data_shape, label_shape;  // with the batch dim
  std::vector<int> params;        // node ids of parameters (same in both graphs)
  std::vector<int> aux;           // node ids of aux state (BatchNorm moving statistics)
  int64_t batch = 0;
};
// Throws Error for a config that cannot be planned (shapes, no loss, ...).
Model BuildModel(const ConfigFile& cfg, MemoryStrategy strategy);

// Prints a table of the graph's nodes (name, op, inputs, output shape) and
// its parameter count.
std::string GraphSummary(const Graph& g);
// One line: arena, lower bound, parameters, gradients, inputs.
std::string PlanSummary(const MemoryPlan& p, int64_t batch);

struct TrainOptions {
  std::string log_json;  // one JSON line per epoch, if set
  // If set, filled with every parameter's values after training (tests).
  std::map<std::string, std::vector<float>>* final_params = nullptr;
  // If set, runs on this engine instead of making the config's (tests).
  Engine* engine = nullptr;
};

// Trains the config's model on its data and reports progress and validation
// metrics per epoch. Everything is pushed to the engine the config names:
// per batch the forward and backward ops, then one SGD update per parameter
// (reading its gradient, writing the parameter and its momentum, so it runs
// as soon as that gradient is ready), then the metrics, then the load of the
// next batch on the engine's I/O thread. The loop runs at most one batch
// ahead of the metrics. Returns the last validation accuracy (or training
// accuracy without validation data).
double Train(const ConfigFile& cfg, const TrainOptions& opts);

}  // namespace frugal
