// plan-memory: liveness over the execution order, in-place reuse, then
// offsets in one arena.
//
// 1. Every entry that some node reads (or that is a graph output, or that its
//    op writes together with one that is read: OpDef::WritesOutputsTogether)
//    and that is not external gets bytes = shape x dtype, a birth step (its
//    producer) and a death step (its last reader; graph outputs live to the
//    end; an unread entry dies where it is born).
// 2. Blocks: an entry starts a block, or (in place) joins the block of an
//    input that dies at this very step, when the op allows it and the sizes
//    match. Op workspaces are blocks that live for one step. A gradient sum
//    add_n(sum, part) whose part comes from an op that can add into its
//    output (OpDef::AddTo) is folded under every strategy, so that all give
//    the same bits: the part is added into the sum's block (OpReq::kAdd), and
//    the add_n, in place, does nothing (kNull).
// 3. Offsets: without sharing, blocks are laid end to end; with sharing,
//    the best of several greedy placements (each block in turn at the
//    lowest offset, or in the smallest gap, that no block with an
//    overlapping lifetime occupies) and a local search on the greedy order
//    (PlaceShared).
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <climits>
#include <iterator>
#include <random>
#include <tuple>
#include <utility>

#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"

namespace frugal {
namespace {

using Block = ArenaBlock;

int64_t Align(int64_t bytes) { return (bytes + MemoryPlan::kAlign - 1) / MemoryPlan::kAlign * MemoryPlan::kAlign; }

// Death step of every entry: its last reader, the end for graph outputs, -1
// for entries nobody reads.
std::vector<int> LastUse(const Graph& g) {
  std::vector<int> last(g.num_entries(), -1);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) last[g.EntryId(e)] = i;
  for (const Entry& e : g.outputs) last[g.EntryId(e)] = g.num_nodes();
  return last;
}

// Entries that live outside the arena: variables and parameter gradients.
std::vector<bool> External(const Graph& g) {
  std::vector<bool> ext(g.num_entries(), false);
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).is_variable()) ext[g.EntryId({i, 0})] = true;
  }
  for (const Entry& e : g.grad_of)
    if (e.valid()) ext[g.EntryId(e)] = true;
  return ext;
}

// Readers of every entry (graph outputs count as one more).
std::vector<int> ReaderCount(const Graph& g) {
  std::vector<int> readers(g.num_entries(), 0);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) ++readers[g.EntryId(e)];
  for (const Entry& e : g.outputs) ++readers[g.EntryId(e)];
  return readers;
}

// Folded gradient sums: into[part] = the sum entry it is added into, for
// each add_n(sum, part) of two arena entries read by that add_n alone, whose
// part comes from an op that adds into that output (OpDef::AddTo) after
// the sum was made, and whose result stays in the arena; -1 elsewhere.
std::vector<int> FoldedSums(const Graph& g, const std::vector<bool>& ext, const std::vector<int64_t>& bytes) {
  std::vector<int> into(g.num_entries(), -1);
  const std::vector<int> readers = ReaderCount(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (!n.op || !n.op->sums_inputs() || n.inputs.size() != 2 || n.fwd >= 0) continue;
    const Entry sum = n.inputs[0], part = n.inputs[1];
    const int s = g.EntryId(sum), p = g.EntryId(part), o = g.EntryId({i, 0});
    const Node& producer = g.node(part.node);
    const std::vector<int>& add_to = producer.is_variable() ? std::vector<int>{} : producer.op->add_to();
    if (ext[s] || ext[p] || ext[o] || readers[s] != 1 || readers[p] != 1 || sum.node >= part.node ||
        bytes[s] != bytes[p] || bytes[o] != bytes[s] || g.node(sum.node).is_variable() ||
        std::find(add_to.begin(), add_to.end(), part.index) == add_to.end())
      continue;
    into[p] = s;
  }
  return into;
}

