// Graph passes: pure functions over the graph, deterministic, in topological
// order. The training pipeline is
//   forward graph -> InferShapes -> Gradient -> InferShapes -> PlanMemory
// and inference skips Gradient.
#pragma once

#include <string>
#include <vector>

#include "frugal/graph.h"
#include "frugal/op.h"

namespace frugal {

// Fills graph->shapes for every entry, given the shapes of the input
// variables (by node name). Parameter shapes are inferred from the ops that
// read them. Throws Error naming the node on a mismatch.
void InferShapes(Graph* graph, const std::vector<std::pair<std::string, Shape>>& input_shapes);

// Appends the backward graph: gradient nodes for every forward node on a path
// from a parameter to a loss head, with add_n where an entry's gradient has
// several parts. Sets graph->grad_of. Throws Error if the graph has no loss.
void Gradient(Graph* graph);

// How memory is shared between the entries of the bound graph.
enum class MemoryStrategy {
  kNone,     // every entry its own buffer: the baseline
  kInplace,  // outputs overwrite inputs where the op allows and nobody reads the input later
  kShare,    // in place + buffers reused by entries whose lifetimes do not overlap
};
MemoryStrategy ParseMemoryStrategy(const std::string& name);  // throws Error
const char* MemoryStrategyName(MemoryStrategy s);
std::vector<MemoryStrategy> AllMemoryStrategies();

// Every byte of activations, gradients and workspaces, placed before the
// first step as offsets in one arena. Variables (inputs, parameters) and
// parameter gradients live outside the arena and are counted separately.
struct MemoryPlan {
  MemoryStrategy strategy = MemoryStrategy::kShare;
  static constexpr int64_t kAlign = 64;     // every block starts on this
  std::vector<int64_t> entry_offset;        // per entry; -1: not in the arena
  std::vector<OpReq> entry_req;             // what the producer does with each entry
  std::vector<int> entry_block;             // per entry: its block, -1 if none
  std::vector<int64_t> workspace_offset;    // per node; -1: no workspace
  std::vector<int64_t> workspace_bytes;     // per node
  int num_blocks = 0;                       // arena blocks (an engine variable each)
  int64_t arena_bytes = 0;                  // the arena to allocate
  int64_t lower_bound_bytes = 0;            // largest total of live bytes at one step
  int64_t param_bytes = 0;                  // parameters and aux state (not in the arena)
  int64_t param_grad_bytes = 0;             // their gradients (not in the arena)
  int64_t input_bytes = 0;                  // data inputs (not in the arena)
  int64_t no_sharing_bytes = 0;             // what the arena would be with strategy none
  int num_inplace = 0;                      // entries that took their input's buffer
  double plan_ms = 0;                       // planning time
};

// Plans memory for graph (shapes inferred) in its node order, which is the
// order the executor runs. External entries: variables and parameter
// gradients. Graph outputs stay live to the end and never share a buffer
// with each other.
MemoryPlan PlanMemory(const Graph& graph, MemoryStrategy strategy);

// Checks a plan: no two entries whose lifetimes overlap overlap in memory
// (unless one is an in-place successor of the other), and everything fits in
// the arena. Returns an empty string when sound, else what is wrong.
std::string VerifyPlan(const Graph& graph, const MemoryPlan& plan);

// One JSON object (no newline) with the plan's figures.
std::string PlanToJson(const MemoryPlan& plan, int64_t batch);

}  // namespace frugal
