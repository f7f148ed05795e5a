// What an op costs: its FLOPs, or its measured time (CostTable). Needs:
// shapes inferred (frugal/passes/shapes.h); a table's prices for a placed
// plan also read the plan (frugal/passes/memory_plan.h) and schedule its
// ops (frugal/passes/schedule.h). Provides: the price of recomputing a
// node, which the planner's searches minimise, and a plan's predicted step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frugal/graph.h"

namespace frugal {

struct MemoryPlan;  // frugal/passes/memory_plan.h

// Measured op times, to price recomputation in time instead of FLOPs
// (`frugal time --save-costs FILE` writes one; `--costs FILE` or the
// config's memory.costs gives it to the planner). An entry is keyed by what
// sets an op's time, its op, attributes and input shapes (Key), so identical
// layers share one (their average) and a table serves every config with
// those layers. A node not in the table is priced by its FLOPs at the
// table's average rate.
//
// An op's time also depends on where its bytes are: one whose inputs and
// output were touched shortly before finds them in the cache. So each entry
// keeps the arena bytes its nodes touched cold when measured (ColdBytes),
// and a placed plan's ops are priced at their own: ms_per_cold_byte more or
// less per cold byte (a recomputation, run just before its reader, writes
// into bytes the cache still holds; under share its original did not).
class CostTable {
 public:
  struct Cost {
    double forward_ms = 0, backward_ms = 0;      // averages over `count` nodes
    double forward_cold = 0, backward_cold = 0;  // cold bytes (ColdBytes) when measured, averages
    int count = 0;
  };
  // "op attr=value ... (input shape) ..." of node i (shapes inferred).
  static std::string Key(const Graph& g, int i);
  void Add(const std::string& key, double forward_ms, double backward_ms, double forward_cold = 0,
           double backward_cold = 0);
  // Node i's forward and backward times: measured (count > 0), or priced
  // by its FLOPs (count 0); a variable's are 0.
  Cost Of(const Graph& g, int i) const;
  // Each node's time in a training graph: a forward node's forward time, a
  // gradient node's share of its forward node's backward time, a
  // recomputation's original's forward time, a gradient sum's share of
  // sums_ms by its elements. With a placed plan, each measured op's time
  // moves by ms_per_cold_byte times its cold bytes in that plan less those
  // it had when measured (shared out as the times are; at least 0).
  std::vector<double> NodeMs(const Graph& train, const MemoryPlan* placed = nullptr) const;
  // A placed plan's predicted step: its ops (NodeMs at the placement)
  // scheduled on `workers` (ScheduledStepMs), times wall_per_schedule_ms.
  double StepMs(const Graph& train, const MemoryPlan& placed) const;
  const std::map<std::string, Cost>& costs() const { return costs_; }

  double ms_per_flop = 0;     // forward time per FLOP over the measured nodes
  double backward_ratio = 2;  // backward time per forward time over them
  double sums_ms = 0;         // the step's gradient sums (add_n), measured
  double sums_cold = 0;       // their cold bytes, when measured
  // The cache cold bytes are counted against (ColdBytes), and the time a
  // cold byte costs over a cached one, fitted by `frugal time` from its ops
  // run under a second plan; 0: times do not depend on the placement.
  int64_t cache_bytes = 0;
  double ms_per_cold_byte = 0;
  // The engine's CPU workers when the table was measured: a plan's step is
  // predicted as its ops scheduled on that many (ScheduledStepMs).
  int workers = 1;
  // The measured step's wall time per ms of the schedule predicted from the
  // table's times for the plan it was measured under: about 1 (the
  // engine's time between ops raises it; ops timed slower under profiling
  // lower it). Predicted steps and recomputation times are scaled by it.
  double wall_per_schedule_ms = 1;

  // A text file: a header line, `ms_per_flop X`, `backward_ratio X`,
  // `sums_ms X`, `sums_cold X`, `cache_bytes N`, `ms_per_cold_byte X`,
  // `workers N`, `wall_per_schedule_ms X`, then one
  // `forward_ms backward_ms forward_cold backward_cold count key` line per
  // entry.
  // Save writes atomically; Load throws Error naming the file and line.
  void Save(const std::string& path) const;
  static CostTable Load(const std::string& path);

 private:
  std::map<std::string, Cost> costs_;
};

// Forward FLOPs of node i (shapes inferred), by its op's declaration.
double NodeFlops(const Graph& g, int i);
// What recomputing node i costs: its predicted ms with a cost table, else
// its FLOPs. The planner's searches compare plans by the sum of these.
double RecomputeCost(const Graph& g, int i, const CostTable* costs);

}  // namespace frugal