// Tries to put entry `out` of node i into the block of one of its inputs.
bool TryInplace(const Graph& g, int i, int out, const std::vector<int64_t>& bytes, const std::vector<bool>& ext,
                const std::vector<int>& last, std::vector<int>* entry_block, std::vector<Block>* blocks) {
  const Node& n = g.node(i);
  for (const auto& [in_idx, out_idx] : n.op->inplace()) {
    if (out_idx != out || in_idx >= static_cast<int>(n.inputs.size())) continue;
    int ie = g.EntryId(n.inputs[in_idx]);
    int oe = g.EntryId({i, out});
    int b = (*entry_block)[ie];
    if (ext[ie] || b < 0 || last[ie] != i || bytes[ie] != bytes[oe]) continue;
    Block& blk = (*blocks)[b];
    if (blk.end != i) continue;  // another entry of the block is still read later
    blk.end = last[oe];
    (*entry_block)[oe] = b;
    return true;
  }
  return false;
}

void PlaceEndToEnd(std::vector<Block>* blocks) {
  int64_t off = 0;
  for (Block& b : *blocks) {
    b.offset = off;
    off += b.size;
  }
}

// Offset ranges [first, second), sorted, with touching ranges merged.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

void AddRange(Ranges* ranges, int64_t begin, int64_t end) {
  auto it = std::lower_bound(ranges->begin(), ranges->end(), begin,
                             [](const std::pair<int64_t, int64_t>& r, int64_t v) { return r.second < v; });
  auto last = it;
  for (; last != ranges->end() && last->first <= end; ++last) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
  }
  if (it == last) {
    ranges->insert(it, {begin, end});
    return;
  }
  *it = {begin, end};  // the first range it meets becomes the merged one
  ranges->erase(it + 1, last);
}

// The leaves of a binary tree over steps: a power of 2, at least one.
int Leaves(int num_steps) {
  int leaves = 1;
  while (leaves < num_steps) leaves *= 2;
  return leaves;
}

// The placed blocks in a segment tree over steps: a node holds, merged, the
// offset ranges of the blocks that cover all its steps (own) and of every
// block that meets one of its steps (met). The blocks whose lifetimes
// overlap steps [start, end] are those in `met` of the nodes that tile
// [start, end] and in `own` of their ancestors, so a query reads about
// 4 log2(steps) lists of merged ranges and steps over ranges, not over the
// blocks live beside it (ResNet-1001's logn plan: 20,087 blocks, about 1,000
// live at each step, placed in 40 ms instead of 700).
class StepTree {
 public:
  // Nodes 1 .. 2 x leaves - 1, node k's children 2k and 2k + 1.
  explicit StepTree(int num_steps) : leaves_(Leaves(num_steps)), own_(2 * leaves_), met_(2 * leaves_) {}

  // Where `size` bytes meet no placed block that lives at one of the steps
  // [start, end]: the lowest such offset (first fit), or the start of the
  // smallest gap between placed blocks that holds them (best fit; the top
  // if none does).
  int64_t Fit(int start, int end, int64_t size, bool best_fit) {
    lists_.clear();
    Collect(1, 0, leaves_ - 1, start, end);
    return best_fit ? BestFit(size) : FirstFit(size);
  }

  void Add(const Block& b) { Insert(1, 0, leaves_ - 1, b); }

  void Clear() {  // keeps the lists' capacity for the next placement
    for (Ranges& r : own_) r.clear();
    for (Ranges& r : met_) r.clear();
  }

 private:
  void Collect(int node, int lo, int hi, int start, int end) {
    if (end < lo || hi < start) return;
    const bool covered = start <= lo && hi <= end;
    const Ranges& r = covered ? met_[node] : own_[node];
    if (!r.empty()) lists_.push_back(&r);
    if (covered || lo == hi) return;
    const int mid = (lo + hi) / 2;
    Collect(2 * node, lo, mid, start, end);
    Collect(2 * node + 1, mid + 1, hi, start, end);
  }

