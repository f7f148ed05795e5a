// frugal export-onnx --checkpoint CK --out MODEL.onnx [--config C]: the
// inference graph of the checkpoint's config (or --config) with its
// parameters and aux state as an ONNX model (opset 17, include/frugal/onnx.h's
// ExportOnnx); a note line for what the model leaves out (a fixed batch
// size, the vocabulary of a text corpus it could not read).
#include <gflags/gflags.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "frugal/checkpoint.h"
#include "frugal/onnx.h"
#include "onnx.pb.h"

DECLARE_string(checkpoint);  // test.cc
DECLARE_string(out);         // import_onnx.cc

namespace frugal::cli {

int ExportOnnx() {
  FRUGAL_REQUIRE(!FLAGS_checkpoint.empty(), "export-onnx needs --checkpoint FILE (a checkpoint of this config)");
  FRUGAL_REQUIRE(!FLAGS_out.empty(), "export-onnx needs --out FILE (the .onnx model to write)");
  const std::string checkpoint = ResolveCheckpoint(FLAGS_checkpoint);
  const ConfigFile cfg = LoadConfigFor(checkpoint);
  std::vector<std::string> notes;
  const onnx::ModelProto m = frugal::ExportOnnx(cfg, checkpoint, &notes);
  WriteOnnxModel(m, FLAGS_out);
  const onnx::GraphProto& g = m.graph();
  std::printf("%s + %s -> %s: opset %lld, %d nodes, %d initializers, %d input(s), %d output(s)\n", cfg.path.c_str(),
              checkpoint.c_str(), FLAGS_out.c_str(), static_cast<long long>(m.opset_import(0).version()), g.node_size(),
              g.initializer_size(), g.input_size(), g.output_size());
  for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
  return 0;
}

}  // namespace frugal::cli
