// Importing MXNet 1.x models: a symbol file (PREFIX-symbol.json) and a
// params file (PREFIX-0000.params) to a frugal config and its weights.
//
// The params file is MXNet's NDArray list (NDArray::Save in MXNet's
// src/ndarray/ndarray.cc), every field little-endian:
//   uint64 magic 0x112, uint64 reserved (0), uint64 count, then count arrays:
//     V2/V3: uint32 magic 0xF993FAC9 (V3: 0xF993FACA), int32 storage type
//            (0: dense; sparse arrays are refused), shape = int32 ndim and
//            ndim int64 dims, and unless the shape is empty (V2: ndim 0; V3:
//            ndim -1) int32 dev_type, int32 dev_id, int32 type flag (0
//            float32, 1 float64, 2 float16, 3 uint8, 4 int32, 5 int8, 6
//            int64, ...), then the elements;
//     V1: uint32 magic 0xF993FAC8, then as V2 from the shape on, without a
//            storage type;
//     legacy (no magic): uint32 ndim, ndim uint32 dims, context, type flag,
//            elements;
//   then uint64 count of names (0 or the array count), each uint64 length
//   and its bytes: "arg:fc1_weight" (learned), "aux:bn_moving_mean" (state).
//
// The symbol file is NNVM's graph JSON: {"nodes": [{"op": "null" or an
// operator, "name", "attrs" (older files: "attr" or "param"), "inputs":
// [[node, output, version], ...]}, ...], "arg_nodes", "heads": [[node,
// output, version], ...], "attrs": {"mxnet_version": ["int", 10500]}}, the
// attribute values strings such as "(3, 3)", "True", "64".
//
// Every malformation is an Error of one line naming the file, the array or
// node and the sizes or values, never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frugal/tensor.h"

namespace frugal {

// Named arrays in file order (an MXNet params file holds a list).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// ---------------------------------------------------------------- params

// The arrays of an MXNet params file with their names ("arg:..."/"aux:..."),
// in file order, as float32 (float64, float16 and the integer types
// converted). Throws Error naming path.
NamedTensors DecodeMxnetParams(const std::string& bytes, const std::string& path);
NamedTensors ReadMxnetParams(const std::string& path);

// The file MXNet 1.x writes for these float32 arrays (V2 arrays on the CPU).
// frugal never writes MXNet files for use: this is for tests, which build
// MXNet models without MXNet. Throws Error for a non-float32 tensor.
std::string EncodeMxnetParams(const NamedTensors& arrays);
void WriteMxnetParams(const std::string& path, const NamedTensors& arrays);

// ---------------------------------------------------------------- symbol

struct MxnetNode {
  std::string op;  // "null" for a variable (data, label, weight, state)
  std::string name;
  std::map<std::string, std::string> attrs;  // "attrs", "attr" or "param", merged
  struct Input {
    int node = 0, index = 0;
  };
  std::vector<Input> inputs;
  int line = 0;  // in the JSON file, for messages
};

struct MxnetSymbol {
  std::string path;
  std::vector<MxnetNode> nodes;  // every input names an earlier node
  std::vector<MxnetNode::Input> heads;
  int64_t mxnet_version = 0;  // 0 when the file does not say
};

MxnetSymbol ParseMxnetSymbol(const std::string& text, const std::string& path);
MxnetSymbol ReadMxnetSymbol(const std::string& path);

// ---------------------------------------------------------------- import

struct MxnetImportOptions {
  // The data input's shape with the batch first (MXNet's data_shapes), for
  // the config's batch_size and sample_shape; empty: the data node's
  // __shape__ attribute if it has one, else the data section says none.
  std::vector<int64_t> data_shape;
  // NaN and Inf in the arrays imported are an Error unless this is set.
  bool allow_nonfinite = false;
  std::string params_path;  // the file the arrays came from, for messages
};

struct MxnetImport {
  std::string config_text;  // a frugal config (protobuf text, version 1)
  // The weights under the names the config gives them (BuildGraph's
  // "<node>_<input>", or a variable node's name): learned and state.
  std::map<std::string, Tensor> params, aux;
  std::vector<std::string> unused;  // arrays of the params file no node reads
};

// Writes sym as a frugal config. Variables whose name has an array in
// `arrays` ("arg:NAME" or "aux:NAME") are weights; the others are data
// inputs: "data" (the one whose name does not end in "label") and the label
// (its name ends in "label"). An input beyond these two needs a __shape__
// attribute and becomes a zero state (the initial states MXNet's LSTM
// examples feed as zeros). Throws Error naming the file and the node: for
// operators frugal does not import (all of them, in one line), attributes it
// cannot express, a weight missing from the arrays, a missing input.
MxnetImport ImportMxnet(const MxnetSymbol& sym, const NamedTensors& arrays, const std::string& model_name,
                        const MxnetImportOptions& opts = {});

}  // namespace frugal