  void Insert(int node, int lo, int hi, const Block& b) {
    if (b.end < lo || hi < b.start) return;
    AddRange(&met_[node], b.offset, b.offset + b.size);
    if (b.start <= lo && hi <= b.end) {
      AddRange(&own_[node], b.offset, b.offset + b.size);
      return;
    }
    const int mid = (lo + hi) / 2;
    Insert(2 * node, lo, mid, b);
    Insert(2 * node + 1, mid + 1, hi, b);
  }

  int64_t FirstFit(int64_t size) const {
    int64_t offset = 0;
    // Until offset clears every list in a row: a list's first range that
    // ends past offset pushes it to that end if it starts before offset + size.
    for (size_t i = 0, clear = 0; clear < lists_.size();) {
      const Ranges& r = *lists_[i];
      auto it = std::upper_bound(r.begin(), r.end(), offset,
                                 [](int64_t v, const std::pair<int64_t, int64_t>& x) { return v < x.second; });
      if (it != r.end() && it->first < offset + size) {
        offset = it->second;
        clear = 0;
      } else {
        ++clear;
        i = (i + 1) % lists_.size();
      }
    }
    return offset;
  }

  int64_t BestFit(int64_t size) {
    merged_.clear();
    for (const Ranges* r : lists_) merged_.insert(merged_.end(), r->begin(), r->end());
    std::sort(merged_.begin(), merged_.end());
    int64_t offset = 0, best = -1, best_gap = INT64_MAX;
    for (const auto& [begin, end] : merged_) {
      const int64_t gap = begin - offset;
      if (gap >= size && gap < best_gap) {
        best_gap = gap;
        best = offset;
      }
      offset = std::max(offset, end);
    }
    return best >= 0 ? best : offset;
  }

  int leaves_;
  std::vector<Ranges> own_, met_;
  Ranges merged_;
  std::vector<const Ranges*> lists_;
};

// Places blocks in the given order, each at the lowest offset (first fit)
// or in the smallest gap that holds it (best fit), free of every placed
// block whose lifetime overlaps. Returns the arena size, or stops as soon
// as it exceeds `limit` (the arena only grows) and returns INT64_MAX.
int64_t PlaceInOrder(const std::vector<int>& order, bool best_fit, int64_t limit, StepTree* placed,
                     std::vector<Block>* blocks) {
  placed->Clear();
  int64_t arena = 0;
  for (int id : order) {
    Block& b = (*blocks)[id];
    b.offset = placed->Fit(b.start, b.end, b.size, best_fit);
    placed->Add(b);
    arena = std::max(arena, b.offset + b.size);
    if (arena > limit) return INT64_MAX;
  }
  return arena;
}

// Per block, the most bytes live at one step of its lifetime (a max-tree
// over the steps' live bytes).
std::vector<int64_t> PeakLive(const std::vector<Block>& blocks, int num_steps) {
  const int leaves = Leaves(num_steps);
  std::vector<int64_t> tree(2 * leaves, 0);
  for (const Block& b : blocks) {
    CHECK(0 <= b.start && b.start <= b.end && b.end < num_steps) << "block of steps " << b.start << ".." << b.end;
    tree[leaves + b.start] += b.size;
    if (b.end + 1 < num_steps) tree[leaves + b.end + 1] -= b.size;
  }
  for (int t = 1; t < num_steps; ++t) tree[leaves + t] += tree[leaves + t - 1];
  for (int i = leaves - 1; i >= 1; --i) tree[i] = std::max(tree[2 * i], tree[2 * i + 1]);
  std::vector<int64_t> peak;
  peak.reserve(blocks.size());
  for (const Block& b : blocks) {
    int64_t m = 0;
    for (int lo = b.start + leaves, hi = b.end + leaves + 1; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) m = std::max(m, tree[lo++]);
      if (hi & 1) m = std::max(m, tree[--hi]);
    }
    peak.push_back(m);
  }
  return peak;
}

