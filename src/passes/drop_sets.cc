// CheapestFittingDrops: one-level drop sets in increasing order of
// recomputation cost, the first whose placed arena fits wins (the
// k-smallest-subset-sums scheme over a best-first queue).
#include <glog/logging.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <queue>

#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/recompute.h"
#include "frugal/passes/training_plan.h"
#include "passes/build_training_plan.h"

namespace frugal {
namespace {

// Whether every candidate the mask drops is recomputed. A set that drops a
// node no one recomputes builds the same graph as the set without it.
bool AllRecomputed(const Graph& fwd, const KeepLevels& base, const std::vector<int>& candidates, uint64_t mask,
                   const std::vector<bool>& read) {
  KeepLevels keep = base;
  for (size_t k = 0; k < candidates.size(); ++k)
    if (mask >> k & 1) keep[candidates[k]] = kDropped;
  const std::vector<bool> recomputed = RecomputedNodes(fwd, keep, read);
  for (size_t k = 0; k < candidates.size(); ++k)
    if (mask >> k & 1 && !recomputed[candidates[k]]) return false;
  return true;
}

// The bytes held at each step of share whatever is dropped: at a forward
// step, the node's outputs that only forward nodes read and its workspace
// (the forward pass is the same); at a backward step, the blocks only
// gradient nodes write (not mirrors, not forward nodes): a gradient node's
// outputs are the same, in the same order among gradient nodes, and so are
// their workspaces. Of those, what a backward step opens (its gradient
// node's workspace and the blocks it writes first) into *opened.
std::vector<int64_t> HeldAnyway(const Graph& g, const MemoryPlan& plan, std::vector<int64_t>* opened) {
  std::vector<int> last_read(g.num_entries(), -1);
  std::vector<bool> read_forward(g.num_entries(), false);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) {
      last_read[g.EntryId(e)] = i;
      if (i < g.num_forward()) read_forward[g.EntryId(e)] = true;
    }
  struct Span {
    int start = INT_MAX, end = -1;
    int64_t bytes = 0;
    bool gradient = true;
  };
  std::vector<Span> spans;
  for (int e = 0; e < g.num_entries(); ++e) {
    const int b = plan.entry_block[e];
    if (b < 0) continue;
    if (b >= static_cast<int>(spans.size())) spans.resize(b + 1);
    const int i = g.EntryOf(e).node;
    Span& s = spans[b];
    s.start = std::min(s.start, i);
    s.end = std::max({s.end, i, last_read[e]});
    s.bytes = std::max(s.bytes, g.EntryBytes(e));
    s.gradient = s.gradient && i >= g.num_forward() && g.node(i).mirror_of < 0;
  }
  std::vector<int64_t> held(g.num_nodes() + 1, 0);
  opened->assign(g.num_nodes(), 0);
  for (const Span& s : spans)
    if (s.gradient && s.end >= 0) held[s.start] += s.bytes, held[s.end + 1] -= s.bytes, (*opened)[s.start] += s.bytes;
  for (int t = 1; t < g.num_nodes(); ++t) held[t] += held[t - 1];
  held.pop_back();
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).mirror_of >= 0) continue;
    held[i] += plan.workspace_bytes[i];  // a forward or gradient node's
    if (i >= g.num_forward()) (*opened)[i] += plan.workspace_bytes[i];
  }
  for (int i = 0; i < g.num_forward(); ++i) {
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      const int e = g.EntryId({i, k});
      if (plan.entry_block[e] >= 0 && read_forward[e] && last_read[e] < g.num_forward()) held[i] += g.EntryBytes(e);
    }
  }
  return held;
}

// A drop set in the queue: its members (bit k: the k-th cheapest
// candidate), its most expensive member, from which its two successors are
// made, its cost, whether it frees enough at every step of the covers, and
// its key: a lower bound of the cost of the sets made from it (itself
// included) that free enough.
struct Subset {
  double key;
  double cost;
  uint64_t mask;
  int last;
  bool frees_enough;
  bool operator>(const Subset& o) const { return key > o.key; }
};
using Queue = std::priority_queue<Subset, std::vector<Subset>, std::greater<Subset>>;

