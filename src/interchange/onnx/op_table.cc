// The ONNX -> frugal op table, and the NodeView that rules read.
//
// A line names the ONNX op, its rule, and the frugal ops it lowers to; the
// lines are grouped as their rules are (the files rules_*.cc). Lines whose
// frugal op is not registered yet are kept: the importer reports such
// nodes as unsupported until the op exists, and then they import with no
// change here. Attribute names and forms follow MXNet's (kernel "(3,3)",
// act_type, eps, ...).
#include "interchange/onnx/op_table.h"

#include <algorithm>
#include <cstdio>

#include "frugal/op.h"
#include "onnx.pb.h"

namespace frugal::onnx_map {

// ------------------------------------------------------------------ table

namespace {
// Ops that are one frugal op, their attributes renamed (Simple).
std::vector<OpMapping> OneOpMappings() {
  return {
      {"Abs", Simple("abs"), "abs"},
      {"Acos", Simple("arccos"), "arccos"},
      {"Acosh", Simple("arccosh"), "arccosh"},
      {"Asin", Simple("arcsin"), "arcsin"},
      {"Asinh", Simple("arcsinh"), "arcsinh"},
      {"Atan", Simple("arctan"), "arctan"},
      {"Atanh", Simple("arctanh"), "arctanh"},
      {"Ceil", Simple("ceil"), "ceil"},
      {"Cos", Simple("cos"), "cos"},
      {"Erf", Simple("erf"), "erf"},
      {"Exp", Simple("exp"), "exp"},
      {"Floor", Simple("floor"), "floor"},
      {"Gelu", Simple("gelu", {StrAttr("approximate", "approximate")}), "gelu"},
      {"LeakyRelu", Simple("leaky_relu", {FloatAttr("alpha", "slope", "0.01")}), "leaky_relu"},
      {"Log", Simple("log"), "log"},
      {"Reciprocal", Simple("rdiv_scalar", {Fixed("scalar", "1")}), "rdiv_scalar"},
      {"Relu", Simple("relu"), "relu"},
      {"Round", Simple("round"), "round"},
      {"Sigmoid", Simple("activation", {Fixed("act_type", "sigmoid")}), "activation"},
      {"Sign", Simple("sign"), "sign"},
      {"Sin", Simple("sin"), "sin"},
      {"Sinh", Simple("sinh"), "sinh"},
      {"Softplus", Simple("activation", {Fixed("act_type", "softrelu")}), "activation"},
      {"Sqrt", Simple("sqrt"), "sqrt"},
      {"Tan", Simple("tan"), "tan"},
      {"Tanh", Simple("activation", {Fixed("act_type", "tanh")}), "activation"},
      {"Transpose", Simple("transpose", {IntsAttr("perm", "axes")}), "transpose"},
  };
}

// Layers (rules_nn.cc) and recurrent layers (rules_recurrent.cc).
std::vector<OpMapping> LayerMappings() {
  return {
      {"Attention", AttentionRule, "attention"},
      {"AveragePool", [](const NodeView& v) { return PoolRule(v, "avg"); }, "pooling"},
      {"BatchNormalization", BatchNormRule, "batch_norm"},
      {"Celu", EluRule, "div_scalar, leaky_relu (elu), mul_scalar"},
      {"Conv", ConvRule, "convolution"},
      {"ConvTranspose", ConvTransposeRule, "deconvolution"},
      {"Dropout", DropoutRule, "dropout"},
      {"Elu", EluRule, "leaky_relu (elu)"},
      {"GRU", RecurrentRule, "fully_connected, slice, activation, mul, add (unrolled over time), concat"},
      {"Gemm", GemmRule, "fully_connected (+ reshape, transpose, add)"},
      {"GlobalAveragePool", [](const NodeView& v) { return GlobalPoolRule(v, "avg"); }, "pooling"},
      {"GlobalMaxPool", [](const NodeView& v) { return GlobalPoolRule(v, "max"); }, "pooling"},
      {"HardSigmoid", HardSigmoidRule, "mul_scalar, add_scalar, clip"},
      {"HardSwish", HardSigmoidRule, "mul_scalar, add_scalar, clip, mul"},
      {"InstanceNormalization", InstanceNormRule, "layer_norm, reshape, mul, add"},
      {"LSTM", RecurrentRule, "fully_connected, slice, activation, mul, add (unrolled over time), concat"},
      {"LayerNormalization", LayerNormRule, "layer_norm"},
      {"LRN", LrnRule, "square, reshape, pooling (avg), mul_scalar, add_scalar, power, div"},
      {"LogSoftmax", [](const NodeView& v) { return SoftmaxRule(v, "log_softmax"); }, "log_softmax (+ reshape)"},
      {"MatMul", MatMulRule, "fully_connected or matmul (+ transpose)"},
      {"MaxPool", [](const NodeView& v) { return PoolRule(v, "max"); }, "pooling"},
      {"MeanVarianceNormalization", MvnRule, "mean, square, sub, sqrt, add_scalar, div"},
      {"PRelu", PReluRule, "relu, negative, mul, sub"},
      {"RNN", RecurrentRule, "fully_connected, slice, activation, mul, add (unrolled over time), concat"},
      {"Selu", EluRule, "leaky_relu (elu), mul_scalar"},
      {"Softmax", [](const NodeView& v) { return SoftmaxRule(v, "softmax"); }, "softmax (+ reshape)"},
      {"Softsign", SoftsignRule, "abs, add_scalar, div"},
  };
}

// Arithmetic, layout and reductions (rules_tensor.cc).
std::vector<OpMapping> TensorMappings() {
  return {
      {"Add", [](const NodeView& v) { return BroadcastRule(v, "add"); }, "add"},
      {"Clip", ClipRule, "clip"},
      {"Concat", ConcatRule, "concat (or a value known at import)"},
      {"Cosh", CoshRule, "exp, negative, add, mul_scalar"},
      {"Div", [](const NodeView& v) { return BroadcastRule(v, "div"); }, "div"},
      {"Flatten", FlattenRule, "flatten, reshape"},
      {"Max", [](const NodeView& v) { return VariadicRule(v, "maximum"); }, "maximum"},
      {"Mean", MeanRule, "add_n (or add), div_scalar"},
      {"Min", [](const NodeView& v) { return VariadicRule(v, "minimum"); }, "minimum"},
      {"Mul", [](const NodeView& v) { return BroadcastRule(v, "mul"); }, "mul"},
      {"Pow", [](const NodeView& v) { return BroadcastRule(v, "power"); }, "power"},
      {"ReduceL1", [](const NodeView& v) { return ComposedReduceRule(v, "abs", ""); }, "abs, sum"},
      {"ReduceL2", [](const NodeView& v) { return ComposedReduceRule(v, "square", "sqrt"); }, "square, sum, sqrt"},
      {"ReduceLogSum", [](const NodeView& v) { return ComposedReduceRule(v, "", "log"); }, "sum, log"},
      {"ReduceLogSumExp", [](const NodeView& v) { return ComposedReduceRule(v, "exp", "log"); }, "exp, sum, log"},
      {"ReduceMax", [](const NodeView& v) { return ReduceRule(v, "max"); }, "max"},
      {"ReduceMean", [](const NodeView& v) { return ReduceRule(v, "mean"); }, "mean"},
      {"ReduceMin", [](const NodeView& v) { return ReduceRule(v, "min"); }, "min"},
      {"ReduceSumSquare", [](const NodeView& v) { return ComposedReduceRule(v, "square", ""); }, "square, sum"},
      {"ReduceProd", ReduceProdRule, "embedding of positions known at import, slice, mul, reshape"},
      {"ReduceSum", [](const NodeView& v) { return ReduceRule(v, "sum"); }, "sum"},
      {"Reshape", ReshapeRule, "reshape"},
      {"Slice", SliceRule, "slice (or a value known at import)"},
      {"Split", SplitRule, "split"},
      {"Sub", [](const NodeView& v) { return BroadcastRule(v, "sub"); }, "sub"},
      {"Sum", SumRule, "add_n (or add)"},
      {"Unsqueeze", UnsqueezeRule, "expand_dims"},
  };
}

// Values known at import, folded, and aliases (rules_known.cc).
std::vector<OpMapping> KnownValueMappings() {
  return {
      {"BlackmanWindow", WindowRule, "(none: a value known at import)"},
      {"Cast", CastRule, "(none: a value known at import, or an alias of a float)"},
      {"CastLike", CastLikeRule, "(none: a value known at import, or an alias of a float)"},
      {"ConstantOfShape", ConstantOfShapeRule, "(none: a value known at import)"},
      {"Equal", CompareRule, "(none: a value known at import)"},
      {"Gather", GatherRule, "embedding of positions known at import (or a value known at import)"},
      {"GatherElements", GatherRule, "embedding of positions known at import (or a value known at import)"},
      {"Greater", CompareRule, "(none: a value known at import)"},
      {"GreaterOrEqual", CompareRule, "(none: a value known at import)"},
      {"HammingWindow", WindowRule, "(none: a value known at import)"},
      {"HannWindow", WindowRule, "(none: a value known at import)"},
      {"Identity", Alias, "(none: an alias of its input)"},
      {"Less", CompareRule, "(none: a value known at import)"},
      {"LessOrEqual", CompareRule, "(none: a value known at import)"},
      {"Neg", NegRule, "negative (or a value known at import)"},
      {"Range", RangeRule, "(none: a value known at import)"},
      {"Shape", ShapeRule, "(none: a value known at import)"},
      {"Size", SizeRule, "(none: a value known at import)"},
      {"Squeeze", SqueezeRule, "reshape (or a value known at import)"},
      {"Where", WhereRule, "concat, embedding of positions known at import (or a value known at import)"},
  };
}

// Ops that only move elements, as copies from positions known at import
// (rules_copy.cc).
std::vector<OpMapping> CopyMappings() {
  return {
      {"Compress", CompressRule, "reshape, embedding of positions known at import, reshape"},
      {"DepthToSpace", DepthSpaceRule, "reshape, embedding of positions known at import, reshape"},
      {"Expand", ExpandRule, "reshape, embedding of positions known at import, reshape"},
      {"EyeLike", EyeLikeRule, "(none: a value known at import)"},
      {"GatherND", GatherNDRule, "embedding of positions known at import, reshape"},
      {"OneHot", OneHotRule, "embedding of positions known at import, reshape"},
      {"Pad", PadRule, "reshape, concat, embedding of positions known at import, reshape"},
      {"Resize", ResizeRule, "embedding of positions known at import (nearest) or fully_connected (linear, cubic)"},
      {"ReverseSequence", ReverseSequenceRule, "reshape, embedding of positions known at import, reshape"},
      {"Scatter", ScatterRule, "reshape, concat, embedding of positions known at import, reshape"},
      {"ScatterElements", ScatterRule, "reshape, concat, embedding of positions known at import, reshape"},
      {"ScatterND", ScatterRule, "reshape, concat, embedding of positions known at import, reshape"},
      {"SpaceToDepth", DepthSpaceRule, "reshape, embedding of positions known at import, reshape"},
      {"Tile", TileRule, "reshape, embedding of positions known at import, reshape"},
      {"Trilu", TriluRule, "(none: a value known at import) or mul by a 0/1 mask"},
      {"Upsample", ResizeRule, "embedding of positions known at import, reshape"},
  };
}

// Losses and optimizers of ONNX's training domain (rules_training.cc).
std::vector<OpMapping> TrainingMappings() {
  return {
      {"Adagrad", OptimizerRule, "mul_scalar, add, square, sqrt, add_scalar, div, sub"},
      {"Adam", OptimizerRule, "mul_scalar, add, square, sqrt, add_scalar, div, sub"},
      {"NegativeLogLikelihoodLoss", NllLossRule, "mul (a one-hot mask), reshape, sum, negative, div"},
      {"Momentum", OptimizerRule, "mul_scalar, add, square, sqrt, add_scalar, div, sub"},
      {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyRule, "log_softmax, then as NegativeLogLikelihoodLoss"},
  };
}
}  // namespace

const std::vector<OpMapping>& OpTable() {
  static const auto* table = [] {
    auto* t = new std::vector<OpMapping>;
    for (const auto& part :
         {OneOpMappings, LayerMappings, TensorMappings, KnownValueMappings, CopyMappings, TrainingMappings}) {
      const std::vector<OpMapping> lines = part();
      t->insert(t->end(), lines.begin(), lines.end());
    }
    std::sort(t->begin(), t->end(),
              [](const OpMapping& a, const OpMapping& b) { return std::string(a.onnx_op) < b.onnx_op; });
    return t;
  }();
  return *table;
}

const OpMapping* FindMapping(const std::string& onnx_op) {
  const auto& t = OpTable();
  auto it = std::lower_bound(t.begin(), t.end(), onnx_op,
                             [](const OpMapping& m, const std::string& name) { return m.onnx_op < name; });
  return it != t.end() && it->onnx_op == onnx_op ? &*it : nullptr;
}

// ------------------------------------------------- required attributes

namespace {
// An attribute ONNX's schema requires of an op from opset `since` up to
// `until` (inclusive), as onnx/defs declares it (AttributeProto without a
// default): the rules never supply a default for these.
struct RequiredAttr {
  const char* op;
  const char* attr;
  int64_t since, until;
};
constexpr int64_t kAnyOpset = 1 << 30;
const RequiredAttr kRequired[] = {
    {"AveragePool", "kernel_shape", 1, kAnyOpset},
    {"Cast", "to", 1, kAnyOpset},
    {"Concat", "axis", 4, kAnyOpset},  // Concat-1 defaulted it to 1
    {"DepthToSpace", "blocksize", 1, kAnyOpset},
    {"LRN", "size", 1, kAnyOpset},
    {"MaxPool", "kernel_shape", 1, kAnyOpset},
    {"Momentum", "alpha", 1, kAnyOpset},
    {"Momentum", "beta", 1, kAnyOpset},
    {"Momentum", "mode", 1, kAnyOpset},
    {"Momentum", "norm_coefficient", 1, kAnyOpset},
    {"Pad", "pads", 2, 10},  // an input from Pad-11
    {"Slice", "starts", 1, 9},
    {"Slice", "ends", 1, 9},  // inputs from Slice-10
    {"SpaceToDepth", "blocksize", 1, kAnyOpset},
    {"Unsqueeze", "axes", 1, 12},  // an input from Unsqueeze-13
    {"Upsample", "scales", 7, 8},  // an input from Upsample-9
};
}  // namespace

std::string MissingRequiredAttr(const onnx::NodeProto& node, int64_t opset) {
  for (const RequiredAttr& r : kRequired) {
    if (node.op_type() != r.op || opset < r.since || opset > r.until) continue;
    const bool given = std::any_of(node.attribute().begin(), node.attribute().end(),
                                   [&](const onnx::AttributeProto& a) { return a.name() == r.attr; });
    if (!given)
      return Fmt("attribute '", r.attr, "' is required (ONNX's ", r.op, " at opset ", opset,
                 " has no default for it); the file is malformed");
  }
  return "";
}

// --------------------------------------------------------------- NodeView

NodeView::NodeView(const onnx::NodeProto& node, int64_t opset, std::vector<ValueFacts> inputs, OpAvailableFn available)
    : node_(node), opset_(opset), inputs_(std::move(inputs)), available_(std::move(available)) {}

const std::string& NodeView::op_type() const { return node_.op_type(); }

const onnx::AttributeProto* NodeView::Find(const std::string& name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// "ONNX node 'conv1' (Conv)".
std::string NodeView::Label() const {
  const std::string& name = !node_.name().empty() ? node_.name() : node_.output_size() ? node_.output(0) : "";
  return Fmt("ONNX node '", name, "' (", node_.op_type(), ")");
}

namespace {
std::string AttrTypeName(int type) {
  return onnx::AttributeProto::AttributeType_IsValid(type)
             ? onnx::AttributeProto::AttributeType_Name(static_cast<onnx::AttributeProto::AttributeType>(type))
             : Fmt("type ", type);
}
}  // namespace

void RequireAttrType(const onnx::AttributeProto& a, int expected, const std::string& where) {
  FRUGAL_REQUIRE(a.type() == expected, where, ": attribute '", a.name(), "' is ", AttrTypeName(a.type()), ", expected ",
                 AttrTypeName(expected), " (ONNX's schema of the op says so; the file is malformed)");
}

// The attribute `name` where the node gives it, its declared type checked
// against the one the rule reads: a value of another type is never read as
// this one's default (an INT sent as FLOAT is not 0).
const onnx::AttributeProto* NodeView::Typed(const std::string& name, int type) const {
  const onnx::AttributeProto* a = Find(name);
  if (a) RequireAttrType(*a, type, Label());
  return a;
}

int64_t NodeView::Int(const std::string& name, int64_t dflt) const {
  const onnx::AttributeProto* a = Typed(name, onnx::AttributeProto::INT);
  return a ? a->i() : dflt;
}

double NodeView::Float(const std::string& name, double dflt) const {
  const onnx::AttributeProto* a = Typed(name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : dflt;
}

std::string NodeView::Str(const std::string& name, const std::string& dflt) const {
  const onnx::AttributeProto* a = Typed(name, onnx::AttributeProto::STRING);
  return a ? a->s() : dflt;
}

std::vector<int64_t> NodeView::Ints(const std::string& name) const {
  const onnx::AttributeProto* a = Typed(name, onnx::AttributeProto::INTS);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

std::optional<OnnxTensor> NodeView::TensorAttr(const std::string& name) const {
  const onnx::AttributeProto* a = Typed(name, onnx::AttributeProto::TENSOR);
  if (!a) return std::nullopt;
  return DecodeOnnxTensor(a->t(), Fmt(op_type(), " '", node_.name(), "' attribute ", name));
}

std::string NodeView::UnknownAttr(const std::vector<std::string>& known) const {
  for (const auto& a : node_.attribute())
    if (std::find(known.begin(), known.end(), a.name()) == known.end())
      return Fmt("attribute '", a.name(), "' is not supported");
  return "";
}

bool NodeView::HasInput(int i) const { return i >= 0 && i < node_.input_size() && !node_.input(i).empty(); }

const Shape& NodeView::InputShape(int i) const {
  static const Shape unknown;
  return HasInput(i) ? inputs_[i].shape : unknown;
}

const OnnxTensor* NodeView::InputValue(int i) const { return HasInput(i) ? inputs_[i].value : nullptr; }

const std::string& NodeView::InputType(int i) const {
  static const std::string none;
  return HasInput(i) ? inputs_[i].type_name : none;
}

int NodeView::num_outputs() const {
  int n = 0;
  for (int k = 0; k < node_.output_size(); ++k)
    if (!node_.output(k).empty()) n = k + 1;
  return n;
}

bool NodeView::HasOutput(int k) const { return k < node_.output_size() && !node_.output(k).empty(); }

// -------------------------------------------------------------- helpers

Lowering Unsupported(std::string why) {
  Lowering l;
  l.unsupported = std::move(why);
  return l;
}

Lowering One(const std::string& op, AttrMap attrs, int num_inputs) {
  Lowering l;
  NewNode n{op, std::move(attrs), {}};
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(In(i));
  l.nodes.push_back(std::move(n));
  return l;
}

bool Registered(const std::string& frugal_op) { return OpRegistry::Get().Find(frugal_op) != nullptr; }

std::string IntStr(int64_t v) { return std::to_string(v); }

std::string FloatStr(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string BoolStr(bool v) { return v ? "true" : "false"; }

std::string TupleStr(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s + ")";
}

Lowering Alias(const NodeView& v) {
  if (std::string why = v.UnknownAttr({}); !why.empty()) return Unsupported(why);
  if (v.num_inputs() != 1) return Unsupported(Fmt(v.num_inputs(), " inputs; an alias takes 1"));
  Lowering l;
  l.alias = In(0);
  return l;
}

Rule Simple(const std::string& frugal_op, std::vector<AttrConv> attrs, int num_inputs) {
  return [=](const NodeView& v) {
    std::vector<std::string> known;
    for (const AttrConv& c : attrs)
      if (c.kind != AttrConv::kFixed) known.push_back(c.onnx);
    if (std::string why = v.UnknownAttr(known); !why.empty()) return Unsupported(why);
    if (v.num_inputs() != num_inputs)
      return Unsupported(Fmt(v.num_inputs(), " inputs; the mapping to ", frugal_op, " takes ", num_inputs));
    AttrMap out;
    for (const AttrConv& c : attrs) {
      if (c.kind == AttrConv::kFixed) {
        out[c.frugal] = c.dflt;
      } else if (!v.Has(c.onnx)) {
        if (!c.dflt.empty()) out[c.frugal] = c.dflt;
      } else if (c.kind == AttrConv::kInt) {
        out[c.frugal] = IntStr(v.Int(c.onnx, 0));
      } else if (c.kind == AttrConv::kFloat) {
        out[c.frugal] = FloatStr(v.Float(c.onnx, 0));
      } else if (c.kind == AttrConv::kStr) {
        out[c.frugal] = v.Str(c.onnx, "");
      } else {
        out[c.frugal] = TupleStr(v.Ints(c.onnx));
      }
    }
    return One(frugal_op, std::move(out), num_inputs);
  };
}

}  // namespace frugal::onnx_map