// Sharing: greedy placements in several orders, first and best fit; the
// smallest arena wins. The first order takes the blocks live at the busiest
// steps first (by the most bytes live at one step of their lifetime, then
// by size): they are the ones that must pack without a gap for the arena
// to meet the lower bound (ResNet-1001's logn plan: 1.000 of the bound,
// 1.022 by size; the 4x1024 LSTM's sqrt plan over 1,000 steps: 1.000, 1.033
// by online best fit). Then by size (TFLite's arena planner), lifetime,
// size x lifetime and start. Placing stops once the arena is good enough
// (the lower bound, or the budget a search asks about); past
// kManyBlocks only the first order runs, first fit, and then by size,
// first fit, where the first missed by more than 2% (the logn plans of
// LSTMs of 128-512 steps: 1.12-1.17 of the bound by the first, 1.000-1.003
// by size; on the large plans of models/ no other order beat the first).
// Below kSearchLimit blocks a local search follows: the winning order with
// one block moved to the front or two swapped, kept when the arena does not
// grow, until the arena is good enough or the trials run out (a fixed-seed
// generator: plans stay deterministic). With a limit, a trial stops as soon
// as its arena exceeds it, and none within it returns false, the blocks
// unplaced.
constexpr size_t kManyBlocks = 4000;
constexpr size_t kSearchLimit = 2000;

bool PlaceShared(std::vector<Block>* blocks, int num_steps, int64_t good_enough, int64_t limit = INT64_MAX) {
  const std::vector<Block>& bl = *blocks;
  const size_t n = bl.size();
  const std::vector<int64_t> peak = PeakLive(bl, num_steps);
  std::vector<int> by_peak(n);
  for (size_t i = 0; i < n; ++i) by_peak[i] = static_cast<int>(i);
  std::vector<int> by_size = by_peak, by_life = by_peak, by_area = by_peak, by_start = by_peak;  // made in start order
  auto life = [&](int a) { return bl[a].end - bl[a].start + 1; };
  auto area = [&](int a) { return static_cast<double>(bl[a].size) * life(a); };
  std::stable_sort(by_peak.begin(), by_peak.end(),
                   [&](int a, int b) { return peak[a] != peak[b] ? peak[a] > peak[b] : bl[a].size > bl[b].size; });
  std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) { return bl[a].size > bl[b].size; });
  std::stable_sort(by_life.begin(), by_life.end(),
                   [&](int a, int b) { return life(a) != life(b) ? life(a) > life(b) : bl[a].size > bl[b].size; });
  std::stable_sort(by_area.begin(), by_area.end(), [&](int a, int b) { return area(a) > area(b); });
  std::vector<Block> best;
  std::vector<int> best_order;
  int64_t best_arena = limit;  // trials stop as soon as they exceed it
  bool best_fit = false;
  StepTree placed(num_steps);
  auto consider = [&](std::vector<int> order, bool fit, bool keep_ties) {
    std::vector<Block> trial = bl;
    const int64_t arena = PlaceInOrder(order, fit, best_arena, &placed, &trial);  // a worse trial stops early
    if (arena > best_arena || (arena == best_arena && !keep_ties && !best.empty())) return;
    best_arena = arena;
    best = std::move(trial);
    best_order = std::move(order);
    best_fit = fit;
  };
  for (const std::vector<int>* order : {&by_peak, &by_size, &by_life, &by_area, &by_start})
    for (bool fit : {false, true}) {
      const bool runs = n <= kManyBlocks || (order == &by_peak && !fit) ||
                        (order == &by_size && !fit && best_arena > good_enough * 1.02);
      if (runs && (best.empty() || best_arena > good_enough)) consider(*order, fit, false);
    }
  if (best.empty()) return false;  // nothing within limit
  if (n <= kSearchLimit) {
    std::mt19937 gen(12345);
    const size_t trials = std::min<size_t>(1000, 20000000 / (n * n + 1));
    for (size_t t = 0; t < trials && best_arena > good_enough; ++t) {
      std::vector<int> order = best_order;
      const size_t i = gen() % n, j = gen() % n;
      if (t % 2 == 0)
        std::rotate(order.begin(), order.begin() + i, order.begin() + i + 1);  // block i to the front
      else
        std::swap(order[i], order[j]);
      consider(std::move(order), best_fit, true);
    }
  }
  *blocks = std::move(best);
  return true;
}

