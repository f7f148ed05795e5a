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
//    overlapping lifetime occupies), online best fit, and a local search
//    on the greedy order (PlaceShared).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <iterator>
#include <map>
#include <random>

#include "frugal/passes.h"

namespace frugal {
namespace {

using Block = ArenaBlock;

int64_t Align(int64_t bytes) { return (bytes + MemoryPlan::kAlign - 1) / MemoryPlan::kAlign * MemoryPlan::kAlign; }

bool Overlap(const Block& a, const Block& b) { return a.start <= b.end && b.start <= a.end; }

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
    if (!n.op || n.op->name() != "add_n" || n.inputs.size() != 2 || n.fwd >= 0) continue;
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

// Places blocks in the given order, each at the lowest offset (first fit)
// or in the smallest gap that holds it (best fit), free of every placed
// block whose lifetime overlaps. Returns the arena size.
int64_t PlaceInOrder(const std::vector<int>& order, bool best_fit, std::vector<Block>* blocks) {
  // Placed blocks by offset (blocks live at the same time never share an
  // offset), so the ones that clash come out in offset order unsorted.
  std::vector<const Block*> placed;
  int64_t arena = 0;
  for (int id : order) {
    Block& b = (*blocks)[id];
    int64_t off = 0, best = -1, best_gap = INT64_MAX;
    for (const Block* c : placed) {
      if (!Overlap(b, *c)) continue;
      int64_t gap = c->offset - off;
      if (gap >= b.size) {
        if (!best_fit) break;
        if (gap < best_gap) {
          best_gap = gap;
          best = off;
        }
      }
      off = std::max(off, c->offset + c->size);
    }
    b.offset = (best_fit && best >= 0) ? best : off;
    arena = std::max(arena, b.offset + b.size);
    auto at = std::upper_bound(placed.begin(), placed.end(), b.offset,
                               [](int64_t offset, const Block* c) { return offset < c->offset; });
    placed.insert(at, &b);
  }
  return arena;
}

// Online best fit in execution order: at each step, blocks that died at the
// previous step return their range to a free list (merged with neighbours),
// then each block born here takes the smallest free range that holds it, or
// the top of the arena. O(n log n).
int64_t PlaceOnline(std::vector<Block>* blocks) {
  std::vector<int> order(blocks->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::vector<int> by_end = order;
  std::stable_sort(by_end.begin(), by_end.end(), [&](int a, int b) { return (*blocks)[a].end < (*blocks)[b].end; });
  std::map<int64_t, int64_t> free_at;       // offset -> size
  std::multimap<int64_t, int64_t> by_size;  // size -> offset
  auto erase_sized = [&](int64_t off, int64_t size) {
    auto range = by_size.equal_range(size);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == off) {
        by_size.erase(it);
        return;
      }
  };
  auto release = [&](int64_t off, int64_t size) {
    auto next = free_at.lower_bound(off);
    if (next != free_at.end() && off + size == next->first) {
      size += next->second;
      erase_sized(next->first, next->second);
      next = free_at.erase(next);
    }
    if (next != free_at.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        size += prev->second;
        erase_sized(prev->first, prev->second);
        free_at.erase(prev);
      }
    }
    free_at[off] = size;
    by_size.emplace(size, off);
  };
  int64_t top = 0;
  size_t freed = 0;
  for (int id : order) {  // blocks are made in start order
    Block& b = (*blocks)[id];
    while (freed < by_end.size() && (*blocks)[by_end[freed]].end < b.start) {
      const Block& d = (*blocks)[by_end[freed++]];
      if (d.offset >= 0) release(d.offset, d.size);
    }
    auto fit = by_size.lower_bound(b.size);
    if (fit != by_size.end()) {
      int64_t off = fit->second, size = fit->first;
      by_size.erase(fit);
      free_at.erase(off);
      b.offset = off;
      if (size > b.size) {
        free_at[off + b.size] = size - b.size;
        by_size.emplace(size - b.size, off + b.size);
      }
    } else if (!free_at.empty() && free_at.rbegin()->first + free_at.rbegin()->second == top) {
      auto last = std::prev(free_at.end());  // grow the free range at the top
      b.offset = last->first;
      erase_sized(last->first, last->second);
      free_at.erase(last);
      top = b.offset + b.size;
    } else {
      b.offset = top;
      top += b.size;
    }
  }
  return top;
}

// Sharing: greedy placements in several orders (by size as in TFLite's
// arena planner, by start, by lifetime, by size x lifetime; first and best
// fit) and online best fit; the smallest arena wins. Greedy placement
// compares each block with every placed block whose lifetime overlaps
// (quadratic): past kManyBlocks only two orders run (by size and by
// lifetime, first fit), past kGreedyLimit only the online placement.
// Below kSearchLimit blocks a local search follows: the winning order with
// one block moved to the front or two swapped, kept when the arena does not
// grow, until the arena meets the lower bound or the trials run out (a
// fixed-seed generator: plans stay deterministic).
constexpr size_t kManyBlocks = 4000;
// ResNet-1001's logn plan (20,087 blocks) is 1.154 of its bound online, 1.022 greedy (0.3 s).
constexpr size_t kGreedyLimit = 30000;
constexpr size_t kSearchLimit = 2000;

void PlaceShared(std::vector<Block>* blocks, int64_t lower_bound) {
  std::vector<Block> online = *blocks;
  const int64_t online_arena = PlaceOnline(&online);
  const size_t n = blocks->size();
  if (n > kGreedyLimit || online_arena <= lower_bound) {
    *blocks = std::move(online);
    return;
  }
  const std::vector<Block>& bl = *blocks;
  std::vector<int> by_size(n);
  for (size_t i = 0; i < n; ++i) by_size[i] = static_cast<int>(i);
  std::vector<int> by_start = by_size, by_life = by_size, by_area = by_size;  // blocks are made in start order
  auto life = [&](int a) { return bl[a].end - bl[a].start + 1; };
  auto area = [&](int a) { return static_cast<double>(bl[a].size) * life(a); };
  std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) {
    return bl[a].size != bl[b].size ? bl[a].size > bl[b].size : bl[a].start < bl[b].start;
  });
  std::stable_sort(by_life.begin(), by_life.end(),
                   [&](int a, int b) { return life(a) != life(b) ? life(a) > life(b) : bl[a].size > bl[b].size; });
  std::stable_sort(by_area.begin(), by_area.end(), [&](int a, int b) { return area(a) > area(b); });
  // The best greedy placement, its order and fit.
  std::vector<Block> best;
  std::vector<int> best_order;
  int64_t best_arena = INT64_MAX;
  bool best_fit = false;
  auto consider = [&](std::vector<int> order, bool fit) {
    std::vector<Block> trial = bl;
    const int64_t arena = PlaceInOrder(order, fit, &trial);
    if (arena >= best_arena && !(arena == best_arena && fit == best_fit)) return;
    best_arena = arena;
    best = std::move(trial);
    best_order = std::move(order);
    best_fit = fit;
  };
  if (n > kManyBlocks) {  // the two orders that win on large graphs, first fit
    consider(by_size, false);
    consider(by_life, false);
  } else {
    for (const std::vector<int>* order : {&by_size, &by_start, &by_life, &by_area})
      for (bool fit : {false, true}) consider(*order, fit);
  }
  if (n <= kSearchLimit) {
    std::mt19937 gen(12345);
    const size_t trials = std::min<size_t>(1000, 20000000 / (n * n + 1));
    for (size_t t = 0; t < trials && best_arena > lower_bound; ++t) {
      std::vector<int> order = best_order;
      const size_t i = gen() % n, j = gen() % n;
      if (t % 2 == 0)
        std::rotate(order.begin(), order.begin() + i, order.begin() + i + 1);  // block i to the front
      else
        std::swap(order[i], order[j]);
      consider(std::move(order), best_fit);
    }
  }
  *blocks = best_arena < online_arena ? std::move(best) : std::move(online);
}

