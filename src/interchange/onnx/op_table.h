// The mapping from ONNX ops to frugal ops.
//
// Each ONNX op type has one rule (src/interchange/onnx/op_table.cc, the table). A rule
// sees one ONNX node through a NodeView (attributes, input shapes where the
// importer knows them, input values known at import) and returns a Lowering:
// the frugal nodes it becomes (op name, AttrMap with values written as the
// config writes them, inputs), or why it cannot be imported. The importer
// then checks that every frugal op named is registered: a rule may name an op
// that does not exist yet, and the node is then unsupported, not failed.
//
// Adding an ONNX op whose frugal op takes the same inputs is one line:
//   {"Sigmoid", Simple("activation", {Fixed("act_type", "sigmoid")})},
//   {"LeakyRelu", Simple("leaky_relu", {FloatAttr("alpha", "slope", "0.01")})},
// A Simple rule treats any ONNX attribute it does not list as unsupported.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frugal/graph.h"
#include "frugal/onnx.h"

namespace onnx {
class NodeProto;
class AttributeProto;
}  // namespace onnx

namespace frugal::onnx_map {

// What the importer knows about one ONNX value.
struct ValueFacts {
  Shape shape;                        // unknown if not known at import
  const OnnxTensor* value = nullptr;  // known at import (initializer, Constant node, known input)
  bool is_initializer = false;        // becomes a parameter (its value may be rewritten)
  std::string type_name;              // element type ("FLOAT", "INT64"); "" when not a tensor
};

// Throws Error (`where`: the node) unless attribute a is declared of type
// `expected` (an onnx::AttributeProto::AttributeType).
void RequireAttrType(const onnx::AttributeProto& a, int expected, const std::string& where);

// "" when node gives every attribute ONNX's schema of its op at `opset`
// requires, else which it lacks and since which version of the op.
std::string MissingRequiredAttr(const onnx::NodeProto& node, int64_t opset);

// Whether a frugal op can be used (by default: it is registered).
using OpAvailableFn = std::function<bool(const std::string& frugal_op)>;
bool Registered(const std::string& frugal_op);

class NodeView {
 public:
  NodeView(const onnx::NodeProto& node, int64_t opset, std::vector<ValueFacts> inputs,
           OpAvailableFn available = Registered);

  const std::string& op_type() const;
  int64_t opset() const { return opset_; }

