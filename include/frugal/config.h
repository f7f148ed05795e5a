// Loading text configs: ${variable} substitution, protobuf text parsing with
// file:line:column errors, and building the forward graph from the nodes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frugal.pb.h"
#include "frugal/graph.h"

namespace frugal {

struct ConfigFile {
  std::string path;
  config::NetConfig net;
  std::vector<SourceLoc> node_locs;                     // per net.node
  std::vector<std::vector<SourceLoc>> block_node_locs;  // per net.block, per node
  std::map<std::string, std::string> values;            // every variable's final value
};

// Reads and parses path; defines are "name=value" and must name declared
// variables. Throws Error "path:line:col: message" on any problem.
ConfigFile LoadConfig(const std::string& path, const std::vector<std::string>& defines);
// The same, from text already in memory (path is used in messages).
ConfigFile ParseConfig(const std::string& text, const std::string& path, const std::vector<std::string>& defines);

// The file paths a data source reads (idx images and labels, cifar's files,
// recordio's .rec and .idx, text's corpus and vocabulary) that are set, to
// check or rewrite. A relative path is read from the working directory.
std::vector<std::string*> DataPaths(config::DataSource* src);

// The config as it runs, as config text that rebuilds it from any working
// directory (what a checkpoint stores): ${...} substituted, each variable's
// value its final one (the --defines), relative paths (data, memory.costs,
// solver.checkpoint_dir) made absolute against the working directory, from
// which they are read.
std::string ConfigAsRun(const ConfigFile& cfg);

// s as a string of the config language, quoted and escaped ("a\"b"), for
// the writers of configs (import-onnx, import-mxnet).
std::string QuoteConfigString(const std::string& s);

// The forward graph of the config's nodes. Data inputs become input
// variables; omitted weights and biases become parameters; batch_norm ->
// relu pairs are fused (FuseBnRelu) unless the config says fuse: false.
// Throws Error naming the node's file and line.
Graph BuildGraph(const ConfigFile& cfg);

}  // namespace frugal
