// Importing ONNX models (onnx.proto as Debian's libonnx-dev ships it) into a
// frugal forward graph, running the ONNX backend conformance tests, writing
// an imported graph as a frugal config plus its weights (a checkpoint), and
// exporting a trained frugal graph as an ONNX model.
//
// The mapping from ONNX ops to frugal ops is a table in src/onnx/op_table.cc:
// one line per ONNX op. A line may name a frugal op that is not registered
// yet; a node that needs such an op is reported as unsupported (with the
// reason), never imported wrongly. So are ONNX attributes or configurations
// that frugal's ops cannot express (asymmetric pads, ceil-mode pooling, ...)
// and element types other than float32.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frugal/graph.h"
#include "frugal/tensor.h"

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace frugal {

struct ConfigFile;

// A decoded ONNX TensorProto: float32 values, or integer values (int8 to
// int64, uint8 to uint32, bool) widened to int64. Other element types keep
// only their name and dims.
struct OnnxTensor {
  enum class Kind : uint8_t { kFloat, kInt, kOther };
  Kind kind = Kind::kOther;
  std::string type_name;  // "FLOAT", "INT64", "DOUBLE", ...
  std::vector<int64_t> dims;
  std::vector<float> f;    // kFloat
  std::vector<int64_t> i;  // kInt
  int64_t NumElements() const;
  Shape shape() const { return Shape(dims); }
};
// Throws Error naming `where` for malformed data (wrong byte count,
// external data).
OnnxTensor DecodeOnnxTensor(const onnx::TensorProto& t, const std::string& where);
// Reads a serialized TensorProto (a test's input_0.pb). Throws Error.
OnnxTensor ReadOnnxTensorFile(const std::string& path);
// A float32 tensor with the same values (kind must be kFloat).
Tensor ToTensor(const OnnxTensor& t, MemKind kind = MemKind::kOther);

struct OnnxImportOptions {
  // Shapes of graph inputs by ONNX name, overriding the model's (needed
  // where the model's dims are symbolic).
  std::map<std::string, Shape> input_shapes;
  // The value of a graph input's symbolic first dim (a dim_param, as
  // export's "batch"), where input_shapes gives none; 0: such an input's
  // shape is unknown.
  int64_t batch = 0;
  // Import the compositions of src/onnx/fuse.cc (frugal's exported gelu and
  // attention) as the one frugal op each spells out; false: op by op, as
  // another runtime reads them.
  bool fuse = true;
  // Values of graph inputs that ops read as constants (Reshape's shape,
  // Clip's bounds, Slice's starts, ...), by ONNX name. frugal's graph is
  // static: such values must be known at import. An input given here is
  // still a data input where an op reads it as a tensor.
  std::map<std::string, OnnxTensor> known_values;
  // Which frugal ops count as available; default (empty): those registered.
  // Nodes needing others are unsupported: a way to ask what a model needs
  // beyond a set of ops, and for tests.
  std::function<bool(const std::string& frugal_op)> op_available;
  // NaN and Inf in initializers are an Error naming the first unless this
  // is set (`import-onnx --allow-nonfinite`).
  bool allow_nonfinite = false;
};

// One ONNX node that could not be imported, and why.
struct OnnxUnsupported {
  std::string node;     // the ONNX node's name, or its first output
  std::string op_type;  // "Conv"
  std::string reason;   // "frugal has no op 'convolution' yet"
};

struct OnnxImport {
  // The forward graph. ONNX initializers are parameters (VarKind::kParam, or
  // the kind the reading op declares for that input, e.g. kAux for moving
  // statistics), tensors of Constant nodes are aux state (never learned),
  // graph inputs that are not initializers are data inputs (kInput). A
  // variable exists only where an op reads the value as a tensor.
  // graph.outputs are the ONNX graph outputs, in order.
  Graph graph;
  // Values of every parameter and aux variable, by frugal node name.
  std::map<std::string, Tensor> values;
  struct Input {
    std::string onnx_name;
    int node = -1;  // the kInput variable
    Shape shape;    // unknown where the model's dims are symbolic (but a first one given OnnxImportOptions::batch)
  };
  std::vector<Input> inputs;              // in ONNX order; only those the graph reads
  std::vector<std::string> output_names;  // ONNX names, one per graph.outputs
  // Non-empty: the graph is incomplete and must not be run.
  std::vector<OnnxUnsupported> unsupported;
  int64_t opset = 0;  // of the default ONNX domain
  // The model is frugal's export (producer "frugal"): its initializers are
  // named as the trained config's parameters, names ExportFrugalConfig keeps.
  bool from_frugal = false;
};

// Imports a model. Throws Error for a malformed model or a mapping that a
// frugal op rejects (a bug in the table or the op, named with the node).
OnnxImport ImportOnnx(const onnx::ModelProto& model, const OnnxImportOptions& opts = {});
// Reads and imports a .onnx file. Throws Error naming the file.
OnnxImport ImportOnnxFile(const std::string& path, const OnnxImportOptions& opts = {});
onnx::ModelProto ReadOnnxModel(const std::string& path);

// "Conv: frugal has no op 'convolution' yet; Flatten: ..." (at most `max`).
std::string DescribeUnsupported(const std::vector<OnnxUnsupported>& u, size_t max = 3);

// ---------------------------------------------------------------- tests

// The ONNX backend test layout: DIR/model.onnx and DIR/test_data_set_N/
// {input,output}_K.pb (serialized TensorProtos; inputs in the order of the
// graph inputs that are not initializers, outputs in graph output order).
enum class OnnxTestStatus : uint8_t { kPassed, kFailed, kUnsupported };
struct OnnxTestResult {
  std::string dir;
  OnnxTestStatus status = OnnxTestStatus::kFailed;
  std::string reason;                        // why it failed or is unsupported
  std::vector<OnnxUnsupported> unsupported;  // the nodes, when the import found some
};
// Imports the model with each data set's inputs (values known, see
// OnnxImportOptions::known_values, so an op on them may be folded at import;
// with fold_inputs false only their shapes: every input is fed at run time
// and read by the kernels, and a test whose op needs an input's value at
// import is unsupported), infers shapes, plans memory (share),
// runs inference (is_train=false) and compares every output with ONNX's
// tolerances: |y - expected| <= 1e-7 + 1e-3 |expected| (NaN matches NaN).
// Never throws for a problem of the test: that is a kFailed result.
OnnxTestResult RunOnnxBackendTest(const std::string& dir, bool fold_inputs = true);
// Each DIR is a test (it holds model.onnx) or a folder of tests (its
// subdirectories, sorted). Throws Error for a DIR that is neither.
std::vector<std::string> FindOnnxTests(const std::vector<std::string>& dirs);

// ---------------------------------------------------------------- export

// An imported graph written as a frugal config (protobuf text, version 1)
// and the values of its weights under the names the config gives them, as
// the kinds BuildGraph makes them: learned parameters, and aux state
// (moving statistics, constants). `frugal import-onnx` saves them as a
// checkpoint (frugal/checkpoint.h).
struct FrugalExport {
  std::string config_text;
  std::map<std::string, Tensor> params, aux;
};
// Parameters become the ops' omitted trailing parameter inputs
// ("<node>_<input>"); the one data input becomes data.data_name. Throws
// Error for what the config format cannot express (a parameter read where
// the op does not take one, shared parameters, several data inputs).
FrugalExport ExportFrugalConfig(const OnnxImport& imp, const std::string& model_name);

// ---------------------------------------------------------------- ONNX export

// A forward graph (shapes inferred) as an ONNX model (opset 17) for
// inference, the inverse of the import table (src/onnx/exporter.cc): dropout
// and identities removed, batch_norm as BatchNormalization over its moving
// statistics, loss heads as what they output (softmax_cross_entropy:
// Softmax). Data inputs that an exported node reads are the graph inputs,
// parameters and aux state initializers with their `values` (by node name),
// graph.outputs the outputs, each named after its node. Throws Error naming
// the node for an op without a mapping (listing OnnxExportOps) or a
// configuration ONNX cannot express exactly, and for a missing value.
onnx::ModelProto ExportOnnx(const Graph& g, const std::map<std::string, Tensor>& values, const std::string& name);
// The config's inference graph (float32 whatever the config's dtype) with
// the parameters and aux state of a checkpoint of it, built at
// data.batch_size: the batch axis is dynamic (dim_param "batch") where the
// graph builds the same at another batch size, else fixed, as the metadata
// "frugal.batch_axis" says; the data pipeline's preprocessing in the
// metadata "frugal.data.*". `notes` (optional) gets what the model leaves
// out: why the batch is fixed, a vocabulary the export could not read.
// Throws Error naming the checkpoint (missing, damaged, names or shapes not
// the config's) or the node.
onnx::ModelProto ExportOnnx(const ConfigFile& cfg, const std::string& checkpoint,
                            std::vector<std::string>* notes = nullptr);
// The frugal ops ExportOnnx maps, sorted.
std::vector<std::string> OnnxExportOps();
// Throws Error naming path if it cannot be written.
void WriteOnnxModel(const onnx::ModelProto& m, const std::string& path);

}  // namespace frugal
