// frugal import-onnx MODEL.onnx --out PREFIX: writes PREFIX.prototxt (a
// frugal config) and PREFIX.frugal (a checkpoint holding the weights, for
// `frugal test --checkpoint` and `frugal train --weights`), after checking
// that the config builds back into the imported graph. A symbolic batch
// axis (frugal's export writes dim_param "batch") is imported at --batch
// (default 1), which the config's data.batch_size says.
#include <gflags/gflags.h>

#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "frugal/onnx.h"

DECLARE_int32(batch);  // main.cc

DEFINE_string(out, "",
              "import-onnx, import-mxnet: output prefix; writes PREFIX.prototxt and the weights beside it. "
              "export-onnx: the .onnx file. predict: the .npy of the outputs");
DEFINE_bool(allow_nonfinite, false,
            "import-onnx, import-mxnet: import weights holding NaN or Inf (by default an error naming the first)");

namespace frugal::cli {
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
  const std::string bug = " (a bug of import-onnx; please report it with the model)";
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

}  // namespace

int ImportOnnx() {
  FRUGAL_REQUIRE(g_args.size() == 1, "import-onnx takes one model: frugal import-onnx MODEL.onnx --out PREFIX");
  FRUGAL_REQUIRE(!FLAGS_out.empty(), "import-onnx needs --out PREFIX (writes PREFIX.prototxt and PREFIX.frugal)");
  const std::string& path = g_args[0];
  OnnxImportOptions opts;
  opts.batch = FLAGS_batch > 0 ? FLAGS_batch : 1;
  opts.allow_nonfinite = FLAGS_allow_nonfinite;
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

  const ImportedFiles out = WriteImported(FLAGS_out, ex.config_text, ex.params, ex.aux);
  int64_t values = 0;
  for (const auto* part : {&ex.params, &ex.aux})
    for (const auto& [n, t] : *part) values += t.size();
  int ops = 0;
  for (const Node& n : imp.graph.nodes()) ops += !n.is_variable();
  std::printf("%s: opset %lld, %d nodes -> %s (%d op nodes, input %s), %s (%zu params, %zu aux, %lld values)\n",
              path.c_str(), static_cast<long long>(imp.opset), imp.graph.num_nodes(), out.config.c_str(), ops,
              Fmt(imp.inputs[0].shape).c_str(), out.checkpoint.c_str(), ex.params.size(), ex.aux.size(),
              static_cast<long long>(values));
  return 0;
}

}  // namespace frugal::cli
