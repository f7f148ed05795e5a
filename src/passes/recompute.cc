// Recompute policies: which forward results to keep for the backward pass.
// Each returns one keep level per node of a forward graph with shapes
// inferred (see KeepLevels in passes.h). Config annotations (mirror,
// checkpoint) and protected nodes are applied by ApplyAnnotations.
#include <glog/logging.h>

#include <algorithm>
#include <map>

#include "frugal/passes.h"

namespace frugal {
namespace {

int64_t OutputBytes(const Graph& g, int i) {
  int64_t b = 0;
  for (int k = 0; k < g.NumOutputs(i); ++k) b += g.EntryBytes({i, k});
  return b;
}

// Nodes that are never dropped: variables, producers of graph outputs, and
// nodes marked checkpoint. (A loss head whose output nobody sees, one of the
// per-step losses of an unrolled RNN, may be recomputed like any node.)
std::vector<bool> Protected(const Graph& g) {
  std::vector<bool> p(g.num_nodes(), false);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    p[i] = n.is_variable() || n.keep == Node::Keep::kCheckpoint;
  }
  for (const Entry& e : g.outputs) p[e.node] = true;
  return p;
}

}  // namespace

// Protected nodes are kept; nodes marked mirror are dropped.
KeepLevels ApplyAnnotations(const Graph& g, KeepLevels levels) {
  levels.resize(g.num_nodes(), 0);
  std::vector<bool> prot = Protected(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (prot[i])
      levels[i] = 0;
    else if (g.node(i).keep == Node::Keep::kMirror)
      levels[i] = kDropped;
  }
  return levels;
}

// Entries that some gradient reads (by the ops' declared backward reads).
std::vector<bool> ReadByBackward(const Graph& g) {
  std::vector<bool> read(g.num_entries(), false);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable() || !n.op->has_gradient()) continue;
    for (const BackwardRead& r : n.op->backward_reads()) {
      if (r.kind == BackwardRead::kInput && r.index < static_cast<int>(n.inputs.size()))
        read[g.EntryId(n.inputs[r.index])] = true;
      if (r.kind == BackwardRead::kOutput) read[g.EntryId({i, r.index})] = true;
    }
  }
  return read;
}

KeepLevels DropCheapLevels(const Graph& g) {
  // A cheap node is dropped only if what its recomputation reads is kept for
  // the backward pass anyway (or is dropped too): otherwise recomputing it
  // keeps its input alive instead of its output and frees nothing (as
  // MXNet's mirror learnt: PR #18228).
  std::vector<bool> read = ReadByBackward(g);
  KeepLevels levels(g.num_nodes(), 0);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable() || n.op->cost() == Cost::kExpensive) continue;
    bool frees = true;
    for (const Entry& e : n.inputs)
      frees = frees && (g.node(e.node).is_variable() || read[g.EntryId(e)] || levels[e.node] != 0);
    if (frees) levels[i] = kDropped;
  }
  levels = ApplyAnnotations(g, levels);
  // reach[i]: recomputing node i reaches a dropped candidate.
  std::vector<bool> is_cand(g.num_nodes(), false), reach(g.num_nodes(), false);
  for (int c : SplitCandidates(g)) is_cand[c] = true;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (levels[i] == 0) continue;
    bool through = false;
    for (const Entry& e : g.node(i).inputs)
      through = through || (levels[e.node] != 0 && (is_cand[e.node] || reach[e.node]));
    if (is_cand[i] && through)
      levels[i] = 0;  // keep: a chain would start here
    else
      reach[i] = through;
  }
  return levels;
}

std::vector<int> SplitCandidates(const Graph& g) {
  std::vector<int> marked;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).stage) marked.push_back(i);
  if (!marked.empty()) return marked;
  // crossing[t]: forward results produced at or before node t and read after
  // it (variables excluded). A candidate is a node whose boundary is crossed
  // by its own output alone.
  std::vector<int> last_read(g.num_entries(), -1);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) last_read[g.EntryId(e)] = i;
  std::vector<int> delta(g.num_nodes() + 1, 0);
  for (int e = 0; e < g.num_entries(); ++e) {
    Entry en = g.EntryOf(e);
    if (g.node(en.node).is_variable() || last_read[e] < 0) continue;
    delta[en.node] += 1;  // crosses boundaries en.node .. last_read-1
    delta[last_read[e]] -= 1;
  }
  std::vector<int> cands;
  int crossing = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    crossing += delta[i];
    const Node& n = g.node(i);
    if (n.is_variable() || crossing != 1 || g.NumOutputs(i) != 1) continue;
    if (last_read[g.EntryId({i, 0})] > i) cands.push_back(i);
  }
  return cands;
}

