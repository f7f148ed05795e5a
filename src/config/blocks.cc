#include "config/blocks.h"

#include <set>

#include "config/expr.h"

namespace frugal {
namespace {

constexpr int kMaxNesting = 16;

class Expander {
 public:
  explicit Expander(const ConfigFile& cfg) : cfg_(cfg) {}

  FlatConfig Run() {
    for (int k = 0; k < cfg_.net.node_size(); ++k) Add(cfg_.net.node(k), cfg_.node_locs[k], "", {}, {}, 0);
    return std::move(out_);
  }

 private:
  // Replaces @{name} by args[name]; unknown names are an error at `loc`.
  std::string Args(const std::string& text, const std::map<std::string, std::string>& args,
                   const SourceLoc& loc) const {
    std::string out;
    size_t pos = 0;
    while (true) {
      size_t open = text.find("@{", pos);
      if (open == std::string::npos) break;
      size_t close = text.find('}', open);
      FRUGAL_REQUIRE(close != std::string::npos, loc.ToString(), ": '@{' without a closing '}' in '", text, "'");
      std::string name = text.substr(open + 2, close - open - 2);
      auto it = args.find(name);
      FRUGAL_REQUIRE(it != args.end(), loc.ToString(), ": @{", name, "} is not an argument of this block (",
                     "it has in, i", ArgList(args), ")");
      out.append(text, pos, open - pos).append(it->second);
      pos = close + 1;
    }
    return out.append(text, pos, std::string::npos);
  }

  static std::string ArgList(const std::map<std::string, std::string>& args) {
    std::string s;
    for (const auto& [k, v] : args)
      if (k != "in" && k != "i") s += ", " + k;
    return s;
  }

  // A name as seen from inside a block copy: local names get the prefix,
  // names of block nodes outside resolve to their output.
  std::string Resolve(const std::string& name, const std::string& prefix, const std::set<std::string>& local) const {
    std::string base = name, suffix;
    size_t colon = name.rfind(':');
    if (colon != std::string::npos) {
      base = name.substr(0, colon);
      suffix = name.substr(colon);
    }
    if (local.count(base)) base = prefix + base;
    auto it = out_.alias.find(base);
    return (it == out_.alias.end() ? base : it->second) + suffix;
  }

  // Adds node n (from a block copy with `prefix`, local names and args when
  // depth > 0).
  void Add(const config::Node& n, const SourceLoc& loc, const std::string& prefix, const std::set<std::string>& local,
           const std::map<std::string, std::string>& args, int depth) {
    config::Node node = n;
    node.set_name(prefix + ExpandExprs(Args(n.name(), args, loc), loc.ToString()));
    for (int j = 0; j < node.input_size(); ++j) {
      // @{in} and other arguments name nodes outside the block as they are.
      bool from_args = n.input(j).find("@{") != std::string::npos;
      std::string name = ExpandExprs(Args(n.input(j), args, loc), loc.ToString());
      node.set_input(j, from_args ? name : Resolve(name, prefix, local));
    }
    for (auto& [key, value] : *node.mutable_attr()) value = ExpandExprs(Args(value, args, loc), loc.ToString());
    for (auto& [key, value] : *node.mutable_arg()) value = ExpandExprs(Args(value, args, loc), loc.ToString());
    if (node.block().empty()) {
      FRUGAL_REQUIRE(!n.has_repeat(), loc.ToString(), ": node '", node.name(),
                     "' has repeat but no block; repeat copies a block (block: NAME)");
      out_.nodes.push_back({std::move(node), loc});
      return;
    }
    Instantiate(node, loc, depth);
  }

