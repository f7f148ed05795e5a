// frugal import-mxnet PREFIX-symbol.json PREFIX-0000.params --out PREFIX:
// writes PREFIX.prototxt (a frugal config) and PREFIX.frugal (a checkpoint
// holding the weights, for `frugal test --checkpoint` and `frugal train
// --weights`), after checking that the config builds.
#include <gflags/gflags.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli.h"
#include "frugal/checkpoint.h"
#include "frugal/mxnet.h"

DECLARE_string(out);            // import_onnx.cc's
DECLARE_bool(allow_nonfinite);  // import_onnx.cc's
DEFINE_string(data_shape, "",
              "import-mxnet: the data input's shape with the batch first, e.g. 64,1,28,28 (the config's batch_size "
              "and sample_shape)");

namespace frugal::cli {
namespace {

std::vector<int64_t> DataShapeFromFlag() {
  std::vector<int64_t> dims;
  std::string s = FLAGS_data_shape;
  for (char& c : s)
    if (c == ',' || c == '(' || c == ')') c = ' ';
  std::istringstream in(s);
  for (long long d; in >> d;) {
    FRUGAL_REQUIRE(d > 0, "--data-shape ", FLAGS_data_shape, ": every dim must be positive");
    dims.push_back(d);
  }
  FRUGAL_REQUIRE(in.eof() && (dims.empty() || dims.size() >= 2), "--data-shape ", FLAGS_data_shape,
                 ": expected the batch and a sample's dims, such as 64,1,28,28");
  return dims;
}

// "model" from "dir/model-symbol.json".
std::string ModelName(const std::string& symbol_path) {
  std::string stem = std::filesystem::path(symbol_path).stem().string();
  const std::string suffix = "-symbol";
  if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem;
}

}  // namespace

ImportedFiles WriteImported(const std::string& prefix, const std::string& config_text,
                            const std::map<std::string, Tensor>& params, const std::map<std::string, Tensor>& aux) {
  const ImportedFiles out{prefix + ".prototxt", prefix + ".frugal"};
  WriteFileAtomic(out.config, config_text);
  CheckpointState state;
  state.config_text = config_text;
  state.params = params;
  state.aux = aux;
  SaveCheckpoint(out.checkpoint, state);
  return out;
}

int ImportMxnet() {
  FRUGAL_REQUIRE(g_args.size() == 2, "import-mxnet takes the symbol and the params file: frugal import-mxnet ",
                 "PREFIX-symbol.json PREFIX-0000.params --out PREFIX");
  FRUGAL_REQUIRE(!FLAGS_out.empty(), "import-mxnet needs --out PREFIX (writes PREFIX.prototxt and PREFIX.frugal)");
  const std::string &symbol_path = g_args[0], &params_path = g_args[1];
  MxnetImportOptions opts;
  opts.data_shape = DataShapeFromFlag();
  opts.allow_nonfinite = FLAGS_allow_nonfinite;
  opts.params_path = params_path;
  const MxnetSymbol sym = ReadMxnetSymbol(symbol_path);
  const NamedTensors arrays = ReadMxnetParams(params_path);
  const MxnetImport imp = ImportMxnet(sym, arrays, ModelName(symbol_path), opts);
  // The config builds (ImportMxnet checked every value it holds, so an Error
  // here is a bug of the import), named as what it is: nothing is written yet.
  Graph g;
  try {
    g = BuildGraph(ParseConfig(imp.config_text, "the config made from it", {}));
  } catch (const Error& e) {
    throw Error(Fmt(symbol_path, ": ", e.what(), " (a bug of import-mxnet; please report it with the model)"));
  }

  const ImportedFiles out = WriteImported(FLAGS_out, imp.config_text, imp.params, imp.aux);
  int ops = 0;
  for (const Node& n : g.nodes()) ops += !n.is_variable();
  std::printf("%s: %zu nodes -> %s (%d op nodes); %s: %zu arrays -> %s (%zu params, %zu aux)%s\n", symbol_path.c_str(),
              sym.nodes.size(), out.config.c_str(), ops, params_path.c_str(), arrays.size(), out.checkpoint.c_str(),
              imp.params.size(), imp.aux.size(),
              imp.unused.empty() ? "" : Fmt("; unused: ", imp.unused.size(), " (", imp.unused[0], ", ...)").c_str());
  return 0;
}

}  // namespace frugal::cli