int64_t LowerBound(const std::vector<Block>& blocks, int num_steps) {
  std::vector<int64_t> delta(num_steps + 2, 0);
  for (const Block& b : blocks) {
    delta[b.start] += b.size;
    delta[b.end + 1] -= b.size;
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) peak = std::max(peak, live += d);
  return peak;
}

}  // namespace

namespace {
const char* const kNames[] = {"none", "inplace", "share", "drop_cheap", "sqrt", "logn", "budget"};
}  // namespace

std::string MemoryStrategy::Name() const {
  if (kind != kBudget) return kNames[kind];
  if (auto_budget()) return "budget=auto";
  // Whole units where they are exact, so the name parses back to the same bytes.
  const char* units[] = {"GB", "MB", "KB"};
  double mult = 1e9;
  for (const char* u : units) {
    if (budget_bytes % static_cast<int64_t>(mult) == 0)
      return Fmt("budget=", budget_bytes / static_cast<int64_t>(mult), u);
    mult /= 1e3;
  }
  return Fmt("budget=", budget_bytes);
}

MemoryStrategy ParseMemoryStrategy(const std::string& text) {
  if (text == "budget=auto") return {MemoryStrategy::kBudget, MemoryStrategy::kAutoBudget};
  if (text.rfind("budget=", 0) == 0) {
    int64_t bytes = ParseBytes(text.substr(7));
    FRUGAL_REQUIRE(bytes > 0, "memory strategy '", text, "': the budget must be positive");
    return {MemoryStrategy::kBudget, bytes};
  }
  for (int k = 0; k < MemoryStrategy::kBudget; ++k)
    if (text == kNames[k]) return MemoryStrategy(static_cast<MemoryStrategy::Kind>(k));
  throw Error(Fmt("unknown memory strategy '", text, "' (choose none, inplace, share, drop_cheap, sqrt, logn, ",
                  "budget=SIZE, e.g. budget=7GB, or budget=auto)"));
}

