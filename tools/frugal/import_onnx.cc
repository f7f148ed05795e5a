// frugal import-onnx MODEL.onnx --out PREFIX: writes PREFIX.prototxt (a
// frugal config) and PREFIX.params (the weights, include/frugal/params_file.h),
// after checking that the config loads back into the same graph.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli.h"
#include "frugal/onnx.h"
#include "frugal/params_file.h"

DEFINE_string(out, "",
              "import-onnx, import-mxnet: output prefix; writes PREFIX.prototxt and the weights beside it. "
              "export-onnx: the .onnx file");

namespace frugal::cli {

int ImportOnnx() {
  FRUGAL_REQUIRE(g_args.size() == 1, "import-onnx takes one model: frugal import-onnx MODEL.onnx --out PREFIX");
  FRUGAL_REQUIRE(!FLAGS_out.empty(), "import-onnx needs --out PREFIX (writes PREFIX.prototxt and PREFIX.params)");
  const std::string& path = g_args[0];
  OnnxImport imp = ImportOnnxFile(path);
  FRUGAL_REQUIRE(imp.unsupported.empty(), path, ": ", imp.unsupported.size(),
                 " node(s) cannot be imported: ", DescribeUnsupported(imp.unsupported, 5));
  const std::string name = std::filesystem::path(path).stem().string();
  FrugalExport ex;
  try {
    ex = ExportFrugalConfig(imp, name);
  } catch (const Error& e) { throw Error(Fmt(path, ": ", e.what())); }
  const std::string config_path = FLAGS_out + ".prototxt", params_path = FLAGS_out + ".params";
  // The config must load back into a graph of the same size.
  Graph back = BuildGraph(ParseConfig(ex.config_text, config_path, {}));
  CHECK_EQ(back.num_nodes(), imp.graph.num_nodes()) << "the exported config does not rebuild the imported graph";

  std::ofstream(config_path) << ex.config_text;
  FRUGAL_REQUIRE(std::ifstream(config_path).good(), config_path, ": cannot write the config");
  SaveParams(params_path, ex.params);
  int64_t values = 0;
  for (const auto& [n, t] : ex.params) values += t.size();
  int ops = 0;
  for (const Node& n : imp.graph.nodes()) ops += !n.is_variable();
  std::printf("%s: opset %lld, %d nodes -> %s (%d op nodes), %s (%zu tensors, %lld values)\n", path.c_str(),
              static_cast<long long>(imp.opset), imp.graph.num_nodes(), config_path.c_str(), ops, params_path.c_str(),
              ex.params.size(), static_cast<long long>(values));
  return 0;
}

}  // namespace frugal::cli
