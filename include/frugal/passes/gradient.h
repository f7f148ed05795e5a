// Reverse-mode differentiation as a graph rewrite. Needs: a forward graph
// with a loss, and keep levels saying what the backward pass recomputes
// (a recompute policy, frugal/passes/recompute.h; empty: nothing). Provides:
// the training graph, forward nodes then gradient nodes and mirrors
// (graph->grad_of); its shapes are inferred again (frugal/passes/shapes.h).
#pragma once

#include <vector>

#include "frugal/graph.h"

namespace frugal {

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

}  // namespace frugal