std::vector<MemoryStrategy> AllMemoryStrategies() {
  std::vector<MemoryStrategy> all;
  for (int k = 0; k < MemoryStrategy::kBudget; ++k) all.push_back(static_cast<MemoryStrategy::Kind>(k));
  return all;
}

double NodeFlops(const Graph& g, int i) {
  const Node& n = g.node(i);
  if (n.is_variable()) return 0;
  std::vector<Shape> in, out;
  for (const Entry& e : n.inputs) in.push_back(g.shape(e));
  for (int k = 0; k < g.NumOutputs(i); ++k) out.push_back(g.shape({i, k}));
  return n.op->Flops(n, in, out);
}

// FLOPs of the step without recomputation, and of the recomputations; with
// a cost table, the predicted times of both (forward nodes' forward and
// backward times, the gradient sums, the recomputed copies' forward times,
// scaled to wall time by the table's wall_per_op_ms).
void CountCosts(const Graph& g, const CostTable* costs, MemoryPlan* plan) {
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    const double f = NodeFlops(g, i);
    if (n.mirror_of >= 0) {
      plan->extra_flops += f;
      ++plan->num_recomputed;
      if (costs) plan->extra_ms += costs->ForwardMs(g, i);
    } else {
      plan->step_flops += f;
      if (costs && i < g.num_forward()) plan->step_ms += costs->ForwardMs(g, i) + costs->BackwardMs(g, i);
    }
  }
  if (!costs) return;
  plan->step_ms = (plan->step_ms + costs->sums_ms) * costs->wall_per_op_ms;
  plan->extra_ms *= costs->wall_per_op_ms;
}

