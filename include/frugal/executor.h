// The executor binds a planned graph to memory and runs it through the
// engine. All activation, gradient and workspace bytes come from one arena
// of exactly plan.arena_bytes per device; variables (data inputs,
// parameters) and parameter gradients are bound from outside by name.
//
// Each node becomes one engine function, pushed in plan order, reading and
// writing engine variables: one per arena block, one per op workspace, one
// per bound tensor. Blocks that share bytes at different times (memory
// strategy share) are ordered too: the function that first writes a block
// also writes the variables of the blocks that held its bytes before, so it
// waits for their last readers. Buffer reuse is thus write-after-read
// ordering, and any engine runs the graph safely.
//
// Debugging: with SetPoisoning (`frugal train --poison-arena`), a CPU
// executor fills every arena block with NaN (bytes 0xff) before the op that
// first writes it and again after its last reader, and every workspace
// before and after its op, and stops an op whose arena input holds the
// poison; the strategy tests run this way (tests/train/train_steps.cc).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/graph.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/tensor.h"
#include "frugal/trace.h"

namespace frugal {

struct Bindings {
  std::map<std::string, Tensor> vars;   // every variable node, by name
  std::map<std::string, Tensor> grads;  // gradient buffers of parameters, by name
  // Engine variables of bound tensors, by the same names. Share them with
  // whatever else touches the tensors (optimizer updates, data loading,
  // another executor); a tensor without one gets a variable of its own.
  std::map<std::string, Var> var_vars;
  std::map<std::string, Var> grad_vars;
  // Where the arena lives and the kernels run; every bound tensor must be
  // there too. On a CUDA device each node is pushed asynchronously: its
  // kernel is launched on the GPU's stream and its variables are released
  // when the GPU has finished it (src/backend/device.h).
  Device device;
};

class Executor {
 public:
  // Throws Error if a variable is unbound, has the wrong shape or lives on
  // another device, or if an op has no kernel for the device (before any
  // memory is allocated).
  Executor(const Graph& graph, const MemoryPlan& plan, const Bindings& bindings, Engine* engine);
  // Waits for everything pushed to the engine.
  ~Executor();

  // Pushes every node in plan order and returns without waiting. step and
  // seed key the counter-based RNG of random ops; lr is the scheduled
  // learning rate the update ops read (KernelCtx::lr). They are copied into
  // each function, so the next Push may follow at once.
  void Push(bool is_train, int64_t step, uint64_t seed, float lr = 0);
  // Blocks until the graph outputs of the pushed runs are written; rethrows
  // an op's error.
  void WaitForOutputs();
  // Push, then wait for everything pushed to the engine (outputs, gradients,
  // updated aux state).
  void Run(bool is_train, int64_t step, uint64_t seed, float lr = 0);

  // With profiling on, Run adds each node's kernel wall time (seconds) to
  // node_seconds()[node], and the library kernels it ran to
  // node_kernels()[node] (src/ops/cpu/kernel_names.h; CPU only); for
  // `frugal time`. Off by default.
  void SetProfiling(bool on) {
    profiling_ = on;
    node_seconds_.assign(graph_.num_nodes(), 0.0);
    node_kernels_.assign(graph_.num_nodes(), std::string());
  }
  // Arena poisoning (see above) for the runs pushed after it; CPU only (a
  // GPU executor ignores it). Off by default.
  void SetPoisoning(bool on);
  // The part of the global batch this executor's data is (a data-parallel
  // rank), for counter-based random ops (KernelCtx::data_part). 0 by default.
  void SetDataPart(int64_t part) { data_part_ = part; }
  // Records every kernel run as a trace event (category forward, backward or
  // recompute) while set; nullptr stops.
  void SetTrace(TraceWriter* trace) { trace_ = trace; }
  const std::vector<double>& node_seconds() const { return node_seconds_; }
  const std::vector<std::string>& node_kernels() const { return node_kernels_; }

  const Tensor& output(int i) const { return outputs_[i]; }
  // The engine variable of graph output i: read it in a pushed function, or
  // wait for it, before reading output(i).
  Var output_var(int i) const { return output_vars_[i]; }
  const Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }
  int64_t arena_bytes() const { return arena_ ? arena_->bytes() : 0; }
  Device device() const { return device_; }

  // What Push gives the engine for each op node, in push order (for tests
  // and tools).
  struct OpSchedule {
    int node;
    std::vector<Var> reads, writes;
  };
  const std::vector<OpSchedule>& schedule() const { return schedule_; }

 private:
  struct OpRun;  // one node's tensors and requests
  void BindExternal(const Bindings& b);
  void BindArena();
  void PushCuda(bool is_train, int64_t step, uint64_t seed, float lr);
  const Graph& graph_;
  MemoryPlan plan_;
  Engine* engine_;
  Device device_;
  std::shared_ptr<Storage> arena_;
  std::vector<Tensor> entries_;  // per entry id
  std::vector<Var> entry_var_;   // per entry id: its block's in the arena, its own outside; -1 if it has no memory
  std::vector<Var> block_var_;   // per arena block (MemoryPlan::blocks)
  std::vector<Tensor> outputs_;
  std::vector<Var> output_vars_;
  std::vector<OpRun> runs_;
  std::vector<OpSchedule> schedule_;  // parallel to runs_
  std::vector<Var> owned_vars_;       // engine variables this executor made
  // SetPoisoning: per node, the blocks it writes first and the blocks whose
  // last reader it is, as arena ranges.
  struct Range {
    int64_t offset, bytes;
    Var var;
  };
  bool poison_ = false;
  int64_t data_part_ = 0;
  std::vector<std::vector<Range>> fresh_, dying_;
  bool profiling_ = false;
  std::vector<double> node_seconds_;  // per node, while profiling
  std::vector<std::string> node_kernels_;
  TraceWriter* trace_ = nullptr;
};

}  // namespace frugal
