// Forward-graph rewrites, applied by BuildGraph as it builds a config's
// graph. Needs: a forward graph, shapes not set. Provides: the same
// computation with fewer memory passes (FuseBnRelu) and, for bfloat16, in
// mixed precision (ToMixedPrecision); shapes still not set. Next:
// InferShapes (frugal/passes/shapes.h).
#pragma once

#include "frugal/base.h"
#include "frugal/graph.h"

namespace frugal {

// A forward graph with each relu that alone reads a batch_norm's output
// fused into that batch_norm (act_type relu): one memory pass instead of two.
// BuildGraph applies it; shapes are not set.
Graph FuseBnRelu(const Graph& g);

// A forward graph computing in `compute`: unchanged for float32; for
// bfloat16, the activations of every op with bfloat16 kernels (OpDef::Bf16)
// become bfloat16, with cast nodes where values cross to and from float32
// ops; parameters, losses and graph outputs stay float32 (mixed precision).
// BuildGraph applies it after FuseBnRelu; shapes are not set.
Graph ToMixedPrecision(const Graph& g, DType compute);

}  // namespace frugal