// What a drop set must free of the bytes held at one step (BackwardReads)
// for its arena's lower bound to fit, and what each candidate frees there:
// its bytes if it is made at or before the step and first read by the
// backward pass after it (a dropped node is held by its mirror from at
// the latest its first reader on).
struct Cover {
  int64_t need;
  std::vector<int64_t> frees;              // [candidate]
  std::vector<std::vector<int>> by_ratio;  // [from]: the candidates from `from` on that free bytes, by cost per byte
};

// The least cost of candidates that free `missing` bytes taken in `order`
// (by cost per byte freed), the last one in part: a fractional cover;
// nullopt when all of them free too little.
std::optional<double> FractionalCover(const std::vector<int>& order, const std::vector<int64_t>& frees,
                                      const std::vector<double>& cost, int64_t missing) {
  double cover = 0;
  for (int j : order) {
    if (frees[j] >= missing) return cover + cost[j] * static_cast<double>(missing) / static_cast<double>(frees[j]);
    cover += cost[j];
    missing -= frees[j];
  }
  return std::nullopt;
}

// The candidates from `from` on that free bytes, by cost per byte freed.
std::vector<int> ByRatio(const std::vector<int64_t>& frees, const std::vector<double>& cost, int from) {
  std::vector<int> out;
  for (int j = from; j < static_cast<int>(frees.size()); ++j)
    if (frees[j] > 0) out.push_back(j);
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) { return cost[a] * frees[b] < cost[b] * frees[a]; });
  return out;
}

// Keys of drop sets: a set fits only if it frees enough at every step of
// the covers. The sets made from s share its members below s.last and take
// any of the candidates from s.last on, so the least cost of those that
// free enough at one step is at least that of its fractional cover
// (candidates by cost per byte freed, the last one in part), and the key is
// the most of these over the covers; none can when all of them together
// free too little. Taking sets by key, each set that frees enough comes
// after the cheaper ones that do, and sets from which none does are never
// made.
class CoverKeys {
 public:
  CoverKeys(const std::vector<double>& cost, std::vector<Cover> covers) : cost_(cost), covers_(std::move(covers)) {
    const int n = static_cast<int>(cost.size());
    for (Cover& c : covers_)
      for (int from = 0; from < n; ++from) c.by_ratio.push_back(ByRatio(c.frees, cost, from));
  }

  // s with its key; nullopt when no set made from it frees enough.
  std::optional<Subset> Keyed(double cost, uint64_t mask, int last) const {
    const int from = std::max(last, 0);
    const double fixed_cost = last >= 0 ? cost - cost_[last] : cost;
    double key = cost;
    bool frees_enough = true;
    for (const Cover& c : covers_) {
      int64_t freed = 0;
      for (uint64_t m = mask; m; m &= m - 1) freed += c.frees[__builtin_ctzll(m)];
      if (freed >= c.need) continue;
      frees_enough = false;
      const int64_t missing = c.need - freed + (last >= 0 ? c.frees[last] : 0);
      const std::optional<double> cover = FractionalCover(c.by_ratio[from], c.frees, cost_, missing);
      if (!cover) return std::nullopt;
      key = std::max(key, (fixed_cost + *cover) * (1 - 1e-12));  // below rounding's errors
    }
    return Subset{key, cost, mask, last, frees_enough};
  }

  // The two sets made from s: member last + 1 added, and member last
  // replaced by it. Every set is made once.
  void PushSuccessors(const Subset& s, Queue* queue) const {
    const int next = s.last + 1;
    if (next >= static_cast<int>(cost_.size())) return;
    const uint64_t bit = uint64_t{1} << next;
    Push(Keyed(s.cost + cost_[next], s.mask | bit, next), queue);
    if (s.last >= 0)
      Push(Keyed(s.cost - cost_[s.last] + cost_[next], (s.mask ^ uint64_t{1} << s.last) | bit, next), queue);
  }

  static void Push(std::optional<Subset> s, Queue* queue) {
    if (s) queue->push(*s);
  }

 private:
  const std::vector<double>& cost_;
  std::vector<Cover> covers_;
};