// The bytes live at each step 0 .. num_steps (one more entry, 0, past the end).
std::vector<int64_t> LiveBytes(const std::vector<Block>& blocks, int num_steps) {
  std::vector<int64_t> live(num_steps + 2, 0);
  for (const Block& b : blocks) {
    live[b.start] += b.size;
    live[b.end + 1] -= b.size;
  }
  for (size_t t = 1; t < live.size(); ++t) live[t] += live[t - 1];
  return live;
}

// The largest total of live bytes at one step, and the first step of it.
std::pair<int64_t, int> LowerBound(const std::vector<Block>& blocks, int num_steps) {
  const std::vector<int64_t> live = LiveBytes(blocks, num_steps);
  const auto peak = std::max_element(live.begin(), live.end());
  return {*peak, static_cast<int>(peak - live.begin())};
}

}  // namespace

namespace {
const char* const kNames[] = {"none", "inplace", "share", "drop_cheap", "sqrt", "logn", "budget"};
}  // namespace

namespace {
// A size in the largest whole unit, binary or decimal, as a user writes it
// (4GiB, not 4294967296); ParseBytes reads it back to the same bytes.
std::string SizeAsWritten(int64_t bytes) {
  const std::pair<const char*, int64_t> units[] = {{"GiB", int64_t{1} << 30}, {"GB", 1000000000}, {"MiB", 1 << 20},
                                                   {"MB", 1000000},           {"KiB", 1024},      {"KB", 1000}};
  for (const auto& [unit, size] : units)
    if (bytes % size == 0) return Fmt(bytes / size, unit);
  return Fmt(bytes);
}
}  // namespace

std::string MemoryStrategy::Name() const {
  if (kind != kBudget) return kNames[kind];
  if (limit()) return "limit=" + SizeAsWritten(limit_bytes);
  if (auto_budget()) return "budget=auto";
  return "budget=" + SizeAsWritten(budget_bytes);
}

MemoryStrategy ParseMemoryStrategy(const std::string& text) {
  if (text == "budget=auto") return {MemoryStrategy::kBudget, MemoryStrategy::kAutoBudget};
  for (const char* prefix : {"budget=", "limit="}) {
    if (text.rfind(prefix, 0) != 0) continue;
    const int64_t bytes = ParseBytes(text.substr(std::strlen(prefix)));
    FRUGAL_REQUIRE(bytes > 0, "memory strategy '", text, "': the size must be positive");
    MemoryStrategy s(MemoryStrategy::kBudget, prefix[0] == 'b' ? bytes : 0);
    if (prefix[0] == 'l') s.limit_bytes = bytes;
    return s;
  }
  for (int k = 0; k < MemoryStrategy::kBudget; ++k)
    if (text == kNames[k]) return MemoryStrategy(static_cast<MemoryStrategy::Kind>(k));
  throw Error(Fmt("unknown memory strategy '", text, "' (choose none, inplace, share, drop_cheap, sqrt, logn, ",
                  "budget=SIZE, e.g. budget=7GB, budget=auto, or limit=SIZE for the whole process)"));
}

std::vector<MemoryStrategy> AllMemoryStrategies() {
  std::vector<MemoryStrategy> all;
  for (int k = 0; k < MemoryStrategy::kBudget; ++k) all.push_back(static_cast<MemoryStrategy::Kind>(k));
  return all;
}

double NodeFlops(const Graph& g, int i) {
  const Node& n = g.node(i);
  if (n.is_variable()) return 0;
  thread_local std::vector<Shape> in, out;  // reused: a plan search counts every node of every candidate
  g.InputShapes(i, &in);
  g.OutputShapes(i, &out);
  return n.op->Flops(n, in, out);
}

