// The training graph for given keep levels, as PlanTraining's searches
// build each candidate, and the exact search of drop sets. Not in the
// public API: for the planner's searches and for measuring plans chosen
// elsewhere (the exact reference of tests/passes/optimum.cc).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/passes/costs.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/training_plan.h"

namespace frugal {

// Gradient with mirrors, shapes, layouts on the CPU, memory plan (with
// estimate, not placed: arena_bytes is the lower bound, which the placed
// arena never undercuts).
TrainingPlan BuildTrainingPlan(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                               const MemoryStrategy& strategy, KeepLevels keep, Device dev = {}, bool estimate = false);

// The forward nodes a one-level plan may drop beyond the config's: not
// variables, and not kept or dropped by ApplyAnnotations (loss heads, graph
// outputs, checkpoint and mirror marks).
std::vector<int> DropCandidates(const Graph& fwd);
// Whether keep levels are one-level: each node kept (0) or dropped and
// recomputed once (kDropped).
bool OneLevel(const KeepLevels& keep);

// The least recomputation of a one-level plan (each candidate kept or
// dropped and recomputed once, on top of `base`: the config's annotations,
// or a plan's other drops held fixed) whose placed arena fits the budget
// (CheapestFittingDrops, below): drop sets in increasing order of the sum
// of their members' RecomputeCost, the first that fits wins, so the answer
// is exact without assuming the arena falls as more is dropped. Sets that
// cost max_cost or more are not tried; a set dropping a node no backward
// reader needs (directly or through another dropped node) is skipped (it
// builds the graph of the set without it, taken earlier); sets that cannot
// free enough of the BackwardReads bound at one of up to 8 steps where it
// can peak are never taken (CoverKeys, drop_sets.cc), and a set whose whole
// bound exceeds the budget is not built. A set is built with its lower
// bound estimated and placed only where that fits. Stops after max_builds
// training graphs, 64 sets taken per build allowed, or max_placed
// placements; at most kExactCandidates candidates (a set is a 64-bit mask).
constexpr size_t kExactCandidates = 64;
// What the backward pass of `share` (fwd's training graph without
// recomputation) reads of each forward node (whether it reads an output,
// the bytes of those outputs, the step of share of the first reader), each
// output's bytes and last backward reader, and the bytes held at each step
// whatever is dropped (at a forward step, the outputs only forward nodes
// read and the workspace; at a backward step, the blocks only gradient
// nodes write and the gradient node's workspace). A drop set's forward pass
// is share's, and its gradient nodes are share's, with the same outputs and
// workspaces, in share's order (a mirror is
// added just before the gradient node that first needs it). So at each
// step of share a drop set holds at least: what it holds whatever is
// dropped; each kept output read by the backward pass, from its forward
// step to its last reader; each kept output a mirror reads, to the step
// before that mirror is made; and, under one-level keep levels (a mirror
// made once, for its first reader or for a mirror made for one, and held
// for its last), each dropped output the backward pass reads, from the
// step its mirror is made for to its last reader; each in a block of its
// own. A drop set changes it only by the nodes made before a step and
// first read after it (CoverKeys, drop_sets.cc).
struct BackwardReads {
  std::vector<bool> read;      // [forward node]
  std::vector<int64_t> bytes;  // of the outputs read
  std::vector<int> first;      // the first reader's step; -1 where not read
  struct Output {              // of a forward node that is not a variable
    int64_t bytes;
    int last;  // its last backward reader's step; -1 where none
  };
  std::vector<Output> outputs;
  std::vector<int> output_of;        // [forward node]: its first output in outputs; one more at the end
  std::vector<int64_t> held_anyway;  // [step of share]
  std::vector<int64_t> opened;       // [step of share]: of held_anyway, what is not held before the step
  std::vector<int64_t> workspace;    // [forward node]: share's
  // The bytes held at each step of share under keep levels (dropped nodes
  // count only where every level is 0 or kDropped); made_at: the step each
  // dropped node's mirror is made for (INT_MAX: none).
  std::vector<int64_t> Held(const Graph& fwd, const KeepLevels& keep, std::vector<int>* made_at = nullptr) const;
  // What Held adds to held_anyway: span(node, from, to, bytes) for each
  // output of a node held over steps [from, to] of share. One-level
  // mirrors are made once, for the first gradient node that reads them or a
  // mirror made for one (just before the gradient node of that step), and
  // held for their last reader; a kept output a mirror reads is held until
  // the step before.
  template <class Span>
  void Spans(const Graph& fwd, const KeepLevels& keep, std::vector<int>* made_at, Span&& span) const {
    std::vector<int> local, until;
    std::vector<int>& made = made_at ? *made_at : local;
    MadeAt(fwd, keep, &made, &until);
    for (int i = 0; i < static_cast<int>(keep.size()); ++i) {
      for (int o = output_of[i]; o < output_of[i + 1]; ++o) {
        const Output& out = outputs[o];
        int from = 0, to = -1;
        if (keep[i] == 0 && out.last >= 0)  // from its step in the forward pass
          from = i, to = std::max(out.last, until[o]);
        else if (keep[i] == 0)  // held_anyway holds it at its step
          from = i + 1, to = until[o];
        else if (made[i] != INT_MAX && out.last >= 0)
          from = made[i], to = out.last;
        if (from <= to) span(i, from, to, out.bytes);
      }
    }
  }
  // The step each dropped node's mirror is made for (INT_MAX: none), and
  // the last step before a mirror made from each output.
  void MadeAt(const Graph& fwd, const KeepLevels& keep, std::vector<int>* made, std::vector<int>* until) const;
  // The most held at any step, or where a mirror runs: a lower bound of
  // the arena.
  int64_t Bound(const Graph& fwd, const KeepLevels& keep) const;
};
BackwardReads BackwardReadsOf(const Graph& fwd, const TrainingPlan& share);
// The forward graph as a chain: the split candidates cut it into blocks
// (block j ends at candidate j, the last block at the graph's end), each
// with a menu: stored entries, from kept whole through more and more of
// its cheap ops recomputed to drop_cheap's (nested: each recomputes what
// the one before it does and a group more), then drop_cheap's with its
// boundary recomputed too (where drop_cheap keeps it and it may be
// dropped: a DenseNet block's concatenation is cheaper to copy again than
// to hold), or recomputed whole in a run of blocks. A stored entry is
// priced by the BackwardReads bound of share under the keep levels that
// give every block its entry of that rank: what the block's own outputs
// other than its boundary hold (Spans) at the first backward step (the
// program counts the boundary: ChainPeak), and at its forward and its
// backward steps on top of what is held there whatever is dropped
// (held_anyway).
struct ChainBlock {
  std::vector<int> nodes;     // its forward nodes, in order (variables excluded)
  std::vector<int> boundary;  // producers of what crosses the cut after it (none for the last)
  struct Stored {
    std::vector<int> drops;      // the nodes it recomputes (beyond the config's marks)
    double cost = 0;             // their recomputation (RecomputeCost: FLOPs, or ms with a cost table)
    bool keeps_boundary = true;  // else the boundary is recomputed unless it is cut
    int64_t kept = 0;            // held for the blocks after it (at the first backward step)
    int64_t peak = 0;            // the most held at one of its forward or gradients' steps
    bool reads_before = false;   // a node it recomputes reads the boundary before the block
  };
  std::vector<Stored> stored;  // kept whole first
  // A recomputed run holds what its gradients read (read_bytes) and its
  // boundaries, and while a block of it is recomputed or differentiated
  // what is held there whatever is dropped (held_bytes).
  int64_t read_bytes = 0;      // the boundary excluded
  int64_t boundary_bytes = 0;  // what crosses the cut after it
  int64_t boundary_read = 0;   // of it, what the backward pass reads
  int64_t held_bytes = 0;
  double inner_cost = 0;     // recomputed when it is dropped: all but the boundary ...
  double boundary_cost = 0;  // ... which is recomputed too unless it is kept
};
// reads: BackwardReadsOf(fwd, share); cheap: DropCheapLevels(fwd).
std::vector<ChainBlock> Chain(const Graph& fwd, const KeepLevels& cheap, const CostTable* costs,
                              const TrainingPlan& share, const BackwardReads& reads);

// A decision on a chain: each block's stored entry or kRecompute, and
// after which blocks the boundary is kept (cut: after a stored entry that
// keeps it, before and after every run of recomputed blocks).
struct ChainPlan {
  static constexpr int kRecompute = -1;
  std::vector<int> entry;
  std::vector<bool> cut;
  bool empty() const { return entry.empty(); }
};
// The chain model of one-level recomputation (each dropped node recomputed
// once, as the gradient pass does), with K the bytes kept before a block:
// a stored block holds K + its entry's peak and adds its entry's kept
// bytes to K, and the part of its boundary the backward pass reads where
// it is cut; the rest of a cut boundary joins K where the next block
// recomputes from it (a run, or a stored entry that reads_before); a run of
// recomputed blocks between cuts holds K + its read and boundary bytes +
// the most held_bytes among them. ChainPeak is the most
// held at one of these points and at the end of the forward pass (K);
// ChainCost the recomputation (a boundary not cut is recomputed).
int64_t ChainPeak(const std::vector<ChainBlock>& chain, const ChainPlan& plan);
double ChainCost(const std::vector<ChainBlock>& chain, const ChainPlan& plan);
// Exact dynamic programming on the chain model, its sizes in slots of
// `memory` (chain.cc says how many, and how they are rounded): the plan with the
// least ChainCost whose ChainPeak fits memory. Empty when nothing fits.
ChainPlan ChainRecompute(const std::vector<ChainBlock>& chain, int64_t memory);
// Keep levels of a chain plan: the config's, with each stored block's
// entry's drops, each recomputed block's nodes dropped, the cut
// boundaries kept.
KeepLevels ChainLevels(const Graph& fwd, const std::vector<ChainBlock>& chain, const ChainPlan& plan);

// The forward nodes whose values the gradient nodes of t read (kept, or
// recomputed by a mirror), t being any training graph of fwd: they are the
// same whatever is dropped.
std::vector<bool> GradientReads(const Graph& fwd, const TrainingPlan& t);
// Which dropped nodes of one-level keep levels (0 and kDropped) the gradient
// pass recomputes: those in `read` and, back from them, each dropped node
// that a recomputed one reads (Gradient's mirrors, one per node).
std::vector<bool> RecomputedNodes(const Graph& fwd, const KeepLevels& keep, const std::vector<bool>& read);
// The recompute_cost() that one-level keep levels build to, without the
// build (read: GradientReads), priced as CountCosts prices the mirrors, up
// to the rounding of the sum's order. NaN for recursive levels.
double PredictedRecomputeCost(const Graph& fwd, const KeepLevels& keep, const std::vector<bool>& read,
                              const CostTable* costs);
// The budget planner's search: ExactSearchBuilds builds, as many as
// kExactWork forward nodes built (a build costs about its nodes: 0.1-0.6 ms
// on graphs of 10-54 nodes, so the search's builds take a bounded time
// whatever the graph's size). Its sets are bounded by the builds (64 per
// build), and where none passes the bound they are what it spends: about
// 1 us each on ResNet-20 (54 nodes), so 555 builds' 35,520 sets keep the
// search within half of the 100 ms a small network's budget plan may take
// (docs/memory.md); and kExactPlacements placements (a placement
// that misses the budget runs its whole local search, about 26 ms on a
// graph of 40 nodes: the cap bounds that part; a set whose lower bound
// fits and whose placement misses is common where a graph's outputs are of
// one size, so the optimum may be the ninth set placed or later;
// docs/memory.md has the measurements).
constexpr int64_t kExactWork = 30000;
constexpr int64_t kExactPlacements = 32;
int64_t ExactSearchBuilds(const Graph& fwd);
struct DropSetSearch {
  std::optional<TrainingPlan> plan;  // the cheapest set that fits, placed until it fits
  bool exact = false;                // the search ended: found, or no set cheaper than max_cost fits
  double cost = 0;                   // the last key taken: when cut off, no set below it fits
  int64_t subsets = 0;               // sets taken from the queue
  int64_t builds = 0;                // training graphs built
  int64_t placed = 0;                // of them, placed (their lower bound fit)
};
// `reads`: share's BackwardReadsOf; a set's cost (its key) counts its
// members only, not base's drops.
DropSetSearch CheapestFittingDrops(const Graph& fwd, const std::vector<std::pair<std::string, Shape>>& inputs,
                                   const MemoryStrategy& strategy, Device dev, const KeepLevels& base,
                                   std::vector<int> cand, const BackwardReads& reads, int64_t budget, double max_cost,
                                   int64_t max_builds, int64_t max_placed);

}  // namespace frugal