// The covers of the steps where the bytes held can peak, the kCovers whose
// fractional cover from the empty set costs most (the strongest keys at the
// start); nullopt when one cannot be covered.
constexpr size_t kCovers = 8;
std::optional<std::vector<Cover>> Covers(const Graph& fwd, const BackwardReads& reads, const KeepLevels& base,
                                         const std::vector<int>& cand, const std::vector<double>& cost,
                                         int64_t budget) {
  // Between two steps where a node read by the backward pass is made or
  // first read, the candidates that free bytes are the same: the step
  // holding the most stands for them all.
  std::vector<int> bounds;
  for (size_t i = 0; i < reads.read.size(); ++i)
    if (reads.read[i]) bounds.push_back(static_cast<int>(i)), bounds.push_back(reads.first[i]);
  std::sort(bounds.begin(), bounds.end());
  std::vector<std::pair<int, int64_t>> steps;  // step, bytes held
  const std::vector<int64_t> held = reads.Held(fwd, base);
  for (int t = 0, span = -1; t < static_cast<int>(held.size()); ++t) {
    const int now = static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), t) - bounds.begin());
    if (now != span) steps.emplace_back(t, held[t]), span = now;
    if (held[t] > steps.back().second) steps.back() = {t, held[t]};
  }
  std::vector<std::pair<double, Cover>> covers;
  for (auto [g, bytes] : steps) {
    Cover c{bytes - budget, {}, {}};
    if (c.need <= 0) continue;
    for (int i : cand) c.frees.push_back(i <= g && g < reads.first[i] ? reads.bytes[i] : 0);
    const std::optional<double> root = FractionalCover(ByRatio(c.frees, cost, 0), c.frees, cost, c.need);
    if (!root) return std::nullopt;
    covers.emplace_back(*root, std::move(c));
  }
  std::stable_sort(covers.begin(), covers.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Cover> out;
  for (size_t k = 0; k < covers.size() && k < kCovers; ++k) out.push_back(std::move(covers[k].second));
  return out;
}

// Sets skipped unbuilt (a dropped node not recomputed) are cheap; the
// queue grows by one per set taken, so their number is bounded too.
constexpr int64_t kSubsetsPerBuild = 64;

}  // namespace

// Why BackwardReads reads the built graph, not recompute.cc's
// ReadByBackward (the ops' declared reads): it reads fewer nodes where the
// gradient pass computes no gradient of an input (the random chain of 20
// nodes: 3,084 builds to its optimum at its third budget, 6,158 with the
// declared reads). A kept node read by the backward pass without
// recomputation is read by it with any drop set, after the forward pass, and
// an op works in place only on an input it reads last, so two such outputs
// never share a block. A node may be read for an empty output (average
// pooling's second): dropping it still recomputes it.
BackwardReads BackwardReadsOf(const Graph& fwd, const TrainingPlan& share) {
  const Graph& g = share.graph;
  std::vector<int> entry_first(g.num_entries(), -1), entry_last(g.num_entries(), -1);
  for (int i = g.num_forward(); i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs)
      if (e.node < fwd.num_nodes()) {
        const int id = g.EntryId(e);
        if (entry_first[id] < 0) entry_first[id] = i;
        entry_last[id] = i;
      }
  const int n = fwd.num_nodes();
  BackwardReads r;
  r.read.assign(n, false);
  r.bytes.assign(n, 0);
  r.first.assign(n, -1);
  r.held_anyway = HeldAnyway(g, share.plan, &r.opened);
  r.workspace.assign(share.plan.workspace_bytes.begin(), share.plan.workspace_bytes.begin() + n);
  for (int i = 0; i < n; ++i) {
    r.output_of.push_back(static_cast<int>(r.outputs.size()));
    if (fwd.node(i).is_variable()) continue;
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      const int id = g.EntryId({i, k});
      const int64_t bytes = share.plan.entry_block[id] >= 0 ? g.EntryBytes(id) : 0;  // in the arena
      r.outputs.push_back({bytes, entry_last[id]});
      if (entry_first[id] < 0) continue;
      r.read[i] = true;
      r.bytes[i] += bytes;
      r.first[i] = r.first[i] < 0 ? entry_first[id] : std::min(r.first[i], entry_first[id]);
    }
  }
  r.output_of.push_back(static_cast<int>(r.outputs.size()));
  return r;
}