  // Attributes. The typed getters return dflt when absent, and throw Error
  // naming the node where the attribute's declared type is another.
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  int64_t Int(const std::string& name, int64_t dflt) const;
  double Float(const std::string& name, double dflt) const;
  std::string Str(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> Ints(const std::string& name) const;  // empty when absent
  // A tensor attribute (ConstantOfShape's value), decoded; nullopt when absent.
  std::optional<OnnxTensor> TensorAttr(const std::string& name) const;
  // "" when every attribute is in `known`, else "attribute 'x' is not supported".
  std::string UnknownAttr(const std::vector<std::string>& known) const;

  // Inputs. An optional input left out (or given as "") is absent.
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool HasInput(int i) const;
  const Shape& InputShape(int i) const;  // unknown shape when absent or not known
  const OnnxTensor* InputValue(int i) const;
  const std::string& InputType(int i) const;  // "" when absent or not a tensor
  bool IsInitializer(int i) const { return HasInput(i) && inputs_[i].is_initializer; }
  // Outputs that the graph names (trailing optional ones may be left out).
  int num_outputs() const;
  bool HasOutput(int k) const;

  // Rules that have a choice of lowering ask which frugal ops exist.
  bool OpAvailable(const std::string& frugal_op) const { return available_(frugal_op); }

 private:
  std::string Label() const;
  const onnx::AttributeProto* Find(const std::string& name) const;
  const onnx::AttributeProto* Typed(const std::string& name, int type) const;
  const onnx::NodeProto& node_;
  int64_t opset_;
  std::vector<ValueFacts> inputs_;
  OpAvailableFn available_;
};

// An input of a frugal node in a Lowering.
struct Operand {
  enum Kind : uint8_t { kInput, kNode, kConst } kind;
  int index;       // ONNX input, earlier node of the lowering, or constant
  int output = 0;  // kNode: which output
  // kInput: integers Cast from a float tensor are read here as that tensor
  // (embedding's indices, which frugal holds as floats).
  bool whole_numbers = false;
};
inline Operand In(int i) { return {Operand::kInput, i, 0}; }
inline Operand Indices(int i) { return {Operand::kInput, i, 0, true}; }
inline Operand Prev(int node, int output = 0) { return {Operand::kNode, node, output}; }
inline Operand Const(int c) { return {Operand::kConst, c, 0}; }

struct NewNode {
  std::string op;
  AttrMap attrs;
  std::vector<Operand> inputs;
};

struct Lowering {
  // In order; the ONNX node's outputs are the last node's outputs.
  std::vector<NewNode> nodes;
  // Tensors the rule computed from an initializer (a transposed weight):
  // variables named "<that input's name>_<suffix>", of the kind the
  // consuming op's input asks for.
  struct Constant {
    int from_input;
    std::string suffix;
    Tensor value;
    bool learned = true;  // false: aux state (a mask made from labels), never a parameter
  };
  std::vector<Constant> constants;
  // No node: the ONNX output is this operand (Identity).
  std::optional<Operand> alias;
  // The alias's element type where it is not the operand's: integers Cast
  // from a float tensor (that tensor, which only Indices operands read).
  std::string alias_type;
  // No node: the ONNX output's value, computed at import from values known
  // there (Shape, Size, shape arithmetic on integers; ConstantOfShape).
  std::optional<OnnxTensor> value;
  // Non-empty: the ONNX node's outputs, in order (SoftmaxCrossEntropyLoss's
  // loss and log-probabilities come from different nodes); else the last
  // node's.
  std::vector<Operand> outputs;
  // The ONNX node's outputs past the last node's visible ones are its hidden
  // ones, in order (LayerNormalization's Mean and InvStdDev are layer_norm's
  // saved statistics); otherwise only visible outputs map (max pooling's
  // hidden argmax is not ONNX's Indices).
  bool hidden_outputs_too = false;
  // Non-empty: the node cannot be imported, and this says why.
  std::string unsupported;
};

using Rule = std::function<Lowering(const NodeView&)>;

// ------------------------------------------------ building blocks for rules

Lowering Unsupported(std::string why);
// One frugal node reading the ONNX inputs in order.
Lowering One(const std::string& op, AttrMap attrs, int num_inputs);
// No node: the output is input 0 (Identity).
Lowering Alias(const NodeView& v);

// Attribute values as frugal's AttrReader reads them.
std::string IntStr(int64_t v);
std::string FloatStr(double v);  // round-trips a float
std::string BoolStr(bool v);
std::string TupleStr(const std::vector<int64_t>& v);  // "(2,2)"

// One ONNX attribute to one frugal attribute.
struct AttrConv {
  enum Kind : uint8_t { kInt, kFloat, kInts, kStr, kFixed } kind;
  std::string onnx, frugal;
  std::string dflt;  // written when the ONNX attribute is absent; "" writes nothing
};
inline AttrConv IntAttr(std::string onnx, std::string frugal, std::string dflt = "") {
  return {AttrConv::kInt, std::move(onnx), std::move(frugal), std::move(dflt)};
}
inline AttrConv FloatAttr(std::string onnx, std::string frugal, std::string dflt = "") {
  return {AttrConv::kFloat, std::move(onnx), std::move(frugal), std::move(dflt)};
}
inline AttrConv IntsAttr(std::string onnx, std::string frugal) {
  return {AttrConv::kInts, std::move(onnx), std::move(frugal), ""};
}
// A string attribute, passed as it is (the frugal op checks its choices).
inline AttrConv StrAttr(std::string onnx, std::string frugal) {
  return {AttrConv::kStr, std::move(onnx), std::move(frugal), ""};
}
inline AttrConv Fixed(std::string frugal, std::string value) {
  return {AttrConv::kFixed, "", std::move(frugal), std::move(value)};
}
// The ONNX node's inputs, in order, to one frugal node; attributes converted
// one by one; any other ONNX attribute makes the node unsupported.
Rule Simple(const std::string& frugal_op, std::vector<AttrConv> attrs = {}, int num_inputs = 1);

// ------------------------------------------------------------------ table

struct OpMapping {
  const char* onnx_op;
  Rule rule;
  const char* frugal_ops;  // what it lowers to, for documentation and listings
};
// Every line, sorted by ONNX op type (FindMapping searches it).
const std::vector<OpMapping>& OpTable();
const OpMapping* FindMapping(const std::string& onnx_op);

// Rules of more than one line.
// src/interchange/onnx/rules_nn.cc: layers.
Lowering ConvRule(const NodeView& v);
Lowering ConvTransposeRule(const NodeView& v);
Lowering PoolRule(const NodeView& v, const std::string& pool_type);
Lowering GlobalPoolRule(const NodeView& v, const std::string& pool_type);
Lowering BatchNormRule(const NodeView& v);
Lowering LayerNormRule(const NodeView& v);
Lowering AttentionRule(const NodeView& v);
Lowering GemmRule(const NodeView& v);
Lowering MatMulRule(const NodeView& v);
Lowering SoftmaxRule(const NodeView& v, const std::string& frugal_op);
Lowering DropoutRule(const NodeView& v);
Lowering EluRule(const NodeView& v);
Lowering HardSigmoidRule(const NodeView& v);
Lowering SoftsignRule(const NodeView& v);
Lowering PReluRule(const NodeView& v);
Lowering InstanceNormRule(const NodeView& v);
Lowering LrnRule(const NodeView& v);
Lowering MvnRule(const NodeView& v);
// src/interchange/onnx/rules_recurrent.cc: RNN, GRU, LSTM.
Lowering RecurrentRule(const NodeView& v);
// src/interchange/onnx/rules_tensor.cc: arithmetic, layout, reductions.
Lowering FlattenRule(const NodeView& v);
Lowering ReshapeRule(const NodeView& v);
Lowering SumRule(const NodeView& v);
Lowering BroadcastRule(const NodeView& v, const std::string& frugal_op);
Lowering VariadicRule(const NodeView& v, const std::string& frugal_op);
Lowering ClipRule(const NodeView& v);
Lowering MeanRule(const NodeView& v);
Lowering CoshRule(const NodeView& v);
Lowering ConcatRule(const NodeView& v);
Lowering SplitRule(const NodeView& v);
Lowering SliceRule(const NodeView& v);
Lowering UnsqueezeRule(const NodeView& v);
Lowering ReduceRule(const NodeView& v, const std::string& frugal_op);
Lowering ComposedReduceRule(const NodeView& v, const std::string& pre, const std::string& post);
Lowering ReduceProdRule(const NodeView& v);
// src/interchange/onnx/rules_known.cc: values known at import, folded (Shape, Size,
// ConstantOfShape, Range, Cast of known values, Gather of known integers);
// Squeeze is a reshape otherwise, Neg a negative, Cast to float of a float
// an alias, Gather, GatherElements and Where (condition known) an embedding
// that copies the elements at positions known at import; the windows
// (Hann, Hamming, Blackman) folded.
Lowering CastRule(const NodeView& v);
Lowering CastLikeRule(const NodeView& v);
Lowering ShapeRule(const NodeView& v);
Lowering SizeRule(const NodeView& v);
Lowering ConstantOfShapeRule(const NodeView& v);
Lowering RangeRule(const NodeView& v);
Lowering SqueezeRule(const NodeView& v);
Lowering GatherRule(const NodeView& v);
Lowering NegRule(const NodeView& v);
Lowering WhereRule(const NodeView& v);
Lowering CompareRule(const NodeView& v);
Lowering WindowRule(const NodeView& v);
// src/interchange/onnx/rules_copy.cc: ops that only move elements, as copies from
// positions known at import.
Lowering ExpandRule(const NodeView& v);
Lowering TriluRule(const NodeView& v);
Lowering TileRule(const NodeView& v);
Lowering DepthSpaceRule(const NodeView& v);
Lowering ReverseSequenceRule(const NodeView& v);
Lowering CompressRule(const NodeView& v);
Lowering EyeLikeRule(const NodeView& v);
Lowering ScatterRule(const NodeView& v);
Lowering OneHotRule(const NodeView& v);
Lowering ResizeRule(const NodeView& v);
Lowering GatherNDRule(const NodeView& v);
Lowering PadRule(const NodeView& v);
// src/interchange/onnx/rules_training.cc: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss with targets known at import (a one-hot mask),
// weights and reductions; Adagrad, Momentum, Adam (domain
// ai.onnx.preview.training).
Lowering NllLossRule(const NodeView& v);
Lowering SoftmaxCrossEntropyRule(const NodeView& v);
Lowering OptimizerRule(const NodeView& v);

}  // namespace frugal::onnx_map