// FLOPs of the step without recomputation, and of the recomputations; with
// a cost table, the recomputed ops' time at their measured times (scaled to
// wall time by the table's wall_per_schedule_ms), the planners' price.
void CountCosts(const Graph& g, const CostTable* costs, MemoryPlan* plan) {
  std::vector<double> node_ms;
  if (costs) node_ms = costs->NodeMs(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    const double f = NodeFlops(g, i);
    if (n.mirror_of >= 0) {
      plan->extra_flops += f;
      ++plan->num_recomputed;
      if (costs) plan->extra_ms += node_ms[i];
    } else {
      plan->step_flops += f;
    }
  }
  if (costs) plan->extra_ms *= costs->wall_per_schedule_ms;
}

namespace {

int64_t ArenaOf(const std::vector<Block>& blocks) {
  int64_t arena = 0;
  for (const Block& b : blocks) arena = std::max(arena, b.offset + b.size);
  return arena;
}

// A placement (the offsets of plan->blocks) into the plan: its arena and
// the offsets of its entries and workspaces.
void TakePlacement(const Graph& g, MemoryPlan* plan) {
  plan->arena_bytes = ArenaOf(plan->blocks);
  plan->entry_offset.assign(g.num_entries(), -1);
  for (int e = 0; e < g.num_entries(); ++e)
    if (plan->entry_block[e] >= 0) plan->entry_offset[e] = plan->blocks[plan->entry_block[e]].offset;
  plan->workspace_offset.assign(g.num_nodes(), -1);
  for (const Block& b : plan->blocks)
    if (b.entry < 0) plan->workspace_offset[b.node] = b.offset;
}

// The bytes that live outside the arena: parameters and aux state, data
// inputs, recurrent state, parameter gradients.
void CountOutsideArena(const Graph& g, const std::vector<int64_t>& bytes, MemoryPlan* plan) {
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.var == VarKind::kParam || n.var == VarKind::kAux) plan->param_bytes += bytes[g.EntryId({i, 0})];
    if (n.var == VarKind::kInput) plan->input_bytes += bytes[g.EntryId({i, 0})];
    if (n.var == VarKind::kState) plan->state_bytes += bytes[g.EntryId({i, 0})];
  }
  for (const Entry& e : g.grad_of)
    if (e.valid()) plan->param_grad_bytes += bytes[g.EntryId(e)];
}

// The vectors WorkspaceOf fills, kept across nodes.
struct WorkspaceScratch {
  std::vector<Shape> in_shapes, out_shapes;
  std::vector<Layout> in_layouts, out_layouts;
};

// Node i's workspace bytes, as its op asks for its shapes, layouts and type;
// a kernel library's refusal of the sizes is an Error naming the node.
int64_t WorkspaceOf(const Graph& g, int i, WorkspaceScratch* w) {
  const Node& n = g.node(i);
  g.InputShapes(i, &w->in_shapes);
  g.OutputShapes(i, &w->out_shapes);
  w->in_layouts.clear();
  for (const Entry& e : n.inputs) w->in_layouts.push_back(g.layout(e));
  w->out_layouts.clear();
  for (int k = 0; k < g.NumOutputs(i); ++k) w->out_layouts.push_back(g.layout({i, k}));
  try {
    const DType t = n.inputs.empty() ? DType::kFloat32 : g.dtype(n.inputs[0]);
    return n.op->WorkspaceBytes({n, w->in_shapes, w->out_shapes, t, w->in_layouts, w->out_layouts});
  } catch (const Error&) { throw; } catch (const std::exception& e) {  // a library's (oneDNN refusing the sizes)
    std::string shapes;
    for (const Shape& sh : w->in_shapes) shapes += (shapes.empty() ? "" : ", ") + sh.ToString();
    throw Error(Fmt(n.Where(), ": the kernel library refuses inputs ", shapes, " (", e.what(),
                    "); check the sizes, which may be beyond what it takes"));
  }
}

}  // namespace

