// CheapestFittingDrops: one-level drop sets in increasing order of
// recomputation cost, the first whose placed arena fits wins (the
// k-smallest-subset-sums scheme over a best-first queue).
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <queue>

#include "passes/build_training_plan.h"

namespace frugal {
namespace {

// The bytes of each forward node's outputs that the backward pass reads, in
// the training graph without recomputation: fewer nodes than recompute.cc's
// ReadByBackward (the ops' declared reads) where the gradient pass computes
// no gradient of an input (the random chain of 20 nodes: 3,084 builds to
// its optimum at its third budget, 6,158 with the declared reads). A node
// the backward pass reads there and a drop set keeps is read there after
// the forward pass too, so at the step between the passes its outputs are
// live, each in a block of its own (an op works in place only on an input
// it reads last): what a set keeps of these bytes is a lower bound of its
// arena, known without building its graph.
std::vector<int64_t> HeldForBackward(const Graph& fwd, const TrainingPlan& share) {
  const Graph& g = share.graph;
  std::vector<bool> read(g.num_entries(), false);
  for (int i = g.num_forward(); i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs)
      if (e.node < fwd.num_nodes()) read[g.EntryId(e)] = true;
  std::vector<int64_t> held(fwd.num_nodes(), 0);
  for (int i = 0; i < fwd.num_nodes(); ++i)
    if (!fwd.node(i).is_variable())
      for (int k = 0; k < g.NumOutputs(i); ++k)
        if (read[g.EntryId({i, k})]) held[i] += g.EntryBytes(Entry{i, k});
  return held;
}

// Whether every candidate the mask drops is recomputed: read by the
// backward pass, or by a dropped node that is (forward order is
// topological, so readers come later). A set that drops a node no one
// recomputes builds the same graph as the set without it.
bool AllRecomputed(const Graph& fwd, const KeepLevels& base, const std::vector<int>& candidates, uint64_t mask,
                   const std::vector<int64_t>& held) {
  std::vector<bool> dropped(fwd.num_nodes(), false), needed(fwd.num_nodes(), false), in_mask(fwd.num_nodes(), false);
  for (int i = 0; i < fwd.num_nodes(); ++i) dropped[i] = base[i] != 0;
  for (size_t k = 0; k < candidates.size(); ++k)
    if (mask >> k & 1) dropped[candidates[k]] = in_mask[candidates[k]] = true;
  for (int i = fwd.num_nodes() - 1; i >= 0; --i) {
    if (!dropped[i]) continue;
    needed[i] = held[i] > 0;
    for (int j = i + 1; j < fwd.num_nodes() && !needed[i]; ++j)
      for (const Entry& e : fwd.node(j).inputs) needed[i] = needed[i] || (e.node == i && needed[j]);
    if (in_mask[i] && !needed[i]) return false;
  }
  return true;
}

// A drop set in the queue: its cost, its members (bit k: the k-th cheapest
// candidate), and its most expensive member, from which its two successors
// are made.
struct Subset {
  double cost;
  uint64_t mask;
  int last;
  bool operator>(const Subset& o) const { return cost > o.cost; }
};
using Queue = std::priority_queue<Subset, std::vector<Subset>, std::greater<Subset>>;

// The two sets made from s: member last + 1 added, and member last
// replaced by it. Every set is made once, after the sets that cost less.
void PushSuccessors(const Subset& s, const std::vector<double>& cost, Queue* queue) {
  const int next = s.last + 1;
  if (next >= static_cast<int>(cost.size())) return;
  const uint64_t bit = uint64_t{1} << next;
  queue->push({s.cost + cost[next], s.mask | bit, next});
  if (s.last >= 0) queue->push({s.cost - cost[s.last] + cost[next], (s.mask ^ uint64_t{1} << s.last) | bit, next});
}

// Sets skipped unbuilt (a dropped node not recomputed) are cheap; the
// queue grows by one per set taken, so their number is bounded too.
constexpr int64_t kSubsetsPerBuild = 64;

}  // namespace

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
  const std::vector<int64_t> held = HeldForBackward(fwd, BuildTrainingPlan(fwd, inputs, s, base, dev, true));
  ++r.builds;
  int64_t held_by_base = 0;
  for (int i = 0; i < fwd.num_nodes(); ++i) held_by_base += base[i] == 0 ? held[i] : 0;
  Queue queue;
  queue.push({0, 0, -1});  // the empty set first
  while (!queue.empty()) {
    const Subset set = queue.top();
    r.cost = set.cost;
    if (set.cost >= max_cost) {  // every cheaper set was tried
      r.exact = true;
      return r;
    }
    // Cut off: every cheaper set was tried, so r.cost bounds the optimum.
    if (r.builds >= max_builds || r.placed >= max_placed || r.subsets >= kSubsetsPerBuild * max_builds) return r;
    queue.pop();
    ++r.subsets;
    PushSuccessors(set, cost, &queue);
    int64_t kept = held_by_base;
    for (size_t k = 0; k < cand.size(); ++k) kept -= (set.mask >> k & 1) ? held[cand[k]] : 0;
    if (kept > budget || !AllRecomputed(fwd, base, cand, set.mask, held)) continue;
    KeepLevels keep = base;
    for (size_t k = 0; k < cand.size(); ++k)
      if (set.mask >> k & 1) keep[cand[k]] = kDropped;
    ++r.builds;
    TrainingPlan t = BuildTrainingPlan(fwd, inputs, s, std::move(keep), dev, /*estimate=*/true);
    CHECK_LE(kept, t.plan.arena_bytes) << "HeldForBackward is no lower bound";
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