MemoryPlan PlanMemory(const Graph& g, const MemoryStrategy& strategy, bool estimate) {
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

  // Figures for what lives outside the arena.
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.var == VarKind::kParam || n.var == VarKind::kAux) plan.param_bytes += bytes[g.EntryId({i, 0})];
    if (n.var == VarKind::kInput) plan.input_bytes += bytes[g.EntryId({i, 0})];
    if (n.var == VarKind::kState) plan.state_bytes += bytes[g.EntryId({i, 0})];
  }
  for (const Entry& e : g.grad_of)
    if (e.valid()) plan.param_grad_bytes += bytes[g.EntryId(e)];

  // Liveness and blocks, in execution order.
  plan.entry_req.assign(num_entries, OpReq::kWrite);
  plan.entry_block.assign(num_entries, -1);
  plan.workspace_bytes.assign(g.num_nodes(), 0);
  std::vector<Block> blocks;
  std::vector<int> workspace_block(g.num_nodes(), -1);
  const std::vector<int> into = FoldedSums(g, ext, bytes);
  std::vector<bool> folded_add(g.num_nodes(), false);
  for (int e = 0; e < num_entries; ++e)
    if (into[e] >= 0) folded_add[last[e]] = true;  // the add_n reading the part
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
    std::vector<Shape> in_shapes;
    for (const Entry& e : n.inputs) in_shapes.push_back(g.shape(e));
    std::vector<Shape> out_shapes;
    for (int k = 0; k < g.NumOutputs(i); ++k) out_shapes.push_back(g.shape({i, k}));
    std::vector<Layout> in_layouts, out_layouts;
    for (const Entry& e : n.inputs) in_layouts.push_back(g.layout(e));
    for (int k = 0; k < g.NumOutputs(i); ++k) out_layouts.push_back(g.layout({i, k}));
    int64_t ws = 0;
    try {
      const DType t = n.inputs.empty() ? DType::kFloat32 : g.dtype(n.inputs[0]);
      ws = n.op->WorkspaceBytes({n, in_shapes, out_shapes, t, in_layouts, out_layouts});
    } catch (const Error&) { throw; } catch (const std::exception& e) {  // a library's (oneDNN refusing the sizes)
      std::string shapes;
      for (const Shape& sh : in_shapes) shapes += (shapes.empty() ? "" : ", ") + sh.ToString();
      throw Error(Fmt(n.Where(), ": the kernel library refuses inputs ", shapes, " (", e.what(),
                      "); check the sizes, which may be beyond what it takes"));
    }
    if (ws > 0) {
      plan.workspace_bytes[i] = ws;
      plan.no_sharing_bytes += Align(ws);
      workspace_block[i] = static_cast<int>(blocks.size());
      blocks.push_back({i, i, Align(ws), -1, -1, i});
    }
  }

  plan.lower_bound_bytes = LowerBound(blocks, g.num_nodes());
  if (estimate && strategy.shares()) {
    plan.arena_bytes = plan.lower_bound_bytes;  // no offsets: for comparing candidate plans
    CountCosts(g, strategy.costs.get(), &plan);
    return plan;
  }
  if (strategy.shares())
    PlaceShared(&blocks, plan.lower_bound_bytes);
  else
    PlaceEndToEnd(&blocks);
  for (const Block& b : blocks) plan.arena_bytes = std::max(plan.arena_bytes, b.offset + b.size);
  plan.num_blocks = static_cast<int>(blocks.size());
  plan.entry_offset.assign(num_entries, -1);
  for (int e = 0; e < num_entries; ++e)
    if (plan.entry_block[e] >= 0) plan.entry_offset[e] = blocks[plan.entry_block[e]].offset;
  plan.workspace_offset.assign(g.num_nodes(), -1);
  for (int i = 0; i < g.num_nodes(); ++i)
    if (workspace_block[i] >= 0) plan.workspace_offset[i] = blocks[workspace_block[i]].offset;
  plan.blocks = std::move(blocks);
  CountCosts(g, strategy.costs.get(), &plan);
  plan.plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
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
  for (size_t a = 0; a < items.size(); ++a) {
    for (size_t b = a + 1; b < items.size(); ++b) {
      const Item &x = items[a], &y = items[b];
      bool mem = x.off < y.off + y.size && y.off < x.off + x.size;
      bool time = x.start <= y.end && y.start <= x.end;
      // An in-place successor is born at the step its predecessor dies; a
      // gradient part is added into its sum (kAdd).
      const bool same_block = plan.entry_block[x.entry] == plan.entry_block[y.entry];
      bool handoff = same_block && (x.end == y.start || y.end == x.start || plan.entry_req[x.entry] == OpReq::kAdd ||
                                    plan.entry_req[y.entry] == OpReq::kAdd);
      if (mem && time && !handoff) {
        auto name = [&](int e) {
          Entry en = g.EntryOf(e);
          return Fmt(g.node(en.node).name, ":", en.index);
        };
        return Fmt("entries ", name(x.entry), " and ", name(y.entry), " are live together in overlapping memory");
      }
    }
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
             ",\"step_flops\":", p.step_flops, ",\"plan_ms\":", p.plan_ms, ",\"num_builds\":", p.num_builds,
             p.priced() ? Fmt(",\"predicted_step_ms\":", p.step_ms, ",\"predicted_extra_ms\":", p.extra_ms) : "", "}");
}

}  // namespace frugal
