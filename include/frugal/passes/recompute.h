// Recompute policies: which forward results the backward pass keeps and
// which it recomputes. Needs: a forward graph with shapes inferred
// (frugal/passes/shapes.h). Provides: keep levels for Gradient
// (frugal/passes/gradient.h); ExplainBlocks reads them back from the
// training graph Gradient built.
#pragma once

#include <cstdint>
#include <vector>

#include "frugal/graph.h"
#include "frugal/passes/gradient.h"

namespace frugal {

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
// SqrtLevels at each of several segment budgets, the candidates and what
// crosses them found once.
std::vector<KeepLevels> SqrtLevels(const Graph& fwd, const std::vector<int64_t>& budgets);
// Recursive halving of the candidate list: O(log n) checkpoints alive at once.
KeepLevels LognLevels(const Graph& fwd);

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

}  // namespace frugal