MemoryPlan PlanMemory(const Graph& g, const MemoryStrategy& strategy, bool estimate, int64_t fit_bytes) {
  auto t0 = std::chrono::steady_clock::now();
  CHECK_EQ(static_cast<int>(g.shapes.size()), g.num_entries()) << "infer shapes before planning memory";
  MemoryPlan plan;
  plan.num_nodes = g.num_nodes();
  plan.strategy = strategy;
  const int num_entries = g.num_entries();
  std::vector<int> last = LastUse(g);
  std::vector<bool> ext = External(g);
  std::vector<int64_t> bytes(num_entries);
  for (int e = 0; e < num_entries; ++e) bytes[e] = g.EntryBytes(e);

  CountOutsideArena(g, bytes, &plan);

  // Liveness and blocks, in execution order.
  plan.entry_req.assign(num_entries, OpReq::kWrite);
  plan.entry_block.assign(num_entries, -1);
  plan.workspace_bytes.assign(g.num_nodes(), 0);
  std::vector<Block> blocks;
  const std::vector<int> into = FoldedSums(g, ext, bytes);
  std::vector<bool> folded_add(g.num_nodes(), false);
  for (int e = 0; e < num_entries; ++e)
    if (into[e] >= 0) folded_add[last[e]] = true;  // the add_n reading the part
  WorkspaceScratch scratch;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    bool any_read = false;
    for (int k = 0; k < g.NumOutputs(i); ++k) any_read = any_read || last[g.EntryId({i, k})] >= 0;
    const bool made_unread = any_read && n.op->writes_outputs_together();
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      int e = g.EntryId({i, k});
      if (ext[e]) continue;
      if (last[e] < 0 && !made_unread) {
        plan.entry_req[e] = OpReq::kNull;
        continue;
      }
      const int fold_into = into[e] >= 0 ? into[e] : folded_add[i] ? g.EntryId(n.inputs[0]) : -1;
      if (fold_into >= 0) {  // a part added into its sum, or the sum's add_n, which does nothing
        const int b = plan.entry_block[fold_into];
        plan.entry_block[e] = b;
        plan.entry_req[e] = into[e] >= 0 ? OpReq::kAdd : OpReq::kNull;
        blocks[b].end = std::max(blocks[b].end, last[e]);
        continue;
      }
      plan.no_sharing_bytes += Align(bytes[e]);
      if (strategy.kind != MemoryStrategy::kNone && last[e] >= 0 &&
          TryInplace(g, i, k, bytes, ext, last, &plan.entry_block, &blocks)) {
        ++plan.num_inplace;
        continue;
      }
      plan.entry_block[e] = static_cast<int>(blocks.size());
      blocks.push_back({i, std::max(last[e], i), Align(bytes[e]), -1, e, i});  // an unread output lives for its step
    }
    if (!n.op->has_workspace()) continue;
    const int64_t ws = WorkspaceOf(g, i, &scratch);
    if (ws > 0) {
      plan.workspace_bytes[i] = ws;
      plan.no_sharing_bytes += Align(ws);
      blocks.push_back({i, i, Align(ws), -1, -1, i});
    }
  }

  std::tie(plan.lower_bound_bytes, plan.peak_step) = LowerBound(blocks, g.num_nodes());
  if (estimate && strategy.shares()) {
    plan.arena_bytes = plan.lower_bound_bytes;  // no offsets: for comparing candidate plans
    CountCosts(g, strategy.costs.get(), &plan);
    return plan;
  }
  if (strategy.shares())  // steps 0 .. num_nodes: graph outputs live to the end
    PlaceShared(&blocks, g.num_nodes() + 1, std::max(plan.lower_bound_bytes, fit_bytes));
  else
    PlaceEndToEnd(&blocks);
  plan.num_blocks = static_cast<int>(blocks.size());
  plan.blocks = std::move(blocks);
  CountCosts(g, strategy.costs.get(), &plan);
  TakePlacement(g, &plan);
  plan.plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

