// Recompute policies: which forward results to keep for the backward pass.
// Each returns one keep level per node of a forward graph with shapes
// inferred (see KeepLevels in frugal/passes/gradient.h). Config annotations
// (mirror, checkpoint) and protected nodes are applied by ApplyAnnotations.
#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <utility>

#include "frugal/passes/costs.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/recompute.h"
#include "frugal/passes/training_plan.h"
#include "passes/build_training_plan.h"

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
  for (int i = 0; i < g.num_forward(); ++i)
    if (g.node(i).stage) marked.push_back(i);
  if (!marked.empty()) return marked;
  // crossing[t]: forward results produced at or before node t and read after
  // it (variables excluded). A candidate is a node whose boundary is crossed
  // by its own output alone.
  const int n = g.num_forward();
  std::vector<int> last_read(g.num_entries(), -1);
  for (int i = 0; i < n; ++i)
    for (const Entry& e : g.node(i).inputs) last_read[g.EntryId(e)] = i;
  std::vector<int> delta(n + 1, 0);
  for (int e = 0; e < g.num_entries(); ++e) {
    Entry en = g.EntryOf(e);
    if (en.node >= n || g.node(en.node).is_variable() || last_read[e] < 0) continue;
    delta[en.node] += 1;  // crosses boundaries en.node .. last_read-1
    delta[last_read[e]] -= 1;
  }
  std::vector<int> cands;
  int crossing = 0;
  for (int i = 0; i < n; ++i) {
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

std::vector<KeepLevels> SqrtLevels(const Graph& g, const std::vector<int64_t>& budgets) {
  const std::vector<int> cands = SplitCandidates(g);
  const std::vector<std::vector<int>> crossing = CrossingProducers(g, cands);
  std::vector<int> cand_index(g.num_nodes(), -1);
  for (size_t c = 0; c < cands.size(); ++c) cand_index[cands[c]] = static_cast<int>(c);
  std::vector<KeepLevels> out;
  for (int64_t b : budgets) {
    KeepLevels levels(g.num_nodes(), 0);
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
    // The last segment is kept: its backward runs right after the forward,
    // so recomputing it would hold the same bytes at the same moment for
    // nothing (PyTorch's checkpoint_sequential runs its last segment so too).
    const int tail = checkpoints.empty() ? 0 : cands[checkpoints.back()] + 1;
    for (int i = tail; i < g.num_nodes(); ++i) levels[i] = 0;
    out.push_back(ApplyAnnotations(g, levels));
  }
  return out;
}

KeepLevels SqrtLevels(const Graph& g, int64_t b) { return std::move(SqrtLevels(g, std::vector<int64_t>{b})[0]); }

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

namespace {
// Each forward node's block (-1 for variables): the forward graph cut after
// each split candidate, as the budget planner's chain and ExplainBlocks cut
// it; `cands` are SplitCandidates(g).
std::vector<int> BlockOf(const Graph& g, const std::vector<int>& cands) {
  std::vector<int> block_of(g.num_forward(), -1);
  size_t j = 0;
  for (int i = 0; i < g.num_forward(); ++i) {
    if (g.node(i).is_variable()) continue;
    block_of[i] = static_cast<int>(j);
    if (j < cands.size() && cands[j] == i) ++j;
  }
  return block_of;
}

// Whether node i is one of the producers of what crosses the cut after b.
bool OnBoundary(const ChainBlock& b, int i) {
  return std::find(b.boundary.begin(), b.boundary.end(), i) != b.boundary.end();
}

// A block's cheap drops beyond the config's (drop_cheap's, the boundary
// excluded) in groups: a node joins the group of a dropped node it reads (a
// relu's gradient reads only its output, so dropping it frees nothing
// unless the batch_norm before it goes too), the most bytes that the
// backward pass reads per cost first.
std::vector<std::vector<int>> CheapGroups(const Graph& g, const ChainBlock& b, const KeepLevels& base,
                                          const KeepLevels& cheap, const BackwardReads& reads, const CostTable* costs) {
  std::map<int, int> group_of;
  std::vector<std::vector<int>> groups;
  for (int i : b.nodes) {
    if (cheap[i] == 0 || base[i] != 0) continue;
    if (OnBoundary(b, i)) continue;
    int r = -1;
    for (const Entry& e : g.node(i).inputs) {
      const auto it = group_of.find(e.node);
      if (it == group_of.end() || it->second == r) continue;
      if (r < 0) {
        r = it->second;
        continue;
      }
      const int from = it->second;  // i joins two groups: merge them
      for (int j : groups[from]) group_of[j] = r;
      groups[r].insert(groups[r].end(), groups[from].begin(), groups[from].end());
      groups[from].clear();
    }
    if (r < 0) r = static_cast<int>(groups.size()), groups.emplace_back();
    group_of[i] = r;
    groups[r].push_back(i);
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& x) { return x.empty(); }), groups.end());
  auto ratio = [&](const std::vector<int>& x) {
    double bytes = 0, cost = 0;
    for (int i : x) bytes += static_cast<double>(reads.bytes[i]), cost += RecomputeCost(g, i, costs);
    return bytes / std::max(cost, 1e-30);
  };
  std::stable_sort(groups.begin(), groups.end(), [&](const auto& x, const auto& y) { return ratio(x) > ratio(y); });
  return groups;
}

