// Training a config's model outside the trainer: the references that memory
// strategies and engines must reproduce bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/train.h"

namespace frugal::test {

// A config's model bound on the naive engine: parameters initialised from the
// solver's seed, gradients, optimizer state, data and label tensors. With
// plain_layouts the training graph keeps every activation plain (its
// layouts cleared and the graph planned again), for comparing layouts.
struct BoundModel {
  BoundModel(const ConfigFile& cfg, const MemoryStrategy& strategy, bool plain_layouts = false);
  // One step: run forward and backward, then update every parameter in name
  // order with the solver's lr (step counts from 1).
  void Step(int64_t step);
  // Every parameter's and aux state's (moving statistics) values, in name order.
  std::vector<std::vector<float>> Params() const;

  const config::Solver solver;  // a copy: the config may be a temporary
  Model m;
  std::unique_ptr<Engine> engine;
  Rng rng;
  std::unique_ptr<Optimizer> opt;
  Bindings b;
  std::map<std::string, Tensor> grads;
  std::map<std::string, OptState> states;
  Tensor data, label;
  int64_t arena_allocated = 0;  // bytes the executor's arena took
  std::unique_ptr<Executor> exec;
  std::unique_ptr<Executor> update;  // m.update over the tensors above
};

// A convolution-BatchNorm-ReLU-pooling-dropout net with a residual sum,
// average pooling and a classifier (batch 8 of 3x16x16, SGD), computing in
// dtype ("float32" or "bf16"): every kind of node a mixed-precision graph
// or a channels-last one meets.
ConfigFile ConvNet(const std::string& dtype = "float32");

// One node of `op` over the tensors `in` (all on one device; the ones it
// mutates are updated in place), run through a graph, a plan and an executor
// on the naive engine at run step `step` and rate `lr`. Returns the bytes of
// the plan's arena (the node's workspace).
int64_t RunNode(const std::string& op, const AttrMap& attrs, const std::vector<Tensor>& in, int64_t step, float lr = 0);
// One update of w by g through opt's update op (state in StateNames' order).
void Update(const Optimizer& opt, Tensor* w, const Tensor& g, OptState* state, float lr, int64_t step,
            const ParamMult& mult = {});

// Runs `steps` steps on pseudo-random data drawn from the solver's seed (data
// uniform in [-1, 1), labels in [0, 10)). Returns every parameter's and aux state's values,
// then the last step's output 0. If arena_allocated is set, it gets the bytes
// the executor allocated for its arena. plain_layouts: as BoundModel.
std::vector<std::vector<float>> TrainSteps(const ConfigFile& cfg, const MemoryStrategy& strategy, int steps,
                                           int64_t* arena_allocated = nullptr, bool plain_layouts = false);

}  // namespace frugal::test
