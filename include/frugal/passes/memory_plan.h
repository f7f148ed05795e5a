// Memory strategies and the memory plan: every entry of a graph placed in
// one arena before the first step. Needs: a graph with shapes inferred and,
// on the CPU, layouts chosen (frugal/passes/shapes.h); recomputation is
// already in it (Gradient's mirrors). Provides: the MemoryPlan the executor
// allocates and binds by, its check (VerifyPlan) and its reports
// (Timeline, PlanToJson).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frugal/graph.h"
#include "frugal/op.h"

namespace frugal {

class CostTable;  // frugal/passes/costs.h

// How memory is shared, and which forward results are recomputed.
struct MemoryStrategy {
  enum Kind {
    kNone,       // every entry its own buffer: the baseline
    kInplace,    // outputs overwrite inputs where the op allows and the input dies
    kShare,      // in place + reuse of buffers whose lifetimes do not overlap
    kDropCheap,  // share + recompute cheap ops (BatchNorm, activations, ...), keep expensive ones
    kSqrt,       // share + O(sqrt n) segments: keep segment boundaries, recompute the rest
    kLogn,       // share + recursive segments: O(log n) memory, O(n log n) compute
    kBudget,     // share + the least recomputation that fits budget_bytes
  };
  Kind kind = kShare;
  int64_t budget_bytes = 0;  // kAutoBudget: what the device has free (ResolveAutoBudget, train.h)
  static constexpr int64_t kAutoBudget = -1;
  // limit=SIZE (--memory-limit): the whole process's peak resident memory;
  // BuildModel turns it into the arena's budget_bytes (ResolveLimit,
  // train.h), 0 until then.
  int64_t limit_bytes = 0;
  // With a table, recomputation is priced in predicted milliseconds (the
  // budget search takes the plan that recomputes for the least time) and
  // plans predict the step's time; without, in FLOPs.
  std::shared_ptr<const CostTable> costs;
  MemoryStrategy(Kind k = kShare, int64_t budget = 0) : kind(k), budget_bytes(budget) {}
  bool operator==(const MemoryStrategy& o) const {
    return kind == o.kind && budget_bytes == o.budget_bytes && limit_bytes == o.limit_bytes;
  }
  bool shares() const { return kind >= kShare; }
  bool recomputes() const { return kind >= kDropCheap; }
  bool auto_budget() const { return kind == kBudget && budget_bytes == kAutoBudget; }
  bool limit() const { return limit_bytes > 0; }
  std::string Name() const;  // "share", "budget=7GB", "budget=auto", "limit=8GiB"
};

// "none", "inplace", "share", "drop_cheap", "sqrt", "logn", "budget=7GB",
// "budget=auto", "limit=8GiB"; throws Error naming the choices.
MemoryStrategy ParseMemoryStrategy(const std::string& text);
// Every strategy that needs no argument (all but budget).
std::vector<MemoryStrategy> AllMemoryStrategies();

// Every byte of activations, gradients and workspaces, placed before the
// first step as offsets in one arena. Variables (inputs, parameters) and
// parameter gradients live outside the arena and are counted separately.
// One block of a plan's arena: live from step start to step end
// (inclusive), its bytes (aligned) and offset, and what opened it: an entry
// (those written in place into it join it), or a node's workspace (entry -1).
struct ArenaBlock {
  int start, end;
  int64_t size;
  int64_t offset = -1;
  int entry = -1, node = -1;
};

struct MemoryPlan {
  MemoryStrategy strategy = MemoryStrategy::kShare;
  static constexpr int64_t kAlign = 64;   // every block starts on this
  std::vector<int64_t> entry_offset;      // per entry; -1: not in the arena
  std::vector<OpReq> entry_req;           // what the producer does with each entry
  std::vector<int> entry_block;           // per entry: its block, -1 if none
  std::vector<int64_t> workspace_offset;  // per node; -1: no workspace
  std::vector<int64_t> workspace_bytes;   // per node
  int num_nodes = 0;                      // of the graph planned (recomputations included)
  int num_blocks = 0;                     // arena blocks (an engine variable each)
  int reuse_gap = 0;                      // steps a dead block's bytes are held, bound allowing (PlaceWithGap)
  std::vector<ArenaBlock> blocks;         // the blocks (not kept by an estimate)
  int64_t arena_bytes = 0;                // the arena to allocate
  int64_t lower_bound_bytes = 0;          // largest total of live bytes at one step
  int peak_step = -1;                     // the first step that holds lower_bound_bytes
  int64_t param_bytes = 0;                // parameters and aux state (not in the arena)
  int64_t param_grad_bytes = 0;           // their gradients (not in the arena)
  int64_t input_bytes = 0;                // data inputs (not in the arena)
  int64_t state_bytes = 0;                // optimizer state and gradient sums (not in the arena)
  int64_t no_sharing_bytes = 0;           // what the arena would be with strategy none
  int num_inplace = 0;                    // entries that took their input's buffer
  int num_recomputed = 0;                 // mirror nodes (recomputations)
  double step_flops = 0;                  // forward + backward, without recomputation
  double extra_flops = 0;                 // of the recomputations
  double extra_flops_ratio() const { return step_flops > 0 ? extra_flops / step_flops : 0; }
  // Predicted from the strategy's cost table (0 without one): the whole
  // step, its ops scheduled as the engine runs them, each priced where the
  // placement puts its bytes (CostTable::StepMs; PlanTraining sets it on
  // the plan it returns), and the recomputed ops' time (the sum of their
  // measured times, the planners' price).
  double step_ms = 0, extra_ms = 0;
  bool priced() const { return strategy.costs != nullptr; }
  // What the planner's searches minimise: predicted ms, or FLOPs.
  double recompute_cost() const { return priced() ? extra_ms : extra_flops; }
  double plan_ms = 0;    // planning time (recompute search included)
  int num_builds = 0;    // training graphs PlanTraining built (a search builds several)
  std::string found_by;  // the step of PlanTraining that chose the recomputation ("the block program", ...)
};

// Where a plan's arena bytes go over the step: live bytes at each step of
// the schedule (the training graph's node order), by the kind of node that
// opened each block, read back from the plan's blocks (so the peak is the
// plan's lower bound). At most max_points points: each stands for a span of
// steps by the step of its span with the most live bytes.
struct MemoryTimeline {
  enum Kind { kForward, kRecomputed, kGradient, kWorkspace, kNumKinds };
  static const char* KindName(int k);
  int num_steps = 0;
  int backward_step = 0;                              // the first step of the backward pass
  std::vector<int> steps;                             // the step of each point
  std::vector<std::array<int64_t, kNumKinds>> bytes;  // live bytes by kind at each point
  std::vector<std::pair<int, int>> recomputing;       // steps [first, last] of each run of recomputation
  int peak_step = 0;
  int64_t peak_bytes = 0;
  std::vector<std::pair<std::string, int64_t>> peak_tensors;  // the largest blocks live at the peak, by name
};
MemoryTimeline Timeline(const Graph& graph, const MemoryPlan& plan, int max_points = 800, int peak_names = 6);

// Plans memory for graph (shapes inferred) in its node order, which is the
// order the executor runs. External entries: variables and parameter
// gradients. Graph outputs stay live to the end and never share a buffer
// with each other. Only the strategy's sharing matters here; recomputation
// is already in the graph (mirror nodes). With estimate, a sharing plan gets
// no offsets and arena_bytes is the lower bound (to compare candidates fast).
// A sharing plan is placed in several orders until the arena meets the
// lower bound; with fit_bytes, until it is at most fit_bytes (a search
// asking whether a plan fits a budget: the same answer, sooner).
MemoryPlan PlanMemory(const Graph& graph, const MemoryStrategy& strategy, bool estimate = false, int64_t fit_bytes = 0);
// Places a placed sharing plan's blocks again so that none takes bytes of a
// block that died fewer than reuse_gap steps before it opens, wherever the
// lower bound allows (a block holds its bytes past its death only while the
// bytes held at each step stay within it): two ops that far apart do not
// wait for each other through the arena (EngineAccesses). Placed toward
// the lower bound; returns false, the plan unchanged, where the arena
// exceeds limit.
bool PlaceWithGap(const Graph& graph, int reuse_gap, int64_t limit, MemoryPlan* plan);

// Checks a plan: no two entries whose lifetimes overlap overlap in memory
// (unless one is an in-place successor of the other), and everything fits in
// the arena. Returns an empty string when sound, else what is wrong.
std::string VerifyPlan(const Graph& graph, const MemoryPlan& plan);

// One JSON object (no newline) with the plan's figures.
std::string PlanToJson(const MemoryPlan& plan, int64_t batch);

}  // namespace frugal
