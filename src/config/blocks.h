// Block expansion: turns the config's nodes, some of which instantiate
// blocks (possibly repeated, possibly nested), into a flat list of op nodes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frugal/config.h"

namespace frugal {

struct FlatNode {
  config::Node node;  // op, inputs and attributes final (no block, no @{...})
  SourceLoc loc;
};

struct FlatConfig {
  std::vector<FlatNode> nodes;
  std::map<std::string, std::string> alias;  // block node name -> its output node
};

// Throws Error naming the node's file and line for an unknown block, a bad
// argument, or a repeat below 1.
FlatConfig ExpandBlocks(const ConfigFile& cfg);

}  // namespace frugal
