// How the engine runs a placed plan's ops. Needs: a placed memory plan
// (frugal/passes/memory_plan.h): ops ordered through the same arena bytes
// wait for each other. Provides: each op's reads and writes (EngineAccesses,
// which the executor declares to the engine), the step they predict on a
// number of workers, the bytes each op finds cold (which a cost table prices,
// frugal/passes/costs.h), and how many workers a training graph gets.
#pragma once

#include <cstdint>
#include <vector>

#include "frugal/graph.h"
#include "frugal/passes/memory_plan.h"

namespace frugal {

// What the engine orders a placed plan's ops by: per op node, in graph
// (push) order, the resources it reads and writes. Resource e <
// g.num_entries() is an entry outside the arena (a variable or gradient:
// its own engine variable); num_entries + b is the plan's block b (the
// entries in it, or a workspace). An op that opens a block also writes the
// blocks whose bytes it takes over, so it waits for their last readers
// (the first blocks of a step, for the previous step's). The executor
// declares these to the engine.
struct OpAccess {
  int node;
  std::vector<int> reads, writes;  // disjoint, no repeats
};
std::vector<OpAccess> EngineAccesses(const Graph& graph, const MemoryPlan& plan);
// The step a placed plan takes when its ops (node_ms per node) run as the
// threaded engine runs them: each waits for its accesses' earlier writers
// (and a write for the reads since), and a free worker of `workers` takes
// the ready op pushed first.
double ScheduledStepMs(const Graph& graph, const MemoryPlan& plan, const std::vector<double>& node_ms, int workers);

// Per node of a placed plan, the bytes of the arena it reads or writes that
// a cache of cache_bytes no longer holds: those not touched within the last
// cache_bytes of bytes the ops before it touched (in node order, a step
// after a step, so the first ops see the previous step's last).
std::vector<double> ColdBytes(const Graph& graph, const MemoryPlan& plan, int64_t cache_bytes);

// A graph's total cost over the cost of its longest dependency path (1: a
// chain), a node's cost being its FLOPs or its output elements, the larger.
double GraphParallelism(const Graph& g);
constexpr double kParallelismForTwoWorkers = 1.5;
// The FLOPs of the graph's op nodes (forward and backward) over their number.
double MeanOpFlops(const Graph& g);
constexpr double kSmallKernelFlops = 25e6;
// Whether the threaded engine runs a training graph on two workers when the
// config leaves the split open (and there are two cores): its parallelism
// reaches kParallelismForTwoWorkers, or its kernels are too small to split
// (MeanOpFlops under kSmallKernelFlops). src/train/engine_choice.cc says why.
bool TwoWorkersByDefault(const Graph& train);

}  // namespace frugal
