// BuildGraph: the forward graph of a parsed config's nodes (data inputs,
// omitted weights and biases as parameters, wildcard inputs, batch_norm ->
// relu fused, mixed precision where dtype asks for it). Apart from ParseConfig (config.cc) so that parsing needs no
// op registry (tests/fuzz/config_fuzz.cc links the parser alone).
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "config/blocks.h"
#include "frugal/config.h"
#include "frugal/op.h"
#include "frugal/passes/rewrite.h"

namespace frugal {

namespace {

// Resolves one input name of a node to an entry, making data inputs on first use.
Entry ResolveInput(Graph& g, const config::Data& data, const std::string& text, const std::string& where) {
  std::string name = text;
  int index = 0;
  size_t colon = text.rfind(':');
  if (colon != std::string::npos) {
    name = text.substr(0, colon);
    try {
      index = std::stoi(text.substr(colon + 1));
    } catch (const std::exception&) {
      throw Error(Fmt(where, ": input '", text, "': expected 'node' or 'node:index'"));
    }
  }
  int id = g.FindNode(name);
  if (id < 0 && (name == data.data_name() || name == data.label_name())) { id = g.AddVariable(name, VarKind::kInput); }
  FRUGAL_REQUIRE(id >= 0, where, ": input '", name, "' is not a node defined above, a parameter, or a data input (",
                 data.data_name(), ", ", data.label_name(), ")");
  FRUGAL_REQUIRE(index >= 0 && index < g.NumOutputs(id), where, ": input '", text, "': node '", name, "' has ",
                 g.NumOutputs(id), " output(s)");
  return {id, index};
}

// Whether name matches pattern, where '*' stands for any run of characters
// other than '/' (one path component or part of one).
bool Matches(const char* pattern, const char* name) {
  if (*pattern == '\0') return *name == '\0';
  if (*pattern == '*') {
    for (const char* n = name;; ++n) {
      if (Matches(pattern + 1, n)) return true;
      if (*n == '\0' || *n == '/') return false;
    }
  }
  return *pattern == *name && Matches(pattern + 1, name + 1);
}

// The node's inputs with every name holding '*' replaced by the names of all
// nodes above that match it, in graph order (e.g. "lstm/3/steps/*/h": the
// last layer's output at every step).
std::vector<std::string> ExpandWildcards(const Graph& g, const config::Node& nc, const std::string& where) {
  std::vector<std::string> out;
  for (const std::string& in : nc.input()) {
    if (in.find('*') == std::string::npos) {
      out.push_back(in);
      continue;
    }
    size_t before = out.size();
    for (const Node& n : g.nodes())
      if (Matches(in.c_str(), n.name.c_str())) out.push_back(n.name);
    FRUGAL_REQUIRE(out.size() > before, where, ": input pattern '", in, "' matches no node above");
  }
  return out;
}

// A node with op "variable": a parameter or aux state named in the config.
void AddConfigVariable(Graph* g, const config::Node& nc, Node n) {
  FRUGAL_REQUIRE(nc.input_size() == 0, n.Where(), ": a variable takes no inputs");
  AttrReader r([&n] { return n.Where(); }, AttrMap(nc.attr().begin(), nc.attr().end()));
  std::string kind = r.Choice("kind", "param", {"param", "aux"});
  n.var = kind == "param" ? VarKind::kParam : VarKind::kAux;
  n.init = r.Str("init", kind == "param" ? "xavier" : "zero");
  if (nc.attr().count("shape")) {
    n.shape = Shape(r.Ints("shape"));
    for (int64_t d : n.shape.dims()) FRUGAL_REQUIRE(d > 0, n.Where(), ": shape ", n.shape, " has a dim below 1");
  }
  r.Finish();
  n.attrs = AttrMap(nc.attr().begin(), nc.attr().end());
  g->AddNode(std::move(n));
}

// Every key of the node's init / lr_mult / wd_mult maps must name a
// parameter the node made ("<node>_<key>").
void CheckParamKeys(const config::Node& nc, const Graph& g, const Node& n) {
  auto check = [&](const char* field, const std::string& key) {
    int id = g.FindNode(n.name + "_" + key);
    bool made = false;
    for (const Entry& e : n.inputs) made |= e.node == id && id >= 0 && g.node(id).var != VarKind::kInput;
    FRUGAL_REQUIRE(made, n.Where(), ": ", field, " names '", key,
                   "', which is not a parameter this node makes (keys are the op's parameter inputs left out of "
                   "`input`, e.g. weight, bias)");
  };
  for (const auto& kv : nc.init()) check("init", kv.first);
  for (const auto* mults : {&nc.lr_mult(), &nc.wd_mult()}) {
    const char* field = mults == &nc.lr_mult() ? "lr_mult" : "wd_mult";
    for (const auto& [key, value] : *mults) {
      check(field, key);
      FRUGAL_REQUIRE(std::isfinite(value), n.Where(), ": ", field, " of '", key, "' is ", value,
                     "; a multiplier must be a finite number");
    }
  }
}

}  // namespace

Graph BuildGraph(const ConfigFile& cfg) {
  Graph g;
  const config::Data& data = cfg.net.data();
  FRUGAL_REQUIRE(cfg.net.node_size() > 0, cfg.path, ": the config has no nodes");
  FlatConfig flat = ExpandBlocks(cfg);
  for (const FlatNode& fn : flat.nodes) {
    const config::Node& nc = fn.node;
    Node n;
    n.name = nc.name();
    n.loc = fn.loc;
    FRUGAL_REQUIRE(!n.name.empty(), n.loc.ToString(), ": node has no name");
    FRUGAL_REQUIRE(g.FindNode(n.name) < 0, n.Where(), ": the name is already used above");
    FRUGAL_REQUIRE(n.name != data.data_name() && n.name != data.label_name(), n.Where(), ": the name '", n.name,
                   "' is the data input's (data.data_name / data.label_name); give the node another name");
    FRUGAL_REQUIRE(!nc.op().empty(), n.Where(), ": node has no op");
    if (nc.op() == "variable") {
      AddConfigVariable(&g, nc, std::move(n));
      continue;
    }
    n.op = &OpRegistry::Get().Require(nc.op(), [&n] { return n.Where(); });
    n.attrs = AttrMap(nc.attr().begin(), nc.attr().end());
    FRUGAL_REQUIRE(!(nc.mirror() && nc.checkpoint()), n.Where(), ": mirror and checkpoint contradict each other");
    n.keep = nc.mirror() ? Node::Keep::kMirror : nc.checkpoint() ? Node::Keep::kCheckpoint : Node::Keep::kAuto;
    n.stage = nc.stage();
    AttrReader reader([&n] { return n.Where(); }, n.attrs);
    n.params = n.op->ParseParams(reader);

    const int n_in = n.op->NumInputs(n.params);
    const auto& specs = n.op->inputs();
    const std::vector<std::string> given = ExpandWildcards(g, nc, n.Where());
    const int n_given = static_cast<int>(given.size());
    FRUGAL_REQUIRE(n_given <= n_in, n.Where(), ": ", n_given, " inputs given but ", nc.op(), " takes ", n_in);
    for (int i = 0; i < n_in; ++i) {
      const InputSpec& spec = specs[std::min<size_t>(i, specs.size() - 1)];
      if (i < n_given) {
        n.inputs.push_back(ResolveInput(g, data, given[i], n.Where()));
      } else if (spec.made_as != VarKind::kNone) {
        std::string pname = n.name + "_" + spec.name;
        int id = g.FindNode(pname);
        FRUGAL_REQUIRE(id < 0, n.Where(), ": parameter name '", pname, "' is already taken by another node");
        auto init = nc.init().find(spec.name);
        n.inputs.push_back({g.AddVariable(pname, spec.made_as, init == nc.init().end() ? spec.init : init->second), 0});
        Node& var = g.mutable_node(n.inputs.back().node);
        var.lr_mult = nc.lr_mult().count(spec.name) ? nc.lr_mult().at(spec.name) : 1.f;
        var.wd_mult = nc.wd_mult().count(spec.name) ? nc.wd_mult().at(spec.name) : 1.f;
      } else {
        throw Error(Fmt(n.Where(), ": input '", spec.name, "' (number ", i + 1, ") is missing"));
      }
    }
    CheckParamKeys(nc, g, n);
    g.AddNode(std::move(n));
  }

  if (cfg.net.output_size() > 0) {
    config::Node outputs;  // the output names, wildcards expanded like inputs
    for (const std::string& o : cfg.net.output()) {
      auto alias = flat.alias.find(o);
      outputs.add_input(alias == flat.alias.end() ? o : alias->second);
    }
    for (const std::string& o : ExpandWildcards(g, outputs, cfg.path + ": output"))
      g.outputs.push_back(ResolveInput(g, data, o, cfg.path + ": output"));
  } else {
    std::set<std::pair<int, int>> read;
    for (const Node& n : g.nodes())
      for (const Entry& e : n.inputs) read.insert({e.node, e.index});
    for (int i = 0; i < g.num_nodes(); ++i) {
      const Node& n = g.node(i);
      if (n.is_variable()) continue;
      for (int k = 0; k < n.op->NumVisibleOutputs(n.params); ++k)
        if (!read.count({i, k})) g.outputs.push_back({i, k});
    }
  }
  DType compute;
  try {
    compute = ParseComputeDType(cfg.net.dtype());
  } catch (const Error& e) { throw Error(Fmt(cfg.path, ": dtype: ", e.what())); }
  return ToMixedPrecision(cfg.net.fuse() ? FuseBnRelu(g) : g, compute);
}

}  // namespace frugal
