// Compositions of standard ONNX ops that the importer takes as one node
// (src/interchange/onnx/fuse.cc lists them): the forms frugal's exporter writes for
// frugal ops that opset 17 lacks (gelu, attention).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "onnx.pb.h"

namespace frugal::onnx_map {

struct FusedNodes {
  std::map<int, onnx::NodeProto> at;  // node index -> the node imported in its place
  std::vector<bool> skipped;          // per node: inside a pattern, imported with it
};

// The patterns of g (a model of this default-domain opset), each as the
// standard op it spells out, in place of its last node.
FusedNodes FusePatterns(const onnx::GraphProto& g, int64_t opset);

}  // namespace frugal::onnx_map
