// A model of another framework made into frugal's two files: its config as
// PREFIX.prototxt and its weights as a checkpoint, PREFIX.frugal (the one
// format `frugal test --checkpoint`, `train --weights`, `predict` and
// `export-onnx` read), written only once the config builds back into the
// imported graph. `frugal import-onnx`, `frugal import-mxnet` and the
// Python module's import_onnx and import_mxnet.
#pragma once

#include <string>

#include "frugal/mxnet.h"
#include "frugal/onnx.h"

namespace frugal {

struct ImportedModel {
  std::string config, checkpoint;  // the paths written
  std::string summary;             // one line: what was read and what was written
};

// An ONNX model (ImportOnnxFile). Throws Error naming the file for nodes it
// cannot import (the first five), a config that does not rebuild the
// imported graph (a bug), and a file it cannot write.
ImportedModel ImportOnnxModel(const std::string& onnx_path, const std::string& prefix,
                              const OnnxImportOptions& opts = {});
// An MXNet model: its symbol JSON and its .params (ImportMxnet, its name
// the symbol file's without "-symbol"). Throws Error as ImportOnnxModel.
ImportedModel ImportMxnetModel(const std::string& symbol_path, const std::string& params_path,
                               const std::string& prefix, MxnetImportOptions opts = {});

}  // namespace frugal