namespace {
// For each candidate c (in order): the producers of the forward results
// that cross the boundary after c (made at or before c, read after it).
// Keeping them is what a checkpoint at c means: for an articulation point,
// c itself; for a stage mark in an unrolled RNN, every layer's state.
std::vector<std::vector<int>> CrossingProducers(const Graph& g, const std::vector<int>& cands) {
  std::vector<int> last_read(g.num_entries(), -1);
  for (int i = 0; i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs) last_read[g.EntryId(e)] = i;
  std::vector<std::vector<int>> out;
  // Producer -> how many of its entries are made so far and read later,
  // counted per producer: an unrolled RNN's split of the tokens has T
  // outputs live at once, and visiting them at every candidate made this
  // quadratic in T.
  std::map<int, int> live;
  std::vector<std::vector<int>> dies(g.num_nodes());  // node -> the producers of the live entries it reads last
  size_t next = 0;
  for (int i = 0; i < g.num_nodes() && next < cands.size(); ++i) {
    if (!g.node(i).is_variable())
      for (int k = 0; k < g.NumOutputs(i); ++k) {
        const int e = g.EntryId({i, k});
        if (last_read[e] <= i) continue;
        ++live[i];
        dies[last_read[e]].push_back(i);
      }
    for (int p : dies[i])
      if (--live[p] == 0) live.erase(p);
    if (cands[next] != i) continue;
    std::vector<int> producers;
    for (const auto& [p, count] : live) producers.push_back(p);
    out.push_back(std::move(producers));
    ++next;
  }
  out.resize(cands.size());
  return out;
}
}  // namespace

KeepLevels SqrtLevels(const Graph& g, int64_t b) {
  KeepLevels levels(g.num_nodes(), 0);
  std::vector<int> cands = SplitCandidates(g);
  std::vector<std::vector<int>> crossing = CrossingProducers(g, cands);
  std::vector<int> cand_index(g.num_nodes(), -1);
  for (size_t c = 0; c < cands.size(); ++c) cand_index[cands[c]] = static_cast<int>(c);
  std::vector<int> checkpoints;
  int64_t temp = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).is_variable()) continue;
    temp += OutputBytes(g, i);
    levels[i] = kDropped;
    if (cand_index[i] >= 0 && temp > b) {
      temp = 0;  // a checkpoint: what crosses it is kept
      checkpoints.push_back(cand_index[i]);
    }
  }
  for (int c : checkpoints)
    for (int p : crossing[c]) levels[p] = 0;
  // The last segment is kept: its backward runs right after the forward, so
  // recomputing it would hold the same bytes at the same moment for nothing
  // (PyTorch's checkpoint_sequential runs its last segment so too).
  const int tail = checkpoints.empty() ? 0 : cands[checkpoints.back()] + 1;
  for (int i = tail; i < g.num_nodes(); ++i) levels[i] = 0;
  return ApplyAnnotations(g, levels);
}

namespace {
// Candidates [lo, hi): the middle one is a checkpoint of this level (what
// crosses it gets the level); each half recurses one level deeper.
void Halve(const std::vector<std::vector<int>>& crossing, int lo, int hi, int level, KeepLevels* levels) {
  if (lo >= hi) return;
  int mid = lo + (hi - lo) / 2;
  for (int p : crossing[mid]) (*levels)[p] = std::min((*levels)[p], level);
  Halve(crossing, lo, mid, level + 1, levels);
  Halve(crossing, mid + 1, hi, level + 1, levels);
}
}  // namespace

KeepLevels LognLevels(const Graph& g) {
  KeepLevels levels(g.num_nodes(), kDropped);
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).is_variable()) levels[i] = 0;
  std::vector<int> cands = SplitCandidates(g);
  Halve(CrossingProducers(g, cands), 0, static_cast<int>(cands.size()), 0, &levels);
  return ApplyAnnotations(g, levels);
}

std::vector<ChainBlock> Chain(const Graph& g, const KeepLevels& cheap, const CostTable* costs) {
  const std::vector<int> cands = SplitCandidates(g);
  std::vector<std::vector<int>> crossing = CrossingProducers(g, cands);
  std::vector<ChainBlock> chain(cands.size() + 1);
  size_t j = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).is_variable()) continue;
    chain[j].nodes.push_back(i);
    if (j < cands.size() && cands[j] == i) ++j;
  }
  for (size_t c = 0; c < cands.size(); ++c) chain[c].boundary = std::move(crossing[c]);
  std::vector<bool> read = ReadByBackward(g);
  for (ChainBlock& b : chain) {
    for (int p : b.boundary) {
      b.boundary_bytes += OutputBytes(g, p);
      b.cheap_keeps_boundary = b.cheap_keeps_boundary && cheap[p] == 0;
    }
    for (int i : b.nodes) {
      const int64_t bytes = OutputBytes(g, i);
      const double cost = RecomputeCost(g, i, costs);
      b.all_bytes += bytes;
      if (std::find(b.boundary.begin(), b.boundary.end(), i) != b.boundary.end()) {
        b.boundary_cost += cost;
      } else {
        b.inner_cost += cost;
        for (int k = 0; k < g.NumOutputs(i); ++k)
          if (read[g.EntryId({i, k})]) b.read_bytes += g.EntryBytes({i, k});
        if (cheap[i] == 0)
          b.kept_bytes += bytes;
        else
          b.cheap_cost += cost;
      }
    }
  }
  return chain;
}

KeepLevels ChainLevels(const Graph& g, const KeepLevels& cheap, const std::vector<ChainBlock>& chain,
                       const ChainPlan& plan) {
  CHECK_EQ(chain.size(), plan.dropped.size());
  KeepLevels levels = cheap;
  for (size_t j = 0; j < chain.size(); ++j)
    if (plan.dropped[j])
      for (int i : chain[j].nodes) levels[i] = kDropped;
  for (size_t j = 0; j < chain.size(); ++j)
    if (plan.cut[j])
      for (int p : chain[j].boundary) levels[p] = 0;
  return ApplyAnnotations(g, levels);
}

}  // namespace frugal