// The forward graph cut into blocks (block_of: BlockOf): each block's forward
// nodes and its boundary.
std::vector<ChainBlock> CutIntoBlocks(const Graph& g, const std::vector<int>& cands, const std::vector<int>& block_of) {
  std::vector<std::vector<int>> crossing = CrossingProducers(g, cands);
  std::vector<ChainBlock> chain(cands.size() + 1);
  for (int i = 0; i < static_cast<int>(block_of.size()); ++i)
    if (block_of[i] >= 0) chain[block_of[i]].nodes.push_back(i);
  for (size_t c = 0; c < cands.size(); ++c) chain[c].boundary = std::move(crossing[c]);
  return chain;
}

// A block's bytes and costs: its boundary's bytes and what of them the
// backward pass reads (read: ReadByBackward), what it reads of the block's
// other outputs, and what recomputing the boundary and the rest costs.
void MeasureBlock(const Graph& g, const std::vector<bool>& read, const CostTable* costs, ChainBlock* b) {
  for (int p : b->boundary) {
    b->boundary_bytes += OutputBytes(g, p);
    for (int k = 0; k < g.NumOutputs(p); ++k)
      if (read[g.EntryId({p, k})]) b->boundary_read += g.EntryBytes({p, k});
  }
  for (int i : b->nodes) {
    const bool is_boundary = OnBoundary(*b, i);
    (is_boundary ? b->boundary_cost : b->inner_cost) += RecomputeCost(g, i, costs);
    for (int k = 0; !is_boundary && k < g.NumOutputs(i); ++k)
      if (read[g.EntryId({i, k})]) b->read_bytes += g.EntryBytes({i, k});
  }
}

// A block's menu of stored entries: kept whole, its cheap groups one more at
// a time, then drop_cheap's (its boundary as drop_cheap keeps it), then
// drop_cheap's without its boundary.
void AddStoredEntries(const Graph& g, const KeepLevels& base, const KeepLevels& cheap,
                      const std::vector<bool>& is_candidate, const BackwardReads& reads, const CostTable* costs,
                      ChainBlock* b) {
  ChainBlock::Stored drop_cheap;
  drop_cheap.keeps_boundary = std::all_of(b->boundary.begin(), b->boundary.end(), [&](int p) { return cheap[p] == 0; });
  for (int i : b->nodes)
    if (cheap[i] != 0 && base[i] == 0) drop_cheap.drops.push_back(i), drop_cheap.cost += RecomputeCost(g, i, costs);
  b->stored.emplace_back();  // kept whole
  for (const std::vector<int>& group : CheapGroups(g, *b, base, cheap, reads, costs)) {
    ChainBlock::Stored more = b->stored.back();
    for (int i : group) more.drops.push_back(i), more.cost += RecomputeCost(g, i, costs);
    b->stored.push_back(std::move(more));
  }
  if (b->stored.back().drops.size() == drop_cheap.drops.size())
    b->stored.back() = std::move(drop_cheap);
  else
    b->stored.push_back(std::move(drop_cheap));
  // Then drop_cheap's with the boundary recomputed, where it may be dropped.
  if (b->stored.back().keeps_boundary && !b->boundary.empty() &&
      std::all_of(b->boundary.begin(), b->boundary.end(), [&](int p) { return is_candidate[p]; })) {
    ChainBlock::Stored without = b->stored.back();
    without.drops.insert(without.drops.end(), b->boundary.begin(), b->boundary.end());
    without.keeps_boundary = false;
    b->stored.push_back(std::move(without));
  }
}

