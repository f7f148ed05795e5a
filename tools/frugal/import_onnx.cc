// frugal import-onnx MODEL.onnx --out PREFIX: writes PREFIX.prototxt (a
// frugal config) and PREFIX.frugal (a checkpoint holding the weights, for
// `frugal test --checkpoint` and `frugal train --weights`), after checking
// that the config builds back into the imported graph. A symbolic batch
// axis (frugal's export writes dim_param "batch") is imported at --batch
// (default 1), which the config's data.batch_size says.
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/import.h"

DECLARE_int32(batch);  // main.cc

DEFINE_string(out, "",
              "import-onnx, import-mxnet: output prefix; writes PREFIX.prototxt and the weights beside it. "
              "export-onnx: the .onnx file. predict: the .npy of the outputs");
DEFINE_bool(allow_nonfinite, false,
            "import-onnx, import-mxnet: import weights holding NaN or Inf (by default an error naming the first)");

namespace frugal::cli {

int ImportOnnx() {
  FRUGAL_REQUIRE(g_args.size() == 1, "import-onnx takes one model: frugal import-onnx MODEL.onnx --out PREFIX");
  FRUGAL_REQUIRE(!FLAGS_out.empty(), "import-onnx needs --out PREFIX (writes PREFIX.prototxt and PREFIX.frugal)");
  OnnxImportOptions opts;
  opts.batch = FLAGS_batch > 0 ? FLAGS_batch : 1;
  opts.allow_nonfinite = FLAGS_allow_nonfinite;
  std::printf("%s\n", ImportOnnxModel(g_args[0], FLAGS_out, opts).summary.c_str());
  return 0;
}

}  // namespace frugal::cli