void BackwardReads::MadeAt(const Graph& fwd, const KeepLevels& keep, std::vector<int>* made,
                           std::vector<int>* until) const {
  const int n = static_cast<int>(keep.size());
  made->assign(n, INT_MAX);
  until->assign(outputs.size(), -1);
  if (!OneLevel(keep)) return;
  for (int i = n - 1; i >= 0; --i) {
    if (keep[i] == 0) continue;
    if (read[i]) (*made)[i] = std::min((*made)[i], first[i]);
    if ((*made)[i] == INT_MAX) continue;
    for (const Entry& e : fwd.node(i).inputs) {
      (*made)[e.node] = std::min((*made)[e.node], (*made)[i]);
      const int o = output_of[e.node] + e.index;
      if (o < output_of[e.node + 1]) (*until)[o] = std::max((*until)[o], (*made)[i] - 1);  // made before that step
    }
  }
}

std::vector<int64_t> BackwardReads::Held(const Graph& fwd, const KeepLevels& keep, std::vector<int>* made_at) const {
  const int num_steps = static_cast<int>(held_anyway.size());
  std::vector<int64_t> held(num_steps + 1, 0);
  Spans(fwd, keep, made_at, [&](int, int from, int to, int64_t bytes) {
    held[from] += bytes;
    held[to + 1] -= bytes;
  });
  for (int t = 1; t <= num_steps; ++t) held[t] += held[t - 1];
  held.pop_back();
  for (int t = 0; t < num_steps; ++t) held[t] += held_anyway[t];
  return held;
}

int64_t BackwardReads::Bound(const Graph& fwd, const KeepLevels& keep) const {
  std::vector<int> made;
  const std::vector<int64_t> held = Held(fwd, keep, &made);
  int64_t bound = held.empty() ? 0 : *std::max_element(held.begin(), held.end());
  // Where a dropped node's mirror runs, just before the gradient node of
  // the step t it is made for: what t holds, less what t opens and the
  // outputs of the other mirrors made for t (they may come after it), plus
  // the mirror's workspace (a recomputed fully_connected's workspace is
  // live at its mirror's step and nowhere in Held: without it the bound
  // passes sets whose built arena misses).
  const int n = static_cast<int>(keep.size());
  std::vector<int64_t> own(n, 0), mirrors(held.size(), 0);
  for (int i = 0; i < n; ++i) {
    if (keep[i] == 0 || made[i] == INT_MAX) continue;
    for (int o = output_of[i]; o < output_of[i + 1]; ++o)
      if (outputs[o].last >= made[i]) own[i] += outputs[o].bytes;  // held from made[i] (Held)
    mirrors[made[i]] += own[i];
  }
  for (int i = 0; i < n; ++i) {
    if (keep[i] == 0 || made[i] == INT_MAX) continue;
    const int t = made[i];
    bound = std::max(bound, held[t] - opened[t] - mirrors[t] + own[i] + workspace[i]);
  }
  return bound;
}

std::vector<bool> GradientReads(const Graph& fwd, const TrainingPlan& t) {
  const Graph& g = t.graph;
  std::vector<bool> read(fwd.num_nodes(), false);
  for (int i = g.num_forward(); i < g.num_nodes(); ++i) {
    if (g.node(i).mirror_of >= 0) continue;
    for (const Entry& e : g.node(i).inputs) {
      const int p = e.node < g.num_forward() ? e.node : g.node(e.node).mirror_of;
      if (p >= 0) read[p] = true;
    }
  }
  return read;
}

// Forward order is topological: each node's readers come after it, so a
// walk from the last node back sees whether a node is recomputed before it
// marks that node's dropped inputs.
std::vector<bool> RecomputedNodes(const Graph& fwd, const KeepLevels& keep, const std::vector<bool>& read) {
  std::vector<bool> recomputed(fwd.num_nodes(), false);
  for (int i = fwd.num_nodes() - 1; i >= 0; --i) {
    if (keep[i] == 0) continue;
    recomputed[i] = recomputed[i] || read[i];
    if (!recomputed[i]) continue;
    for (const Entry& e : fwd.node(i).inputs)
      if (keep[e.node] != 0) recomputed[e.node] = true;
  }
  return recomputed;
}

