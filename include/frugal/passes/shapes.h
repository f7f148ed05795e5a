// Shapes, element types and layouts of a graph's entries. Needs: a graph
// (forward, or training after Gradient) and the shapes of its input
// variables. Provides: graph->shapes and graph->dtypes (InferShapes), then
// on the CPU graph->layouts (ChooseLayouts). Every pass after these reads
// the shapes; PlanMemory also the layouts (a workspace depends on them).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frugal/base.h"
#include "frugal/graph.h"

namespace frugal {

// Fills graph->shapes for every entry, given the shapes of the input
// variables (by node name). Parameter shapes are inferred from the ops that
// read them. Throws Error naming the node on a mismatch.
void InferShapes(Graph* graph, const std::vector<std::pair<std::string, Shape>>& input_shapes);

// Sets graph->layouts (shapes inferred): channels-last (Layout::kNhwc) for
// the 4-D activations between ops whose CPU kernels take it
// (OpDef::ChannelsLast) where a convolution or pooling then needs no
// reorder; plain everywhere else, and always for variables, parameter
// gradients and graph outputs (src/passes/layout.cc says how it groups).
void ChooseLayouts(Graph* graph);

}  // namespace frugal
