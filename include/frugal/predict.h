// Inference with a trained model (`frugal predict`): the config's forward
// graph with each loss head's prediction as its output, planned once at the
// config's batch size and bound to a checkpoint's parameters and aux state,
// run batch by batch over the caller's samples; and the sampling of the next
// token of a language model's generation.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "frugal/config.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/graph.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/tensor.h"

namespace frugal {

// The forward graph `fwd` for inference: each graph output of an op that
// declares its prediction (OpDef::Predicts: linear_cross_entropy's
// probabilities) replaced by the nodes that compute it, and only the nodes
// the outputs read kept, in their order (a label that only such a head read
// is no longer an input). A loss head without a declared prediction stays:
// its output is the prediction (softmax_cross_entropy's probabilities).
// Shapes are not inferred.
Graph PredictionGraph(const Graph& fwd);

class Predictor {
 public:
  // PredictionGraph of the config's graph at data.batch_size, with shapes,
  // layouts and a memory plan (sharing buffers, as the evaluation graph of
  // BuildModel; memory.strategy none or inplace as they say), its parameters
  // and aux state read from `checkpoint`, run by the engine the solver
  // names. Throws Error naming the config for a graph that reads an input
  // other than data.data_name and data.label_name, or whose output is not
  // per sample (its first dim not a multiple of the batch) or not float32;
  // naming the checkpoint for a tensor the graph reads that it lacks or
  // holds in another shape (with the config's variables that differ from
  // the checkpoint's own config: a --define left out).
  Predictor(const ConfigFile& cfg, const std::string& checkpoint);
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  int64_t batch() const { return batch_; }
  // One sample's data shape (data.sample_shape).
  const Shape& sample_shape() const { return sample_shape_; }
  // Per graph output: its node's name (":k" for output k > 0), and its shape
  // for one sample: an output (batch, C...) gives (C...); (batch * K, C...),
  // K rows per sample (a sequence model's positions), gives (K, C...).
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<Shape>& output_shapes() const { return output_shapes_; }
  const Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }

  // Predicts n >= 1 samples, n * sample_shape().Size() floats at x (sample
  // after sample, each row-major), a batch at a time: the last partial
  // batch is filled up with zeros and the outputs of those rows dropped.
  // Returns per output n * output_shapes()[k].Size() floats, sample after
  // sample. Throws an op's Error (an embedding's index out of range).
  std::vector<std::vector<float>> Run(const float* x, int64_t n);

 private:
  Graph graph_;
  MemoryPlan plan_;
  int64_t batch_ = 0;
  Shape sample_shape_;
  std::vector<std::string> output_names_;
  std::vector<Shape> output_shapes_;
  Tensor data_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Executor> exec_;
  uint64_t seed_ = 0;
  int64_t step_ = 0;
};

// How a language model's next token is drawn from its probabilities p over
// the classes: p^(1 / temperature), renormalised (temperature 0: the most
// probable class); only the top_k most probable classes (0: all; ties to the
// lower class) and those `allowed` (none: all) take part. A uniform number
// from a std::mt19937_64 (its sequence is fixed by the standard) picks by the
// cumulative sum, so a seed gives the same tokens on every platform.
struct SampleOptions {
  double temperature = 1;
  int64_t top_k = 0;
};
class TokenSampler {
 public:
  explicit TokenSampler(uint64_t seed) : rng_(seed) {}
  // p: n probabilities; allowed: n flags, or empty. Throws Error when no
  // allowed class has a positive probability.
  int64_t Sample(const float* p, int64_t n, const SampleOptions& o, const std::vector<bool>& allowed = {});

 private:
  std::mt19937_64 rng_;
};

}  // namespace frugal
