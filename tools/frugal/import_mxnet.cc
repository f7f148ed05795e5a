// frugal import-mxnet PREFIX-symbol.json PREFIX-0000.params --out PREFIX:
// writes PREFIX.prototxt (a frugal config) and PREFIX.frugal (a checkpoint
// holding the weights, for `frugal test --checkpoint` and `frugal train
// --weights`), after checking that the config builds.
#include <gflags/gflags.h>

#include <cstdio>
#include <sstream>

#include "cli.h"
#include "frugal/import.h"

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

}  // namespace

int ImportMxnet() {
  FRUGAL_REQUIRE(g_args.size() == 2, "import-mxnet takes the symbol and the params file: frugal import-mxnet ",
                 "PREFIX-symbol.json PREFIX-0000.params --out PREFIX");
  FRUGAL_REQUIRE(!FLAGS_out.empty(), "import-mxnet needs --out PREFIX (writes PREFIX.prototxt and PREFIX.frugal)");
  const std::string &symbol_path = g_args[0], &params_path = g_args[1];
  MxnetImportOptions opts;
  opts.data_shape = DataShapeFromFlag();
  opts.allow_nonfinite = FLAGS_allow_nonfinite;
  std::printf("%s\n", ImportMxnetModel(symbol_path, params_path, FLAGS_out, opts).summary.c_str());
  return 0;
}

}  // namespace frugal::cli
