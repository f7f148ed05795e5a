// Writing an imported graph as a frugal config (protobuf text, version 1).
//
// A config names data inputs and op nodes. A parameter read by exactly one
// node, in one of its op's trailing weight slots, is left out, and the export
// renames it to the name BuildGraph will give it ("<node>_<input>"); any
// other parameter (PyTorch's Add(bias, x), a shared weight) is a `variable`
// node of its shape, written before its first reader.
#include <cctype>
#include <map>
#include <set>

#include "frugal/config.h"
#include "frugal/onnx.h"
#include "frugal/op.h"

namespace frugal {
namespace {

bool IsParam(const Node& n) { return n.var == VarKind::kParam || n.var == VarKind::kAux; }

// `name` as a config node name: ':' separates an output index there, so it
// and other punctuation become '_' (PyTorch names weights "onnx::MatMul_12");
// '-' stays, as in the names a block repeat gives ("steps/-1/layers/0/c").
std::string ConfigName(const std::string& name, const std::set<std::string>& taken) {
  std::string out;
  for (char c : name) {
    const bool kept = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-';
    out += kept ? c : '_';
  }
  if (out == name) return out;
  std::string unique = out;
  for (int k = 2; taken.count(unique); ++k) unique = Fmt(out, "_", k);
  return unique;
}

}  // namespace

FrugalExport ExportFrugalConfig(const OnnxImport& imp, const std::string& model_name) {
  FRUGAL_REQUIRE(imp.unsupported.empty(),
                 "the model has nodes frugal cannot import: ", DescribeUnsupported(imp.unsupported));
  const Graph& g = imp.graph;
  std::vector<int> readers(g.num_nodes(), 0);
  for (const Node& n : g.nodes())
    for (const Entry& e : n.inputs) ++readers[e.node];
  for (const Entry& e : g.outputs) ++readers[e.node];
  std::vector<int> data;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).var == VarKind::kInput) data.push_back(i);
  FRUGAL_REQUIRE(data.size() == 1, "the model has ", data.size(),
                 " data inputs; a frugal config has exactly one (data.data_name)");

  FrugalExport out;
  std::set<std::string> names;
  for (const Node& n : g.nodes()) names.insert(n.name);
  // Variable nodes written so far, by graph node, with their config names.
  std::map<int, std::string> variables;
  auto name_of = [&](int i) { return variables.count(i) ? variables.at(i) : g.node(i).name; };
  auto ref = [&](Entry e) { return e.index == 0 ? name_of(e.node) : Fmt(name_of(e.node), ":", e.index); };
  std::string nodes;
  for (const Node& n : g.nodes()) {
    if (n.is_variable()) continue;
    const auto& specs = n.op->inputs();
    // Inputs from `keep` on are parameters the config leaves out.
    size_t keep = n.inputs.size();
    while (keep > 0) {
      const Node& v = g.node(n.inputs[keep - 1].node);
      const InputSpec& spec = specs[std::min(keep - 1, specs.size() - 1)];
      if (!IsParam(v) || spec.made_as == VarKind::kNone || readers[n.inputs[keep - 1].node] != 1) break;
      // A frugal-exported parameter keeps its name (a variable node) where
      // BuildGraph would name it otherwise: the trained config reads it.
      if (imp.from_frugal && v.name != n.name + "_" + spec.name) break;
      --keep;
    }
    for (size_t k = 0; k < keep; ++k) {
      const int i = n.inputs[k].node;
      const Node& v = g.node(i);
      if (!IsParam(v) || variables.count(i)) continue;
      const std::string name = ConfigName(v.name, names);
      names.insert(name);
      variables[i] = name;
      const Tensor& value = imp.values.at(v.name);
      std::string dims;
      for (int64_t d : value.shape().dims()) dims += Fmt(dims.empty() ? "" : ",", d);
      nodes += "node { name: " + QuoteConfigString(name) + " op: \"variable\" attr { key: \"shape\" value: \"(" + dims +
               ")\" }";
      if (v.var == VarKind::kAux) nodes += " attr { key: \"kind\" value: \"aux\" }";
      nodes += " }\n";
      (v.var == VarKind::kAux ? out.aux : out.params)[name] = value;
    }
    nodes += "node { name: " + QuoteConfigString(n.name) + " op: " + QuoteConfigString(n.op->name());
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Node& v = g.node(n.inputs[k].node);
      const InputSpec& spec = specs[std::min(k, specs.size() - 1)];
      if (k < keep) {
        nodes += " input: " + QuoteConfigString(ref(n.inputs[k]));
        continue;
      }
      const std::string pname = n.name + "_" + spec.name;
      auto& values = spec.made_as == VarKind::kAux ? out.aux : out.params;  // the kind BuildGraph makes
      FRUGAL_REQUIRE((!names.count(pname) || pname == v.name) && !out.params.count(pname) && !out.aux.count(pname),
                     "parameter name '", pname, "' of node '", n.name, "' is taken by another node");
      values[pname] = imp.values.at(v.name);
    }
    for (const auto& [key, value] : n.attrs)
      nodes += " attr { key: " + QuoteConfigString(key) + " value: " + QuoteConfigString(value) + " }";
    nodes += " }\n";
  }

  const Node& in = g.node(data[0]);
  const Shape& shape = imp.inputs.empty() ? Shape() : imp.inputs[0].shape;
  std::string text = Fmt("# Imported from ONNX (opset ", imp.opset, ") by `frugal import-onnx`; the weights are in\n",
                         "# the checkpoint (.frugal) beside this one, under the parameter names BuildGraph gives\n",
                         "# (<node>_<input>) and the variable nodes' names (a model frugal exported: its own names).\n",
                         "version: 1\nname: ", QuoteConfigString(model_name), "\n", nodes);
  for (const Entry& e : g.outputs) text += "output: " + QuoteConfigString(ref(e)) + "\n";
  text +=
      "# The data section is yours: add train { idx { images: ... labels: ... } } (and val),\n"
      "# and a loss head (e.g. softmax_cross_entropy) on the output to train.\n"
      "data {\n  data_name: " +
      QuoteConfigString(in.name) + "\n";
  if (shape.known() && shape.ndim() >= 1) {
    FRUGAL_REQUIRE(shape[0] <= INT32_MAX, "graph input '", imp.inputs[0].onnx_name, "' ", shape,
                   ": dim 0 (the batch) is ", shape[0], ", more than a config's data.batch_size holds (", INT32_MAX,
                   "); give --batch");
    text += Fmt("  batch_size: ", shape[0], "\n  sample_shape: [");
    for (int d = 1; d < shape.ndim(); ++d) text += Fmt(d > 1 ? ", " : "", shape[d]);
    text += "]\n";
  }
  text += "}\n";
  out.config_text = text;
  return out;
}

}  // namespace frugal