// Whether an entry's recomputation reads the boundary before its block
// (that boundary is then held to the backward pass where it is kept).
void MarkReadsBefore(const Graph& g, std::vector<ChainBlock>* chain) {
  for (size_t j = 1; j < chain->size(); ++j) {
    const ChainBlock& before = (*chain)[j - 1];
    for (ChainBlock::Stored& e : (*chain)[j].stored)
      for (int i : e.drops)
        for (const Entry& in : g.node(i).inputs) e.reads_before = e.reads_before || OnBoundary(before, in.node);
  }
}

// A block's steps of share: its forward nodes', then its gradient nodes'
// (each from the first to the last; first > last where there are none).
struct BlockSteps {
  std::pair<int, int> forward{INT_MAX, -1}, backward{INT_MAX, -1};
};
std::vector<BlockSteps> StepsOfShare(const Graph& s, const std::vector<int>& block_of, size_t blocks) {
  std::vector<BlockSteps> steps(blocks);
  for (int t = 0; t < s.num_nodes(); ++t) {
    const int i = t < s.num_forward() ? t : s.node(t).fwd;
    if (i < 0 || block_of[i] < 0) continue;
    BlockSteps& b = steps[block_of[i]];
    auto& range = t < s.num_forward() ? b.forward : b.backward;
    range = {std::min(range.first, t), std::max(range.second, t)};
  }
  return steps;
}

// A forward node's output held over steps of share (BackwardReads::Spans):
// from, to, bytes, and 1 where the node is on its block's boundary.
using BlockSpan = std::array<int64_t, 4>;

// A stored entry's kept bytes (its spans off the boundary that are live as
// the forward pass ends: share's step num_forward) and its peak (its spans
// and what share holds anyway, at the most at one of its block's steps).
void PriceStoredEntry(const std::vector<BlockSpan>& spans, const BlockSteps& steps, int num_forward,
                      const std::vector<int64_t>& held_anyway, ChainBlock::Stored* st) {
  for (const auto& [from, to, bytes, of_boundary] : spans)
    if (!of_boundary && from <= num_forward && num_forward <= to) st->kept += bytes;
  for (const auto& range : {steps.forward, steps.backward}) {
    if (range.first > range.second) continue;
    std::vector<int64_t> held(range.second - range.first + 2, 0);
    for (const auto& [from, to, bytes, of_boundary] : spans) {
      const int lo = std::max<int>(from, range.first), hi = std::min<int>(to, range.second);
      if (lo > hi) continue;
      held[lo - range.first] += bytes;
      held[hi - range.first + 1] -= bytes;
    }
    int64_t now = 0;
    for (int t = range.first; t <= range.second; ++t) {
      now += held[t - range.first];
      st->peak = std::max(st->peak, now + held_anyway[t]);
    }
  }
}

// The stored entries of each rank: each block's own spans over its steps,
// under the keep levels that give every block its entry of that rank.
void PriceStoredEntries(const Graph& g, const KeepLevels& base, const std::vector<int>& block_of,
                        const std::vector<BlockSteps>& steps, int num_forward, const BackwardReads& reads,
                        std::vector<ChainBlock>* chain) {
  size_t ranks = 0;
  for (const ChainBlock& b : *chain) ranks = std::max(ranks, b.stored.size());
  for (size_t rank = 0; rank < ranks; ++rank) {
    KeepLevels keep = base;
    for (const ChainBlock& b : *chain)
      for (int i : b.stored[std::min(rank, b.stored.size() - 1)].drops) keep[i] = kDropped;
    std::vector<std::vector<BlockSpan>> spans(chain->size());
    reads.Spans(g, keep, nullptr, [&](int i, int from, int to, int64_t bytes) {
      if (block_of[i] < 0) return;
      spans[block_of[i]].push_back({from, to, bytes, OnBoundary((*chain)[block_of[i]], i)});
    });
    for (size_t b = 0; b < chain->size(); ++b)
      if (rank < (*chain)[b].stored.size())
        PriceStoredEntry(spans[b], steps[b], num_forward, reads.held_anyway, &(*chain)[b].stored[rank]);
  }
}
}  // namespace

