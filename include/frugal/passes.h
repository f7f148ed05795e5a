// Graph passes: pure functions over the graph, deterministic, in topological
// order. The training pipeline is
//   config -> FuseBnRelu -> ToMixedPrecision -> forward graph
//   forward graph -> InferShapes -> Gradient -> InferShapes -> ChooseLayouts
//   (CPU graphs) -> PlanMemory
// and inference skips Gradient.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/graph.h"
#include "frugal/op.h"

namespace frugal {

// Fills graph->shapes for every entry, given the shapes of the input
// variables (by node name). Parameter shapes are inferred from the ops that
// read them. Throws Error naming the node on a mismatch.
void InferShapes(Graph* graph, const std::vector<std::pair<std::string, Shape>>& input_shapes);

// Sets graph->layouts (shapes inferred): channels-last (Layout::kNhwc) for
// the 4-D activations between ops whose CPU kernels take it
// (OpDef::ChannelsLast) where a convolution or pooling then needs no
// reorder; plain everywhere else, and always for variables, parameter
// gradients and graph outputs (src/passes/layout.cc says how it groups).
void ChooseLayouts(Graph* graph);

// A forward graph with each relu that alone reads a batch_norm's output
// fused into that batch_norm (act_type relu): one memory pass instead of two.
// BuildGraph applies it; shapes are not set.
Graph FuseBnRelu(const Graph& g);

// A forward graph computing in `compute`: unchanged for float32; for
// bfloat16, the activations of every op with bfloat16 kernels (OpDef::Bf16)
// become bfloat16, with cast nodes where values cross to and from float32
// ops; parameters, losses and graph outputs stay float32 (mixed precision).
// BuildGraph applies it after FuseBnRelu; shapes are not set.
Graph ToMixedPrecision(const Graph& g, DType compute);

// Which forward results the backward pass finds kept and which it
// recomputes: one level per forward node. 0: kept from the forward pass.
// k > 0: a checkpoint of recursion level k (recomputed, then kept while the
// level-k segment after it is differentiated). kDropped: recomputed where
// needed. Variables are always 0. Empty: everything kept.
using KeepLevels = std::vector<int>;
constexpr int kDropped = 1 << 30;

// Appends the backward graph: gradient nodes for every forward node on a path
// from a parameter to a loss head, with add_n where an entry's gradient has
// several parts. Where `keep` drops a forward result, a recomputed copy (a
// mirror, Node::mirror_of) is added just before its first backward reader,
// reading the nearest kept results; gradient nodes read the mirrors. Sets
// graph->grad_of. Throws Error if the graph has no loss.
void Gradient(Graph* graph, const KeepLevels& keep = {});

struct MemoryPlan;

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
// What the budget planner throws when no plan's arena fits the budget:
// need_bytes is the smallest arena it found (and the message says so).
struct BudgetError : Error {
  BudgetError(const std::string& msg, int64_t need) : Error(msg), need_bytes(need) {}
  int64_t need_bytes;
};

// "none", "inplace", "share", "drop_cheap", "sqrt", "logn", "budget=7GB",
// "budget=auto", "limit=8GiB"; throws Error naming the choices.
MemoryStrategy ParseMemoryStrategy(const std::string& text);
// Every strategy that needs no argument (all but budget).
std::vector<MemoryStrategy> AllMemoryStrategies();

// Forward FLOPs of node i (shapes inferred), by its op's declaration.
double NodeFlops(const Graph& g, int i);
// What recomputing node i costs: its predicted ms with a cost table, else
// its FLOPs. The planner's searches compare plans by the sum of these.
double RecomputeCost(const Graph& g, int i, const CostTable* costs);

// Recompute policies on a forward graph with shapes inferred. Each applies
// the config annotations: loss heads, graph outputs and nodes marked
// checkpoint are kept; nodes marked mirror are dropped.
KeepLevels ApplyAnnotations(const Graph& fwd, KeepLevels levels);
// Cheap ops (Cost kCheap/kFree) dropped, the rest kept; a split candidate is
// kept where recomputing it would reach back through another dropped
// candidate (so chains of residual adds are not recomputed end to end).
KeepLevels DropCheapLevels(const Graph& fwd);
// Candidate segment boundaries: nodes marked stage, or if none is marked,
// the articulation points of the forward graph (a node whose output is the
// only forward result live across the boundary after it). Of a training
// graph, its forward nodes'.
std::vector<int> SplitCandidates(const Graph& fwd);
// The paper's greedy segmentation with segment budget b bytes: checkpoints at
// candidates where the bytes since the last one exceed b; the rest dropped
// but the last segment, whose backward comes first.
// A checkpoint keeps every forward result that crosses the boundary after it
// (the node itself at an articulation point; all layers' state at a stage
// mark of an unrolled RNN).
KeepLevels SqrtLevels(const Graph& fwd, int64_t b);
// Recursive halving of the candidate list: O(log n) checkpoints alive at once.
KeepLevels LognLevels(const Graph& fwd);

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

// What a training plan keeps and recomputes, block by block: its forward
// nodes cut after each split candidate, as the budget planner cuts them.
struct BlockReport {
  int first = 0, last = 0;      // its first and last forward node
  int nodes = 0;                // its forward nodes (variables excluded)
  std::vector<int> recomputed;  // of them, those the backward pass recomputes
  int64_t kept_bytes = 0;       // its outputs kept for the backward pass
  double recompute_flops = 0;   // of its recomputations (a node recomputed twice counts twice)
};
std::vector<BlockReport> ExplainBlocks(const Graph& train);

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

// The training graph of a forward graph under a strategy: keep levels chosen
// (searched, for sqrt and budget), gradient with mirrors, shapes, memory
// plan. A budget that no plan meets throws Error naming the smallest
// feasible budget.
struct TrainingPlan {
  Graph graph;
  MemoryPlan plan;
  KeepLevels keep;
};
// On the CPU (dev) the training graph's layouts are chosen (ChooseLayouts)
// before it is planned: a workspace depends on them. workers: how many CPU
// workers the engine runs a training graph on (CpuWorkersFor, train.h);
// a recomputing plan for two is placed for them (PlaceWithGap). None: one.
TrainingPlan PlanTraining(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                          const MemoryStrategy& strategy, Device dev = {},
                          const std::function<int(const Graph& train)>& workers = {});

// Checks a plan: no two entries whose lifetimes overlap overlap in memory
// (unless one is an in-place successor of the other), and everything fits in
// the arena. Returns an empty string when sound, else what is wrong.
std::string VerifyPlan(const Graph& graph, const MemoryPlan& plan);

// One JSON object (no newline) with the plan's figures.
std::string PlanToJson(const MemoryPlan& plan, int64_t batch);

}  // namespace frugal