bool PlaceWithGap(const Graph& g, int reuse_gap, int64_t limit, MemoryPlan* plan) {
  CHECK(plan->strategy.shares() && static_cast<int>(plan->blocks.size()) == plan->num_blocks)
      << "PlaceWithGap needs a placed sharing plan";
  // Each block, in opening order, holds its bytes up to reuse_gap steps past
  // its death while the bytes held at every step stay within the lower bound.
  std::vector<Block> blocks = plan->blocks;
  const int last = g.num_nodes();
  std::vector<int64_t> held = LiveBytes(blocks, last);
  for (Block& b : blocks)
    for (const int until = std::min(last, b.end + reuse_gap);
         b.end < until && held[b.end + 1] + b.size <= plan->lower_bound_bytes;)
      held[++b.end] += b.size;
  if (!PlaceShared(&blocks, last + 1, plan->lower_bound_bytes, limit)) return false;
  for (size_t b = 0; b < blocks.size(); ++b) plan->blocks[b].offset = blocks[b].offset;  // lifetimes stay true
  plan->reuse_gap = reuse_gap;
  TakePlacement(g, plan);
  return true;
}

std::string VerifyPlan(const Graph& g, const MemoryPlan& plan) {
  std::vector<int> last = LastUse(g);
  struct Item {
    int entry, start, end;
    int64_t off, size;
  };
  std::vector<Item> items;
  for (int e = 0; e < g.num_entries(); ++e) {
    if (plan.entry_offset[e] < 0) continue;
    int64_t size = g.EntryBytes(e);
    if (plan.entry_offset[e] % MemoryPlan::kAlign != 0) return Fmt("entry ", e, " is not aligned");
    if (plan.entry_offset[e] + size > plan.arena_bytes) return Fmt("entry ", e, " overruns the arena");
    items.push_back({e, g.EntryOf(e).node, last[e], plan.entry_offset[e], size});
  }
  // A sweep over the steps: each entry against those still live when it is
  // born (an entry nothing reads, end -1, is never live).
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.start < b.start; });
  std::vector<Item> live;
  for (const Item& y : items) {
    if (y.end < y.start) continue;
    live.erase(std::remove_if(live.begin(), live.end(), [&](const Item& x) { return x.end < y.start; }), live.end());
    for (const Item& x : live) {
      const bool mem = x.off < y.off + y.size && y.off < x.off + x.size;
      // An in-place successor is born at the step its predecessor dies; a
      // gradient part is added into its sum (kAdd).
      const bool same_block = plan.entry_block[x.entry] == plan.entry_block[y.entry];
      const bool handoff =
          same_block && (x.end == y.start || y.end == x.start || plan.entry_req[x.entry] == OpReq::kAdd ||
                         plan.entry_req[y.entry] == OpReq::kAdd);
      if (mem && !handoff) {
        auto name = [&](int e) {
          Entry en = g.EntryOf(e);
          return Fmt(g.node(en.node).name, ":", en.index);
        };
        return Fmt("entries ", name(x.entry), " and ", name(y.entry), " are live together in overlapping memory");
      }
    }
    live.push_back(y);
  }
  return "";
}

std::string PlanToJson(const MemoryPlan& p, int64_t batch) {
  return Fmt("{\"strategy\":\"", p.strategy.Name(), "\",\"batch\":", batch, ",\"arena_bytes\":", p.arena_bytes,
             ",\"lower_bound_bytes\":", p.lower_bound_bytes, ",\"param_bytes\":", p.param_bytes,
             ",\"param_grad_bytes\":", p.param_grad_bytes, ",\"input_bytes\":", p.input_bytes,
             ",\"no_sharing_bytes\":", p.no_sharing_bytes, ",\"num_nodes\":", p.num_nodes,
             ",\"num_blocks\":", p.num_blocks, ",\"num_inplace\":", p.num_inplace,
             ",\"num_recomputed\":", p.num_recomputed, ",\"extra_flops_ratio\":", p.extra_flops_ratio(),
             ",\"step_flops\":", p.step_flops, ",\"reuse_gap\":", p.reuse_gap, ",\"plan_ms\":", p.plan_ms,
             ",\"num_builds\":", p.num_builds, ",\"found_by\":\"", p.found_by, "\"",
             p.priced() ? Fmt(",\"predicted_step_ms\":", p.step_ms, ",\"predicted_extra_ms\":", p.extra_ms) : "", "}");
}

}  // namespace frugal
