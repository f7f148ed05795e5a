// ImportOnnxModel and ImportMxnetModel (frugal/import.h): an imported
// model's config and checkpoint, written once the config rebuilds it.
#include "frugal/import.h"

#include <filesystem>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/op.h"
#include "frugal/passes/rewrite.h"

namespace frugal {
namespace {

// "'bn1' (batch_norm, 5 inputs)".
std::string Describe(const Node& n) { return Fmt("'", n.name, "' (", n.op->name(), ", ", n.inputs.size(), " inputs)"); }

// The config written for an imported model must build (BuildGraph) into
// the imported graph as BuildGraph would have made it from the same nodes:
// batch_norm -> relu pairs fused unless the config says fuse: false. The
// same op nodes in the same order (name, op, input count) and as many
// variables; otherwise an Error naming the first difference.
void CheckRebuilds(const Graph& back, const ConfigFile& cfg, const Graph& imported) {
  const Graph want = cfg.net.fuse() ? FuseBnRelu(imported) : imported;
  std::vector<const Node*> a, b;
  for (const Node& n : want.nodes())
    if (!n.is_variable()) a.push_back(&n);
  for (const Node& n : back.nodes())
    if (!n.is_variable()) b.push_back(&n);
  const std::string what = Fmt("the config written for it (", cfg.path, ") does not rebuild the imported graph: ");
  const std::string bug = " (a bug of the import; please report it with the model)";
  for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
    const Node &x = *a[k], &y = *b[k];
    FRUGAL_REQUIRE(x.name == y.name && x.op == y.op && x.inputs.size() == y.inputs.size(), what, "op node ", k, " is ",
                   Describe(x), " in the import but ", Describe(y), " in the config's graph", bug);
  }
  FRUGAL_REQUIRE(a.size() == b.size(), what, a.size(), " op nodes in the import, ", b.size(), " in the config's graph",
                 bug);
  FRUGAL_REQUIRE(want.num_nodes() == back.num_nodes(), what, want.num_nodes() - a.size(), " variables in the import, ",
                 back.num_nodes() - b.size(), " in the config's graph", bug);
}

// Writes the config and the checkpoint holding the weights.
ImportedModel WriteImported(const std::string& prefix, const std::string& config_text,
                            const std::map<std::string, Tensor>& params, const std::map<std::string, Tensor>& aux) {
  ImportedModel out{prefix + ".prototxt", prefix + ".frugal", ""};
  WriteFileAtomic(out.config, config_text);
  CheckpointState state;
  state.config_text = config_text;
  state.params = params;
  state.aux = aux;
  SaveCheckpoint(out.checkpoint, state);
  return out;
}

int OpNodes(const Graph& g) {
  int ops = 0;
  for (const Node& n : g.nodes()) ops += !n.is_variable();
  return ops;
}

// "model" from "dir/model-symbol.json".
std::string MxnetModelName(const std::string& symbol_path) {
  std::string stem = std::filesystem::path(symbol_path).stem().string();
  const std::string suffix = "-symbol";
  if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem;
}

}  // namespace

ImportedModel ImportOnnxModel(const std::string& path, const std::string& prefix, const OnnxImportOptions& opts) {
  OnnxImport imp = ImportOnnxFile(path, opts);
  FRUGAL_REQUIRE(imp.unsupported.empty(), path, ": ", imp.unsupported.size(),
                 " node(s) cannot be imported: ", DescribeUnsupported(imp.unsupported, 5));
  const std::string name = std::filesystem::path(path).stem().string();
  FrugalExport ex;
  try {
    ex = ExportFrugalConfig(imp, name);
    // Named as what it is: the config is written only once it builds.
    const ConfigFile back = ParseConfig(ex.config_text, "the config made from it", {});
    CheckRebuilds(BuildGraph(back), back, imp.graph);
  } catch (const Error& e) { throw Error(Fmt(path, ": ", e.what())); }

  ImportedModel out = WriteImported(prefix, ex.config_text, ex.params, ex.aux);
  int64_t values = 0;
  for (const auto* part : {&ex.params, &ex.aux})
    for (const auto& [n, t] : *part) values += t.size();
  out.summary = Fmt(path, ": opset ", imp.opset, ", ", imp.graph.num_nodes(), " nodes -> ", out.config, " (",
                    OpNodes(imp.graph), " op nodes, input ", imp.inputs[0].shape, "), ", out.checkpoint, " (",
                    ex.params.size(), " params, ", ex.aux.size(), " aux, ", values, " values)");
  return out;
}

ImportedModel ImportMxnetModel(const std::string& symbol_path, const std::string& params_path,
                               const std::string& prefix, MxnetImportOptions opts) {
  opts.params_path = params_path;
  const MxnetSymbol sym = ReadMxnetSymbol(symbol_path);
  const NamedTensors arrays = ReadMxnetParams(params_path);
  const MxnetImport imp = ImportMxnet(sym, arrays, MxnetModelName(symbol_path), opts);
  // The config builds (ImportMxnet checked every value it holds, so an Error
  // here is a bug of the import), named as what it is: nothing is written yet.
  Graph g;
  try {
    g = BuildGraph(ParseConfig(imp.config_text, "the config made from it", {}));
  } catch (const Error& e) {
    throw Error(Fmt(symbol_path, ": ", e.what(), " (a bug of import-mxnet; please report it with the model)"));
  }
  ImportedModel out = WriteImported(prefix, imp.config_text, imp.params, imp.aux);
  out.summary =
      Fmt(symbol_path, ": ", sym.nodes.size(), " nodes -> ", out.config, " (", OpNodes(g), " op nodes); ", params_path,
          ": ", arrays.size(), " arrays -> ", out.checkpoint, " (", imp.params.size(), " params, ", imp.aux.size(),
          " aux)", imp.unused.empty() ? "" : Fmt("; unused: ", imp.unused.size(), " (", imp.unused[0], ", ...)"));
  return out;
}

}  // namespace frugal
