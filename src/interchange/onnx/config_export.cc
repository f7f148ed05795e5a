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
#include "interchange/config_text.h"

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

// The export of one graph: the nodes' text, the weights under their
// config names.
class ConfigExport {
 public:
  explicit ConfigExport(const OnnxImport& imp) : imp_(imp), g_(imp.graph), readers_(g_.num_nodes(), 0) {
    for (const Node& n : g_.nodes())
      for (const Entry& e : n.inputs) ++readers_[e.node];
    for (const Entry& e : g_.outputs) ++readers_[e.node];
    for (const Node& n : g_.nodes()) names_.insert(n.name);
  }

  FrugalExport Run(const std::string& model_name) {
    std::vector<int> data;
    for (int i = 0; i < g_.num_nodes(); ++i)
      if (g_.node(i).var == VarKind::kInput) data.push_back(i);
    FRUGAL_REQUIRE(data.size() == 1, "the model has ", data.size(),
                   " data inputs; a frugal config has exactly one (data.data_name)");
    std::string nodes;
    for (const Node& n : g_.nodes())
      if (!n.is_variable()) nodes += NodeText(n);
    out_.config_text =
        Fmt("# Imported from ONNX (opset ", imp_.opset, ") by `frugal import-onnx`; the weights are in\n",
            "# the checkpoint (.frugal) beside this one, under the parameter names BuildGraph gives\n",
            "# (<node>_<input>) and the variable nodes' names (a model frugal exported: its own names).\n",
            "version: 1\nname: ", QuoteConfigString(model_name), "\n", nodes);
    for (const Entry& e : g_.outputs) out_.config_text += interchange::OutputText(Ref(e));
    out_.config_text += DataSection(g_.node(data[0]).name);
    return std::move(out_);
  }

 private:
  // Inputs of n from this one on are parameters the config leaves out.
  size_t KeptInputs(const Node& n) const {
    const auto& specs = n.op->inputs();
    size_t keep = n.inputs.size();
    while (keep > 0) {
      const Node& v = g_.node(n.inputs[keep - 1].node);
      const InputSpec& spec = specs[std::min(keep - 1, specs.size() - 1)];
      if (!IsParam(v) || spec.made_as == VarKind::kNone || readers_[n.inputs[keep - 1].node] != 1) break;
      // A frugal-exported parameter keeps its name (a variable node) where
      // BuildGraph would name it otherwise: the trained config reads it.
      if (imp_.from_frugal && v.name != n.name + "_" + spec.name) break;
      --keep;
    }
    return keep;
  }

  // The variable nodes n's kept inputs need that are not written yet, then n.
  std::string NodeText(const Node& n) {
    const size_t keep = KeptInputs(n);
    std::string text;
    std::vector<std::string> inputs;
    for (size_t k = 0; k < keep; ++k) {
      const int i = n.inputs[k].node;
      const Node& v = g_.node(i);
      if (IsParam(v) && !variables_.count(i)) {
        const std::string name = ConfigName(v.name, names_);
        names_.insert(name);
        variables_[i] = name;
        const Tensor& value = imp_.values.at(v.name);
        text += interchange::VariableText(name, value.shape().dims(), v.var == VarKind::kAux);
        (v.var == VarKind::kAux ? out_.aux : out_.params)[name] = value;
      }
      inputs.push_back(Ref(n.inputs[k]));
    }
    const auto& specs = n.op->inputs();
    for (size_t k = keep; k < n.inputs.size(); ++k) {
      const Node& v = g_.node(n.inputs[k].node);
      const InputSpec& spec = specs[std::min(k, specs.size() - 1)];
      const std::string pname = n.name + "_" + spec.name;
      auto& values = spec.made_as == VarKind::kAux ? out_.aux : out_.params;  // the kind BuildGraph makes
      FRUGAL_REQUIRE((!names_.count(pname) || pname == v.name) && !out_.params.count(pname) && !out_.aux.count(pname),
                     "parameter name '", pname, "' of node '", n.name, "' is taken by another node");
      values[pname] = imp_.values.at(v.name);
    }
    return text + interchange::OpNodeText(n.name, n.op->name(), inputs, {n.attrs.begin(), n.attrs.end()});
  }

  std::string DataSection(const std::string& data_name) const {
    interchange::DataText d;
    d.note =
        "# The data section is yours: add train { idx { images: ... labels: ... } } (and val),\n"
        "# and a loss head (e.g. softmax_cross_entropy) on the output to train.\n";
    d.data_name = data_name;
    const Shape& shape = imp_.inputs.empty() ? Shape() : imp_.inputs[0].shape;
    if (shape.known() && shape.ndim() >= 1) {
      FRUGAL_REQUIRE(shape[0] <= INT32_MAX, "graph input '", imp_.inputs[0].onnx_name, "' ", shape,
                     ": dim 0 (the batch) is ", shape[0], ", more than a config's data.batch_size holds (", INT32_MAX,
                     "); give --batch");
      d.shape = shape.dims();
    }
    return interchange::DataSectionText(d);
  }

  std::string NameOf(int i) const { return variables_.count(i) ? variables_.at(i) : g_.node(i).name; }
  std::string Ref(Entry e) const { return e.index == 0 ? NameOf(e.node) : Fmt(NameOf(e.node), ":", e.index); }

  const OnnxImport& imp_;
  const Graph& g_;
  std::vector<int> readers_;
  std::set<std::string> names_;
  std::map<int, std::string> variables_;  // variable nodes written so far, with their config names
  FrugalExport out_;
};

}  // namespace

FrugalExport ExportFrugalConfig(const OnnxImport& imp, const std::string& model_name) {
  FRUGAL_REQUIRE(imp.unsupported.empty(),
                 "the model has nodes frugal cannot import: ", DescribeUnsupported(imp.unsupported));
  return ConfigExport(imp).Run(model_name);
}

}  // namespace frugal