double PredictedRecomputeCost(const Graph& fwd, const KeepLevels& keep, const std::vector<bool>& read,
                              const CostTable* costs) {
  if (!OneLevel(keep)) return NAN;
  const std::vector<bool> recomputed = RecomputedNodes(fwd, keep, read);
  double cost = 0;
  for (int i = 0; i < fwd.num_nodes(); ++i)
    if (recomputed[i]) cost += RecomputeCost(fwd, i, costs);
  return costs ? cost * costs->wall_per_schedule_ms : cost;
}

int64_t ExactSearchBuilds(const Graph& fwd) {
  int64_t nodes = 0;
  for (const Node& n : fwd.nodes()) nodes += !n.is_variable();
  return std::max<int64_t>(1, kExactWork / std::max<int64_t>(1, nodes));
}

bool OneLevel(const KeepLevels& keep) {
  return std::all_of(keep.begin(), keep.end(), [](int level) { return level == 0 || level == kDropped; });
}

std::vector<int> DropCandidates(const Graph& fwd) {
  const KeepLevels all = ApplyAnnotations(fwd, KeepLevels(fwd.num_nodes(), kDropped));
  const KeepLevels base = ApplyAnnotations(fwd, {});
  std::vector<int> out;
  for (int i = 0; i < fwd.num_nodes(); ++i)
    if (!fwd.node(i).is_variable() && all[i] == kDropped && base[i] == 0) out.push_back(i);
  return out;
}

DropSetSearch CheapestFittingDrops(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                                   const MemoryStrategy& s, Device dev, const KeepLevels& base, std::vector<int> cand,
                                   const BackwardReads& reads, int64_t budget, double max_cost, int64_t max_builds,
                                   int64_t max_placed) {
  DropSetSearch r;
  CHECK_LE(cand.size(), kExactCandidates) << "a drop set is a 64-bit mask";
  const CostTable* costs = s.costs.get();
  std::stable_sort(cand.begin(), cand.end(),
                   [&](int a, int b) { return RecomputeCost(fwd, a, costs) < RecomputeCost(fwd, b, costs); });
  std::vector<double> cost;
  for (int i : cand) cost.push_back(RecomputeCost(fwd, i, costs));
  const std::optional<std::vector<Cover>> covers = Covers(fwd, reads, base, cand, cost, budget);
  if (!covers) {  // no set frees enough
    r.exact = true;
    return r;
  }
  const CoverKeys keys(cost, *covers);
  Queue queue;
  CoverKeys::Push(keys.Keyed(0, 0, -1), &queue);  // the empty set first
  while (!queue.empty()) {
    const Subset set = queue.top();
    r.cost = set.key;
    if (set.key >= max_cost) {  // every cheaper set that frees enough was tried
      r.exact = true;
      return r;
    }
    // Cut off: every cheaper set that frees enough was tried, so r.cost bounds the optimum.
    if (r.builds >= max_builds || r.placed >= max_placed || r.subsets >= kSubsetsPerBuild * max_builds) return r;
    queue.pop();
    ++r.subsets;
    keys.PushSuccessors(set, &queue);
    if (!set.frees_enough || !AllRecomputed(fwd, base, cand, set.mask, reads.read)) continue;
    KeepLevels keep = base;
    for (size_t k = 0; k < cand.size(); ++k)
      if (set.mask >> k & 1) keep[cand[k]] = kDropped;
    const int64_t bound = reads.Bound(fwd, keep);  // the covers free bytes its mirrors hold
    if (bound > budget) continue;
    ++r.builds;
    TrainingPlan t = BuildTrainingPlan(fwd, inputs, s, std::move(keep), dev, /*estimate=*/true);
    CHECK_LE(bound, t.plan.arena_bytes) << "BackwardReads' bound is no lower bound (a bug)";
    if (t.plan.arena_bytes > budget) continue;  // its lower bound does not fit
    ++r.placed;
    t.plan = PlanMemory(t.graph, s, /*estimate=*/false, /*fit_bytes=*/budget);
    if (t.plan.arena_bytes > budget) continue;
    r.exact = true;
    r.plan = std::move(t);
    return r;
  }
  r.exact = true;  // nothing fits
  return r;
}

}  // namespace frugal
