// Helpers shared by the ONNX import rules (src/interchange/onnx/rules_*.cc): reading
// attributes and inputs known at import, appending frugal nodes, folding
// integer values, and copying elements from positions known at import.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "interchange/onnx/op_table.h"

namespace frugal::onnx_map {

// ------------------------------------------------------------ reading a node

// An attribute list of n values, or n copies of dflt when absent.
std::vector<int64_t> IntsOr(const NodeView& v, const std::string& name, size_t n, int64_t dflt);
// axis in [-rank, rank) -> [0, rank); false when out of range.
bool NormAxis(int64_t axis, int rank, int64_t* out);
// Input i's value known at import, where it holds the input's declared
// type (a test file may store bfloat16 as UINT16), or nullptr.
const OnnxTensor* KnownTensor(const NodeView& v, int i);
// Input i as known integers, or nullptr.
const OnnxTensor* KnownIntTensor(const NodeView& v, int i);
// The integer values of input i, known at import; nullptr if not known.
const std::vector<int64_t>* KnownInts(const NodeView& v, int i);
// Why a rule needs input i (`what`) known at import.
std::string NotKnown(const NodeView& v, int i, const char* what);
// A float32 initializer's value as a Tensor, transposed if 2-D and asked.
Tensor InitializerTensor(const OnnxTensor& t, bool transpose);
bool IsFloatInitializer(const NodeView& v, int i);
// The range of an ONNX integer element type; false for other types.
bool IntTypeRange(const std::string& type, int64_t* lo, int64_t* hi);

// ------------------------------------------------------------ building nodes

// Appends a node and returns the operand of its output 0.
Operand Add(Lowering* l, const std::string& op, AttrMap attrs, std::vector<Operand> in);

// ---------------------------------------------------- values known at import
//
// A node whose inputs are integers known at import (shapes, axes, indices)
// is folded: its output is computed here and is a value known at import
// too, so that Shape -> Gather -> Concat -> Reshape ends in a static
// reshape. Float values are made here from such values (Range,
// ConstantOfShape, a Cast of integers) and copied or selected (Expand,
// Trilu, Where: an attention mask), never computed with: float arithmetic
// is left to frugal's ops.

// Elements a folded value may hold: shape arithmetic is small, and a bad
// shape must not allocate without bound.
constexpr int64_t kMaxFolded = int64_t{1} << 24;

Lowering Folded(OnnxTensor t);
OnnxTensor IntValue(std::vector<int64_t> dims, std::vector<int64_t> values, const std::string& type = "INT64");
// Row-major strides of dims.
std::vector<int64_t> Strides(const std::vector<int64_t>& dims);
// For each element of a tensor of dims `out`, f(its coordinates): the
// position it copies.
std::vector<int64_t> MapPositions(const std::vector<int64_t>& out,
                                  const std::function<int64_t(const std::vector<int64_t>&)>& f);
// The numpy broadcast of `shapes` into *out; "" or why not.
std::string BroadcastDims(const std::vector<Shape>& shapes, std::vector<int64_t>* out);
// For each element of a tensor of dims `out`, the flat position of the
// element of a tensor of `dims` broadcast to it.
std::vector<int64_t> BroadcastPositions(const std::vector<int64_t>& dims, const std::vector<int64_t>& out);
// The elements of a known value (integers or floats) at `positions`, as a
// value of `dims`: a copy, exact for any values.
OnnxTensor TakeValue(const OnnxTensor& t, const std::vector<int64_t>& positions, std::vector<int64_t> dims);
// a op b on known integers with numpy broadcasting; "" or why not.
std::string BroadcastInts(const OnnxTensor& a, const OnnxTensor& b,
                          const std::function<bool(int64_t, int64_t, int64_t*)>& op, OnnxTensor* out);

// The elements of a float tensor `source` (of n elements) at `positions`
// known at import, as a tensor of `dims`: an embedding of one column whose
// rows are the flattened source and whose indices are the positions (a
// constant made from ONNX input `from_input`), reshaped. Exact for any
// values (a copy). "" or why not.
std::string Take(Lowering* l, Operand source, int64_t n, const std::vector<int64_t>& positions,
                 const std::vector<int64_t>& dims, int from_input);

}  // namespace frugal::onnx_map