std::vector<ChainBlock> Chain(const Graph& g, const KeepLevels& cheap, const CostTable* costs,
                              const TrainingPlan& share, const BackwardReads& reads) {
  const std::vector<int> cands = SplitCandidates(g);
  const std::vector<int> block_of = BlockOf(g, cands);
  std::vector<ChainBlock> chain = CutIntoBlocks(g, cands, block_of);
  const KeepLevels base = ApplyAnnotations(g, {});
  const std::vector<bool> read = ReadByBackward(g);
  std::vector<bool> is_candidate(g.num_nodes(), false);
  for (int i : DropCandidates(g)) is_candidate[i] = true;
  for (ChainBlock& b : chain) {
    MeasureBlock(g, read, costs, &b);
    AddStoredEntries(g, base, cheap, is_candidate, reads, costs, &b);
  }
  MarkReadsBefore(g, &chain);
  const std::vector<BlockSteps> steps = StepsOfShare(share.graph, block_of, chain.size());
  for (size_t b = 0; b < chain.size(); ++b)
    for (const auto& range : {steps[b].forward, steps[b].backward})
      for (int t = range.first; t <= range.second; ++t)
        chain[b].held_bytes = std::max(chain[b].held_bytes, reads.held_anyway[t]);
  PriceStoredEntries(g, base, block_of, steps, share.graph.num_forward(), reads, &chain);
  return chain;
}

std::vector<BlockReport> ExplainBlocks(const Graph& train) {
  const std::vector<int> cands = SplitCandidates(train);
  const int n = train.num_forward();
  const std::vector<int> block_of = BlockOf(train, cands);
  std::vector<BlockReport> blocks(cands.size() + 1);
  for (int i = 0; i < n; ++i) {
    if (block_of[i] < 0) continue;
    BlockReport& b = blocks[block_of[i]];
    if (b.nodes++ == 0) b.first = i;
    b.last = i;
  }
  if (blocks.back().nodes == 0) blocks.pop_back();
  std::vector<bool> read_back(train.num_entries(), false);  // by a gradient node or a recomputation
  for (int i = n; i < train.num_nodes(); ++i) {
    const Node& node = train.node(i);
    for (const Entry& e : node.inputs)
      if (e.node < n) read_back[train.EntryId(e)] = true;
    if (node.mirror_of < 0 || block_of[node.mirror_of] < 0) continue;
    BlockReport& b = blocks[block_of[node.mirror_of]];
    if (std::find(b.recomputed.begin(), b.recomputed.end(), node.mirror_of) == b.recomputed.end())
      b.recomputed.push_back(node.mirror_of);
    b.recompute_flops += NodeFlops(train, i);
  }
  for (int i = 0; i < n; ++i)
    for (int k = 0; block_of[i] >= 0 && k < train.NumOutputs(i); ++k)
      if (read_back[train.EntryId({i, k})]) blocks[block_of[i]].kept_bytes += train.EntryBytes({i, k});
  for (BlockReport& b : blocks) std::sort(b.recomputed.begin(), b.recomputed.end());
  return blocks;
}

KeepLevels ChainLevels(const Graph& g, const std::vector<ChainBlock>& chain, const ChainPlan& plan) {
  CHECK_EQ(chain.size(), plan.entry.size());
  KeepLevels levels = ApplyAnnotations(g, {});
  for (size_t j = 0; j < chain.size(); ++j) {
    if (plan.entry[j] == ChainPlan::kRecompute) {
      for (int i : chain[j].nodes) levels[i] = kDropped;
    } else {
      for (int i : chain[j].stored[plan.entry[j]].drops) levels[i] = kDropped;
    }
  }
  for (size_t j = 0; j < chain.size(); ++j)
    if (plan.cut[j])
      for (int p : chain[j].boundary) levels[p] = 0;
  return ApplyAnnotations(g, levels);
}

}  // namespace frugal
