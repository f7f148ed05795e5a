// The executor binds a planned graph to memory and runs it through the
// engine. All activation, gradient and workspace bytes come from one arena
// of exactly plan.arena_bytes per device; variables (data inputs,
// parameters) and parameter gradients are bound from outside by name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/graph.h"
#include "frugal/passes.h"
#include "frugal/tensor.h"

namespace frugal {

struct Bindings {
  std::map<std::string, Tensor> vars;   // every variable node, by name
  std::map<std::string, Tensor> grads;  // gradient buffers of parameters, by name
};

class Executor {
 public:
  // Throws Error if a variable is unbound or has the wrong shape, or if an op
  // has no kernel for the device.
  Executor(const Graph& graph, const MemoryPlan& plan, const Bindings& bindings, Engine* engine);
  ~Executor();

  // Pushes every node in plan order and waits for the graph outputs.
  // step and seed key the counter-based RNG of random ops.
  void Run(bool is_train, int64_t step, uint64_t seed);

  // With profiling on, Run adds each node's kernel wall time (seconds) to
  // node_seconds()[node]; for `frugal time`. Off by default.
  void SetProfiling(bool on) { profiling_ = on; node_seconds_.assign(graph_.num_nodes(), 0.0); }
  const std::vector<double>& node_seconds() const { return node_seconds_; }

  const Tensor& output(int i) const { return outputs_[i]; }
  const Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }
  int64_t arena_bytes() const { return arena_ ? arena_->bytes() : 0; }

 private:
  struct OpRun;  // one node's tensors, requests and engine variables
  const Graph& graph_;
  MemoryPlan plan_;
  Engine* engine_;
  std::shared_ptr<Storage> arena_;
  std::vector<Tensor> entries_;  // per entry id
  std::vector<Tensor> outputs_;
  std::vector<OpRun> runs_;
  std::vector<Var> vars_;  // every engine variable this executor created
  bool is_train_ = false;
  bool profiling_ = false;
  std::vector<double> node_seconds_;
  int64_t step_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace frugal