  void Instantiate(const config::Node& n, const SourceLoc& loc, int depth) {
    const std::string where = Fmt(loc.ToString(), ": node '", n.name(), "'");
    FRUGAL_REQUIRE(depth < kMaxNesting, where, ": blocks nest more than ", kMaxNesting, " deep (a block uses itself?)");
    FRUGAL_REQUIRE(n.op().empty(), where, ": give either op or block, not both");
    FRUGAL_REQUIRE(n.repeat() >= 0, where, ": repeat must be 0 or more, got ", n.repeat());
    FRUGAL_REQUIRE(n.input_size() == 1, where, ": a block node takes exactly one input, got ", n.input_size());
    int b = 0;
    while (b < cfg_.net.block_size() && cfg_.net.block(b).name() != n.block()) ++b;
    if (b == cfg_.net.block_size()) {
      std::string names;
      for (const auto& blk : cfg_.net.block()) names += (names.empty() ? "" : ", ") + blk.name();
      throw Error(Fmt(where, ": no block named '", n.block(), "' (blocks: ", names.empty() ? "none" : names, ")"));
    }
    const config::Block& block = cfg_.net.block(b);
    FRUGAL_REQUIRE(block.node_size() > 0, where, ": block '", block.name(), "' has no nodes");
    std::set<std::string> local;
    for (const auto& bn : block.node()) local.insert(bn.name());
    std::string output = block.output().empty() ? block.node(block.node_size() - 1).name() : block.output();
    FRUGAL_REQUIRE(local.count(output), where, ": block '", block.name(), "' output '", output,
                   "' is not one of its nodes");

    // Each copy's nodes are checked here, a nested block's again when it is
    // copied: the network never grows past max_nodes.
    const int64_t total = static_cast<int64_t>(out_.nodes.size()) + int64_t{n.repeat()} * block.node_size();
    FRUGAL_REQUIRE(total <= cfg_.net.max_nodes(), where, ": repeat ", n.repeat(), " of block '", block.name(), "' (",
                   block.node_size(), " nodes) would bring the network to ", total, " nodes, more than max_nodes ",
                   cfg_.net.max_nodes(), "; raise --max-nodes (or max_nodes in the config) if it is meant");
    // The copies of block nodes are bounded too: nested repeats of blocks
    // that add few op nodes (or none: repeat 0 inside) would otherwise take
    // unbounded time while the network stays small.
    int64_t block_nodes = 0;
    for (const auto& bn : block.node()) block_nodes += !bn.block().empty();
    block_copies_ += int64_t{n.repeat()} * block_nodes;
    FRUGAL_REQUIRE(block_copies_ <= cfg_.net.max_nodes(), where, ": repeat ", n.repeat(), " of block '", block.name(),
                   "' brings the block nodes copied in expanding the blocks to ", block_copies_,
                   ", more than max_nodes ", cfg_.net.max_nodes(),
                   "; nested repeats multiply: raise --max-nodes (or max_nodes in the config) if it is meant");
    std::string input = n.input(0);
    for (int r = 0; r < n.repeat(); ++r) {
      // Copies of a repeat are numbered, even one (repeat: ${layers} with layers=1).
      std::string prefix = n.has_repeat() ? Fmt(n.name(), "/", r, "/") : n.name() + "/";
      std::map<std::string, std::string> args(n.arg().begin(), n.arg().end());
      args["in"] = input;
      args["i"] = std::to_string(r);
      for (int j = 0; j < block.node_size(); ++j) {
        SourceLoc bloc = cfg_.block_node_locs[b][j];
        bloc.file = Fmt(bloc.file, ":", bloc.line, ":", bloc.column, " (in ", prefix.substr(0, prefix.size() - 1), ")");
        bloc.line = bloc.column = 0;
        Add(block.node(j), bloc, prefix, local, args, depth + 1);
      }
      input = prefix + output;
      auto it = out_.alias.find(input);  // the output may itself be a block node
      if (it != out_.alias.end()) input = it->second;
    }
    out_.alias[n.name()] = input;
  }

  const ConfigFile& cfg_;
  FlatConfig out_;
  int64_t block_copies_ = 0;  // block nodes copied so far
};

}  // namespace

FlatConfig ExpandBlocks(const ConfigFile& cfg) { return Expander(cfg).Run(); }

}  // namespace frugal
