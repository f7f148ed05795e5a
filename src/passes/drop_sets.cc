// CheapestFittingDrops: one-level drop sets in increasing order of
// recomputation cost, the first whose placed arena fits wins (the
// k-smallest-subset-sums scheme over a best-first queue).
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <queue>

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

// A drop set in the queue: its members (bit k: the k-th cheapest
// candidate), its most expensive member, from which its two successors are
// made, its cost, the bytes of BackwardReads it frees, and its key: a lower
// bound of the cost of the sets made from it (itself included) that free
// enough.
struct Subset {
  double key;
  double cost;
  int64_t freed;
  uint64_t mask;
  int last;
  bool operator>(const Subset& o) const { return key > o.key; }
};
using Queue = std::priority_queue<Subset, std::vector<Subset>, std::greater<Subset>>;

// Keys of drop sets: a set fits only if what it keeps of BackwardReads'
// bytes fits, that is, if it frees at least `need` of them. The sets made
// from s share its members below s.last and take any of the candidates from
// s.last on, so the least cost of those that free enough is at least that
// of the fractional cover (candidates by cost per byte freed, the last one
// in part); none can when all of them together free too little. Taking sets
// by key, each set that frees enough comes after the cheaper ones that do,
// and sets from which none does are never made.
class CoverKeys {
 public:
  CoverKeys(const std::vector<double>& cost, const std::vector<int64_t>& frees, int64_t need)
      : cost_(cost), frees_(frees), need_(need), by_ratio_(cost.size()) {
    const int n = static_cast<int>(cost.size());
    for (int from = 0; from < n; ++from) {
      for (int j = from; j < n; ++j)
        if (frees[j] > 0) by_ratio_[from].push_back(j);
      std::stable_sort(by_ratio_[from].begin(), by_ratio_[from].end(),
                       [&](int a, int b) { return cost[a] * frees[b] < cost[b] * frees[a]; });
    }
  }

  // s with its key; nullopt when no set made from it frees enough.
  std::optional<Subset> Keyed(double cost, int64_t freed, uint64_t mask, int last) const {
    if (freed >= need_) return Subset{cost, cost, freed, mask, last};
    const int from = std::max(last, 0);
    double fixed_cost = cost;
    int64_t missing = need_ - freed;
    if (last >= 0) fixed_cost -= cost_[last], missing += frees_[last];
    double cover = 0;
    for (int j : by_ratio_[from]) {
      if (frees_[j] >= missing) {
        cover += cost_[j] * static_cast<double>(missing) / static_cast<double>(frees_[j]);
        return Subset{(fixed_cost + cover) * (1 - 1e-12), cost, freed, mask, last};  // below rounding's errors
      }
      cover += cost_[j];
      missing -= frees_[j];
    }
    return std::nullopt;
  }

  // The two sets made from s: member last + 1 added, and member last
  // replaced by it. Every set is made once.
  void PushSuccessors(const Subset& s, Queue* queue) const {
    const int next = s.last + 1;
    if (next >= static_cast<int>(cost_.size())) return;
    const uint64_t bit = uint64_t{1} << next;
    Push(Keyed(s.cost + cost_[next], s.freed + frees_[next], s.mask | bit, next), queue);
    if (s.last >= 0)
      Push(Keyed(s.cost - cost_[s.last] + cost_[next], s.freed - frees_[s.last] + frees_[next],
                 (s.mask ^ uint64_t{1} << s.last) | bit, next),
           queue);
  }

  static void Push(std::optional<Subset> s, Queue* queue) {
    if (s) queue->push(*s);
  }

 private:
  const std::vector<double>& cost_;
  const std::vector<int64_t>& frees_;
  const int64_t need_;
  std::vector<std::vector<int>> by_ratio_;  // [from]: the candidates from `from` on that free bytes, by cost per byte
};

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
  std::vector<bool> entry_read(g.num_entries(), false);
  for (int i = g.num_forward(); i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs)
      if (e.node < fwd.num_nodes()) entry_read[g.EntryId(e)] = true;
  BackwardReads r{std::vector<bool>(fwd.num_nodes(), false), std::vector<int64_t>(fwd.num_nodes(), 0)};
  for (int i = 0; i < fwd.num_nodes(); ++i)
    if (!fwd.node(i).is_variable())
      for (int k = 0; k < g.NumOutputs(i); ++k)
        if (entry_read[g.EntryId({i, k})]) r.read[i] = true, r.bytes[i] += g.EntryBytes(Entry{i, k});
  return r;
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
  for (int level : keep)
    if (level != 0 && level != kDropped) return NAN;
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

std::vector<int> DropCandidates(const Graph& fwd) {
  const KeepLevels all = ApplyAnnotations(fwd, KeepLevels(fwd.num_nodes(), kDropped));
  const KeepLevels base = ApplyAnnotations(fwd, {});
  std::vector<int> out;
  for (int i = 0; i < fwd.num_nodes(); ++i)
    if (!fwd.node(i).is_variable() && all[i] == kDropped && base[i] == 0) out.push_back(i);
  return out;
}

DropSetSearch CheapestFittingDrops(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                                   const MemoryStrategy& s, Device dev, int64_t budget, double max_cost,
                                   int64_t max_builds, int64_t max_placed) {
  DropSetSearch r;
  std::vector<int> cand = DropCandidates(fwd);
  if (cand.size() > kExactCandidates) return r;  // not searched
  const CostTable* costs = s.costs.get();
  std::stable_sort(cand.begin(), cand.end(),
                   [&](int a, int b) { return RecomputeCost(fwd, a, costs) < RecomputeCost(fwd, b, costs); });
  std::vector<double> cost;
  for (int i : cand) cost.push_back(RecomputeCost(fwd, i, costs));
  const KeepLevels base = ApplyAnnotations(fwd, {});
  const BackwardReads reads = BackwardReadsOf(fwd, BuildTrainingPlan(fwd, inputs, s, base, dev, true));
  ++r.builds;
  const int64_t held_by_base = reads.KeptBytes(base);
  std::vector<int64_t> frees;
  for (int i : cand) frees.push_back(reads.bytes[i]);
  const int64_t need = held_by_base - budget;  // what a set must free of it to fit
  const CoverKeys keys(cost, frees, need);
  Queue queue;
  CoverKeys::Push(keys.Keyed(0, 0, 0, -1), &queue);  // the empty set first
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
    if (set.freed < need || !AllRecomputed(fwd, base, cand, set.mask, reads.read)) continue;
    KeepLevels keep = base;
    for (size_t k = 0; k < cand.size(); ++k)
      if (set.mask >> k & 1) keep[cand[k]] = kDropped;
    ++r.builds;
    TrainingPlan t = BuildTrainingPlan(fwd, inputs, s, std::move(keep), dev, /*estimate=*/true);
    CHECK_LE(held_by_base - set.freed, t.plan.arena_bytes) << "BackwardReads's bytes are no lower bound";
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
