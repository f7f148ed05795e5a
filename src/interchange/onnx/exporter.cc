// The ONNX exporter: a frugal forward graph with the values of its
// parameters and aux state as an ONNX model (opset 17) for inference.
//
// One rule per frugal op (the table in Rules()) reads the node's typed params
// and adds ONNX nodes. The frugal node's visible outputs are named as
// configs name them: "<node>" (output 0), "<node>:<k>"; intermediate values
// "<node>:<what>" (':' never occurs in a config name). Nodes are exported
// when a graph output or an exported node reads them (so in topological
// order), so what only the loss heads' labels need is left out.
// The mapping is the inverse of the importer's table (op_table.cc), so an
// exported model imports back into the same computation:
//   dropout, identity, block_grad        removed (the output is the input)
//   batch_norm                           BatchNormalization over the moving
//                                        statistics (gamma = 1 with fix_gamma),
//                                        then Relu when fused (act_type relu)
//   fully_connected                      [Flatten(axis 1)] Gemm(transB=1);
//                                        flatten=false on more than 2 dims:
//                                        Reshape to rows, Gemm, Reshape back
//   softmax_cross_entropy                Softmax: what the head outputs
//   linear_cross_entropy                 Gemm(transB=1), Softmax: the
//                                        classifier's prediction (the op's
//                                        own output, loss and rank, needs
//                                        the label)
//   attention                            Transpose(k), MatMul, Mul (scale),
//                                        Add of the mask input and of a
//                                        causal (Tq, Tk) constant of 0 and
//                                        -inf, Softmax, MatMul
//   gelu                                 Div, Erf, Add, Mul, Mul (the erf
//                                        form) or the tanh form's Mul, Add,
//                                        Tanh: what the node computes
//   embedding                            Gather of the weight's rows at the
//                                        indices Cast to int64
//   split                                Split [then Squeeze, squeeze_axis]
//   lstm_cell                            Add, Split into the 4 gates, Sigmoid
//                                        and Tanh, Mul, Add (h and c; not the
//                                        gates kept for the backward pass)
//   lstm                                 per step: Slice, Squeeze, Gemm of
//                                        x_t and of h_{t-1}, lstm_cell's
//                                        nodes; y and cs: Unsqueeze, Concat
//   linear_ / logistic_regression_output the input / Sigmoid
//   reshape, expand_dims                 Reshape to the inferred shape
// Variables appear when a rule first reads them: data inputs as graph
// inputs, parameters and aux state as initializers; a label read only by
// loss heads (directly or through a split) is not an input of the model.
// A config and checkpoint become a model (the batch axis, the data
// pipeline's metadata) in model_export.cc.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "frugal/onnx.h"
#include "frugal/op.h"
#include "onnx.pb.h"
#include "ops/concat_split.h"
#include "ops/op_params.h"

namespace frugal {
namespace {

constexpr int64_t kOpset = 17;

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
}

void SetFloat(onnx::NodeProto* n, const std::string& name, double v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(static_cast<float>(v));
}

void SetInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A float32 value of this shape, for the graph's inputs and outputs.
void SetType(onnx::ValueInfoProto* v, const std::string& name, const Shape& s) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* dims = t->mutable_shape();
  for (int64_t d : s.dims()) dims->add_dim()->set_dim_value(d);
}

// One exported graph: the frugal nodes in order, each through its rule.
class Exporter {
 public:
  Exporter(const Graph& g, const std::map<std::string, Tensor>& values, onnx::GraphProto* out)
      : g_(g),
        values_(values),
        out_(out),
        names_(g.num_entries()),
        shapes_(g.num_entries()),
        exported_(g.num_nodes(), false) {}
  void Run();

  // For the rules, about the node being exported:
  const Node& node() const { return g_.node(id_); }
  template <typename P>
  const P& params() const {
    return std::any_cast<const P&>(node().params);
  }
  // The ONNX name of input k (a variable is declared at its first use).
  std::string In(int k);
  const Shape& InShape(int k) const { return g_.shape(node().inputs[k]); }
  const Shape& OutShape() const { return g_.shape(Entry{id_, 0}); }
  // The ONNX name of the node's output k: "<node>", "<node>:<k>".
  std::string Out(int k) const { return k == 0 ? node().name : node().name + ":" + std::to_string(k); }
  // The intermediate value "<node>:<suffix>".
  std::string Temp(const std::string& suffix) const { return node().name + ":" + suffix; }
  // Adds an ONNX node with these outputs; one named Out(k) is the node's output k.
  onnx::NodeProto* AddNamed(const std::string& op_type, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs);
  // Adds an ONNX node of one output: the frugal node's output 0 when suffix
  // is empty (the rule's last node), else Temp(suffix).
  onnx::NodeProto* Add(const std::string& op_type, const std::vector<std::string>& inputs,
                       const std::string& suffix = "") {
    return AddNamed(op_type, inputs, {suffix.empty() ? Out(0) : Temp(suffix)});
  }
  // An initializer "<node>:<suffix>" made by the rule; returns its name.
  std::string Floats(const std::string& suffix, const Shape& shape, const std::vector<float>& v);
  std::string Ints(const std::string& suffix, const std::vector<int64_t>& v);
  // The node computes nothing at inference: its output is input k.
  void Alias(int k) { names_[g_.EntryId({id_, 0})] = In(k); }
  // The node's output 0 is the ONNX value `name`, made by the rule.
  void OutputIs(const std::string& name) { names_[g_.EntryId({id_, 0})] = name; }
  // The ONNX value of output 0 has this shape, not the frugal output's.
  void SetOutShape(const Shape& s) { shapes_[g_.EntryId({id_, 0})] = s; }

 private:
  // The ONNX name of e, exporting its node first where no value names it yet.
  std::string Value(Entry e);
  void Export(int id);
  std::string Declare(const Node& var, Entry e);
  void AddOutput(Entry e);

  const Graph& g_;
  const std::map<std::string, Tensor>& values_;
  onnx::GraphProto* out_;
  std::vector<std::string> names_;  // per entry: its ONNX value, once made
  std::vector<Shape> shapes_;       // per entry: its ONNX value's shape where a rule set it
  std::vector<bool> exported_;      // per node: its rule has run
  int id_ = -1;                     // the node being exported
};

using Rule = std::function<void(Exporter&)>;
const std::map<std::string, Rule>& Rules();

std::string ExportableOps() {
  std::string s;
  for (const auto& [op, rule] : Rules()) s += (s.empty() ? "" : ", ") + op;
  return s;
}

void Exporter::Run() {
  for (const Entry& e : g_.outputs) AddOutput(e);
}

void Exporter::Export(int id) {
  const int reader = id_;
  id_ = id;
  const Node& n = node();
  auto rule = Rules().find(n.op->name());
  FRUGAL_REQUIRE(rule != Rules().end(), n.Where(), ": op '", n.op->name(),
                 "' has no ONNX mapping; export supports: ", ExportableOps(),
                 " (change the node, or add a rule in src/interchange/onnx/exporter.cc)");
  rule->second(*this);
  exported_[id] = true;
  id_ = reader;
}

std::string Exporter::Value(Entry e) {
  std::string& name = names_[g_.EntryId(e)];
  const Node& from = g_.node(e.node);
  if (name.empty() && from.is_variable()) name = Declare(from, e);
  if (name.empty() && !exported_[e.node]) Export(e.node);
  return name;  // names_ does not grow: the reference holds
}

std::string Exporter::In(int k) {
  const Entry e = node().inputs[k];
  const std::string name = Value(e);
  const Node& from = g_.node(e.node);
  FRUGAL_REQUIRE(!name.empty(), node().Where(), ": reads output ", e.index, " of '", from.name,
                 "', which the ONNX export does not make (it makes an op's visible outputs: ",
                 from.op->NumVisibleOutputs(from.params), " of ", from.op->name(), ")");
  return name;
}

std::string Exporter::Declare(const Node& var, Entry e) {
  if (var.var == VarKind::kInput) {
    SetType(out_->add_input(), var.name, g_.shape(e));
    return var.name;
  }
  auto v = values_.find(var.name);
  FRUGAL_REQUIRE(v != values_.end(), node().Where(), ": no value for its input '", var.name,
                 "' (give every parameter and aux state a value)");
  const Tensor& t = v->second;
  onnx::TensorProto* init = out_->add_initializer();
  init->set_name(var.name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : t.shape().dims()) init->add_dims(d);
  init->set_raw_data(t.f(), t.size() * sizeof(float));  // ONNX's raw data is little-endian, as this host
  return var.name;
}

onnx::NodeProto* Exporter::AddNamed(const std::string& op_type, const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs) {
  onnx::NodeProto* n = out_->add_node();
  n->set_name(outputs[0]);
  n->set_op_type(op_type);
  for (const std::string& in : inputs) n->add_input(in);
  const int made = node().op->NumOutputs(node().params);
  for (const std::string& out : outputs) {
    n->add_output(out);
    for (int k = 0; k < made; ++k)
      if (out == Out(k)) names_[g_.EntryId({id_, k})] = out;
  }
  return n;
}

std::string Exporter::Floats(const std::string& suffix, const Shape& shape, const std::vector<float>& v) {
  onnx::TensorProto* t = out_->add_initializer();
  t->set_name(node().name + ":" + suffix);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape.dims()) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
  return t->name();
}

std::string Exporter::Ints(const std::string& suffix, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = out_->add_initializer();
  t->set_name(node().name + ":" + suffix);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
  return t->name();
}

// A graph output is named as its frugal node's output; one that a removed
// node made (a dropout's output is its input) is that value through an Identity.
void Exporter::AddOutput(Entry e) {
  const std::string name = Value(e);
  id_ = e.node;
  FRUGAL_REQUIRE(!name.empty(), node().Where(), ": its output ", e.index,
                 " is a graph output, which the ONNX export does not make (it makes an op's visible outputs)");
  if (name != Out(e.index)) AddNamed("Identity", {name}, {Out(e.index)});
  const Shape& set = shapes_[g_.EntryId(e)];
  SetType(out_->add_output(), Out(e.index), set.known() ? set : g_.shape(e));
}

// ------------------------------------------------------------------ rules

std::vector<int64_t> Tuple(const Pair& p) { return {p[0], p[1]}; }
std::vector<int64_t> Pads(const Pair& p) { return {p[0], p[1], p[0], p[1]}; }  // begin and end alike

Rule Unary(const std::string& op_type) {
  return [op_type](Exporter& x) { x.Add(op_type, {x.In(0)}); };
}

Rule Binary(const std::string& op_type) {
  return [op_type](Exporter& x) { x.Add(op_type, {x.In(0), x.In(1)}); };
}

// y = x (op) scalar, or scalar (op) x when reversed.
Rule Scalar(const std::string& op_type, bool reversed) {
  return [op_type, reversed](Exporter& x) {
    const std::string s = x.Floats("scalar", Shape{}, {x.params<ScalarParams>().scalar});
    x.Add(op_type, reversed ? std::vector<std::string>{s, x.In(0)} : std::vector<std::string>{x.In(0), s});
  };
}

void Convolution(Exporter& x) {
  const auto& p = x.params<ConvParams>();
  std::vector<std::string> in = {x.In(0), x.In(1)};
  if (!p.no_bias) in.push_back(x.In(2));
  onnx::NodeProto* n = x.Add("Conv", in);
  SetInts(n, "kernel_shape", Tuple(p.kernel));
  SetInts(n, "strides", Tuple(p.stride));
  SetInts(n, "pads", Pads(p.pad));
  SetInts(n, "dilations", Tuple(p.dilate));
  SetInt(n, "group", p.num_group);
}

void BatchNorm(Exporter& x) {
  const auto& p = x.params<BnParams>();
  const Shape& c = x.InShape(1);
  const std::string gamma = p.fix_gamma ? x.Floats("gamma", c, std::vector<float>(c.Size(), 1.f)) : x.In(1);
  // Fused with a relu (FuseBnRelu): the BatchNormalization's value takes the
  // node's name and the Relu's the relu's, so import-onnx makes the config's
  // two nodes again, the batch_norm's parameters under their names.
  const std::string& relu = x.node().fused;
  const std::string suffix = p.relu && relu.empty() ? "bn" : "";
  onnx::NodeProto* n = x.Add("BatchNormalization", {x.In(0), gamma, x.In(2), x.In(3), x.In(4)}, suffix);
  SetFloat(n, "epsilon", p.eps);
  SetFloat(n, "momentum", p.momentum);
  if (!p.relu) return;
  if (relu.empty()) {
    x.Add("Relu", {n->output(0)});
  } else {
    x.AddNamed("Relu", {n->output(0)}, {relu});
    x.OutputIs(relu);
  }
}

void Pooling(Exporter& x) {
  const auto& p = x.params<PoolParams>();
  FRUGAL_REQUIRE(!p.full, x.node().Where(), ": pooling_convention full is not exported (ONNX's ceil_mode ",
                 "differs where a window starts in the padding); use pooling_convention valid");
  if (p.global) {
    x.Add(p.max ? "GlobalMaxPool" : "GlobalAveragePool", {x.In(0)});
    return;
  }
  onnx::NodeProto* n = x.Add(p.max ? "MaxPool" : "AveragePool", {x.In(0)});
  SetInts(n, "kernel_shape", Tuple(p.kernel));
  SetInts(n, "strides", Tuple(p.stride));
  SetInts(n, "pads", Pads(p.pad));
  if (!p.max) SetInt(n, "count_include_pad", p.count_include_pad);
}

// fully_connected: y = x W^T + b, x flattened to (N, K) where it has more
// dims (flatten true, the default).
void FullyConnected(Exporter& x) {
  const auto& p = x.params<FcParams>();
  const Shape& in = x.InShape(0);
  std::string a = x.In(0);
  const bool last_axis = !p.flatten && in.ndim() > 2;  // over the last axis: the rows of all others
  if (last_axis) a = x.Add("Reshape", {a, x.Ints("rows_shape", {-1, in[in.ndim() - 1]})}, "rows")->output(0);
  std::vector<std::string> ins = {a, x.In(1)};
  if (!p.no_bias) ins.push_back(x.In(2));
  if (last_axis) {
    SetInt(x.Add("Gemm", ins, "product"), "transB", 1);
    x.Add("Reshape", {x.Temp("product"), x.Ints("out_shape", x.OutShape().dims())});
    return;
  }
  if (in.ndim() != 2) {
    onnx::NodeProto* f = x.Add("Flatten", {a}, "flatten");
    SetInt(f, "axis", 1);
    ins[0] = f->output(0);
  }
  SetInt(x.Add("Gemm", ins), "transB", 1);
}

void Flatten(Exporter& x) { SetInt(x.Add("Flatten", {x.In(0)}), "axis", 1); }

void ReshapeTo(Exporter& x) { x.Add("Reshape", {x.In(0), x.Ints("shape", x.OutShape().dims())}); }

void Activation(Exporter& x) {
  static const std::map<Act, const char*> kOps = {
      {Act::kRelu, "Relu"}, {Act::kSigmoid, "Sigmoid"}, {Act::kTanh, "Tanh"}, {Act::kSoftRelu, "Softplus"}};
  x.Add(kOps.at(x.params<Act>()), {x.In(0)});
}

void LeakyRelu(Exporter& x) {
  const auto& p = x.params<LeakyParams>();
  SetFloat(x.Add(p.elu ? "Elu" : "LeakyRelu", {x.In(0)}), "alpha", p.slope);
}

void Softmax(Exporter& x) {
  const auto& p = x.params<SoftmaxParams>();
  SetInt(x.Add(p.log ? "LogSoftmax" : "Softmax", {x.In(0)}), "axis", p.axis);
}

void Concat(Exporter& x) {
  std::vector<std::string> ins;
  for (size_t k = 0; k < x.node().inputs.size(); ++k) ins.push_back(x.In(static_cast<int>(k)));
  SetInt(x.Add("Concat", ins), "axis", x.params<ConcatParams>().dim);
}

void AddN(Exporter& x) {
  std::vector<std::string> ins;
  for (size_t k = 0; k < x.node().inputs.size(); ++k) ins.push_back(x.In(static_cast<int>(k)));
  x.Add("Sum", ins);
}

void Transpose(Exporter& x) {
  const int64_t nd = x.InShape(0).ndim();
  std::vector<int64_t> perm = x.params<TransposeParams>().axes;
  if (perm.empty()) {  // reversed
    perm.resize(nd);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  for (int64_t& d : perm) d = d < 0 ? d + nd : d;  // ONNX's perm counts from 0
  SetInts(x.Add("Transpose", {x.In(0)}), "perm", perm);
}

void LayerNorm(Exporter& x) {
  const auto& p = x.params<LayerNormParams>();
  std::vector<std::string> ins = {x.In(0), x.In(1)};
  if (!p.no_bias) ins.push_back(x.In(2));
  onnx::NodeProto* n = x.Add("LayerNormalization", ins);
  SetInt(n, "axis", p.axis);
  SetFloat(n, "epsilon", p.eps);
}

// embedding: the weight's rows at the indices, which frugal holds as floats
// and Gather reads as integers (a Cast truncates; frugal refuses indices
// that are not whole numbers).
void Embedding(Exporter& x) {
  onnx::NodeProto* cast = x.Add("Cast", {x.In(0)}, "indices");
  SetInt(cast, "to", onnx::TensorProto::INT64);
  x.Add("Gather", {x.In(1), cast->output(0)});
}

// split: num_outputs equal parts, each Squeezed on the axis with squeeze_axis.
void Split(Exporter& x) {
  const auto& p = x.params<SplitParams>();
  std::vector<std::string> parts;
  for (int k = 0; k < p.num_outputs; ++k)
    parts.push_back(p.squeeze_axis ? x.Temp("part" + std::to_string(k)) : x.Out(k));
  SetInt(x.AddNamed("Split", {x.In(0)}, parts), "axis", p.axis);
  if (!p.squeeze_axis) return;
  const std::string axes = x.Ints("axes", {p.axis});
  for (int k = 0; k < p.num_outputs; ++k) x.AddNamed("Squeeze", {parts[k], axes}, {x.Out(k)});
}

// One LSTM step, lstm_cell's arithmetic: a = i2h + h2h cut into the in,
// forget, transform and out gates; c = f c_prev + i g into c_out, h =
// o tanh(c) into h_out. Intermediate values are named with `step`.
void CellStep(Exporter& x, const std::string& i2h, const std::string& h2h, const std::string& c_prev,
              const std::string& step, const std::string& h_out, const std::string& c_out) {
  auto temp = [&](const char* what) { return std::string(what) + step; };
  const std::vector<std::string> a = {x.Temp(temp("a_i")), x.Temp(temp("a_f")), x.Temp(temp("a_g")),
                                      x.Temp(temp("a_o"))};
  SetInt(x.AddNamed("Split", {x.Add("Add", {i2h, h2h}, temp("a"))->output(0)}, a), "axis", 1);
  const std::string i = x.Add("Sigmoid", {a[0]}, temp("i"))->output(0);
  const std::string f = x.Add("Sigmoid", {a[1]}, temp("f"))->output(0);
  const std::string g = x.Add("Tanh", {a[2]}, temp("g"))->output(0);
  const std::string o = x.Add("Sigmoid", {a[3]}, temp("o"))->output(0);
  const std::string fc = x.Add("Mul", {f, c_prev}, temp("f_c_prev"))->output(0);
  const std::string ig = x.Add("Mul", {i, g}, temp("i_g"))->output(0);
  const std::string c = x.AddNamed("Add", {fc, ig}, {c_out})->output(0);
  x.AddNamed("Mul", {o, x.Add("Tanh", {c}, temp("tanh_c"))->output(0)}, {h_out});
}

// lstm_cell (src/ops/lstm_cell.cc): one step; h and c its outputs 0 and 1.
// The gates (output 2) are the backward pass's, not exported.
void LstmCell(Exporter& x) { CellStep(x, x.In(0), x.In(1), x.In(2), "", x.Out(0), x.Out(1)); }

// lstm (src/ops/lstm.cc), unrolled as lstm_cell is exported: per step t,
// x_t (Slice, Squeeze) and h_{t-1} each through Gemm(transB=1) with its
// weight and bias, then the cell; y and cs (outputs 0 and 1) are the steps'
// h and c stacked on axis 1 (Unsqueeze, Concat). A (B, T', H) state input,
// a previous run's y or cs, is its last step. The gates (output 2) are the
// backward pass's, not exported.
void Lstm(Exporter& x) {
  const std::string axis1 = x.Ints("axis1", {1});
  auto step_of = [&](int k, int64_t t, const std::string& name) {  // input k's step t, (B, features)
    const std::string s = std::to_string(t);
    const std::string at =
        x.Add("Slice", {x.In(k), x.Ints(name + "_begin", {t}), x.Ints(name + "_end", {t + 1}), axis1}, name + "_at")
            ->output(0);
    return x.Add("Squeeze", {at, axis1}, name)->output(0);
  };
  auto state = [&](int k, const std::string& name) {
    const Shape& s = x.InShape(k);
    return s.ndim() == 2 ? x.In(k) : step_of(k, s[1] - 1, name);
  };
  std::string h = state(1, "state_h"), c = state(2, "state_c");
  std::vector<std::string> hs, cs;
  for (int64_t t = 0; t < x.InShape(0)[1]; ++t) {
    const std::string s = std::to_string(t);
    onnx::NodeProto* i2h = x.Add("Gemm", {step_of(0, t, "x" + s), x.In(3), x.In(4)}, "i2h" + s);
    onnx::NodeProto* h2h = x.Add("Gemm", {h, x.In(5), x.In(6)}, "h2h" + s);
    SetInt(i2h, "transB", 1);
    SetInt(h2h, "transB", 1);
    CellStep(x, i2h->output(0), h2h->output(0), c, s, x.Temp("h" + s), x.Temp("c" + s));
    h = x.Temp("h" + s), c = x.Temp("c" + s);
    hs.push_back(x.Add("Unsqueeze", {h, axis1}, "y" + s)->output(0));
    cs.push_back(x.Add("Unsqueeze", {c, axis1}, "cs" + s)->output(0));
  }
  SetInt(x.AddNamed("Concat", hs, {x.Out(0)}), "axis", 1);
  SetInt(x.AddNamed("Concat", cs, {x.Out(1)}), "axis", 1);
}

void Clip(Exporter& x) {
  const auto& p = x.params<ClipParams>();
  x.Add("Clip", {x.In(0), x.Floats("min", Shape{}, {p.a_min}), x.Floats("max", Shape{}, {p.a_max})});
}

// gelu (src/ops/elemwise_unary.cc) in the form the node computes:
//   erf:  y = x (1 + erf(x / sqrt 2)) / 2, as PyTorch exports it
//   tanh: y = x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2
void Gelu(Exporter& x) {
  const std::string in = x.In(0);
  std::string t;
  if (!x.params<GeluParams>().tanh) {
    const std::string d = x.Add("Div", {in, x.Floats("sqrt2", Shape{}, {std::sqrt(2.f)})}, "div")->output(0);
    t = x.Add("Erf", {d}, "erf")->output(0);
  } else {
    const std::string x2 = x.Add("Mul", {in, in}, "x2")->output(0);
    const std::string x3 = x.Add("Mul", {x2, in}, "x3")->output(0);
    const std::string c = x.Add("Mul", {x3, x.Floats("c", Shape{}, {0.044715f})}, "cx3")->output(0);
    const std::string u = x.Add("Add", {in, c}, "inner")->output(0);
    const float k = static_cast<float>(std::sqrt(2.0 / M_PI));
    const std::string ku = x.Add("Mul", {u, x.Floats("k", Shape{}, {k})}, "u")->output(0);
    t = x.Add("Tanh", {ku}, "tanh")->output(0);
  }
  const std::string one_plus = x.Add("Add", {t, x.Floats("one", Shape{}, {1.f})}, "one_plus")->output(0);
  const std::string times_x = x.Add("Mul", {in, one_plus}, "times_x")->output(0);
  x.Add("Mul", {times_x, x.Floats("half", Shape{}, {0.5f})});
}

// attention (src/ops/attention.cc) at inference, no dropout:
// y = softmax(scale q k^T [+ mask] [+ causal]) v over the keys, causal a
// (Tq, Tk) constant: 0 where key j <= query i, -inf after.
void Attention(Exporter& x) {
  const auto& p = x.params<AttentionParams>();
  const Shape &q = x.InShape(0), &k = x.InShape(1);
  const int r = q.ndim();
  const int64_t tq = q[r - 2], tk = k[r - 2];
  std::vector<int64_t> perm(r);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[r - 2], perm[r - 1]);
  onnx::NodeProto* kt = x.Add("Transpose", {x.In(1)}, "k_t");
  SetInts(kt, "perm", perm);
  std::string s = x.Add("MatMul", {x.In(0), kt->output(0)}, "qk")->output(0);
  const float scale = p.scale != 0 ? p.scale : 1.f / std::sqrt(static_cast<float>(q[r - 1]));  // the op's
  s = x.Add("Mul", {s, x.Floats("scale", Shape{}, {scale})}, "scores")->output(0);
  if (p.masked) s = x.Add("Add", {s, x.In(3)}, "masked")->output(0);
  if (p.causal) {
    std::vector<float> mask(tq * tk, 0.f);
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = i + 1; j < tk; ++j) mask[i * tk + j] = -std::numeric_limits<float>::infinity();
    s = x.Add("Add", {s, x.Floats("causal_mask", Shape{tq, tk}, mask)}, "causal")->output(0);
  }
  onnx::NodeProto* w = x.Add("Softmax", {s}, "weights");
  SetInt(w, "axis", -1);
  x.Add("MatMul", {w->output(0), x.In(2)});
}

// linear_cross_entropy at inference: the classifier's prediction
// softmax(x W^T + b) over the classes, (N, V), as softmax_cross_entropy's
// Softmax; the op's own output, each row's loss and rank, needs the label.
void LinearCrossEntropy(Exporter& x) {
  onnx::NodeProto* z = x.Add("Gemm", {x.In(0), x.In(2), x.In(3)}, "logits");
  SetInt(z, "transB", 1);
  SetInt(x.Add("Softmax", {z->output(0)}), "axis", -1);
  x.SetOutShape(Shape{x.InShape(0)[0], x.InShape(2)[0]});
}

const std::map<std::string, Rule>& Rules() {
  static const std::map<std::string, Rule> rules = {
      {"abs", Unary("Abs")},
      {"activation", Activation},
      {"add", Binary("Add")},
      {"add_n", AddN},
      {"add_scalar", Scalar("Add", false)},
      {"attention", Attention},
      {"batch_norm", BatchNorm},
      {"block_grad", [](Exporter& x) { x.Alias(0); }},
      {"ceil", Unary("Ceil")},
      {"clip", Clip},
      {"concat", Concat},
      {"convolution", Convolution},
      {"div", Binary("Div")},
      {"div_scalar", Scalar("Div", false)},
      {"dropout", [](Exporter& x) { x.Alias(0); }},
      {"embedding", Embedding},
      {"erf", Unary("Erf")},
      {"exp", Unary("Exp")},
      {"expand_dims", ReshapeTo},
      {"flatten", Flatten},
      {"floor", Unary("Floor")},
      {"fully_connected", FullyConnected},
      {"gelu", Gelu},
      {"identity", [](Exporter& x) { x.Alias(0); }},
      {"layer_norm", LayerNorm},
      {"leaky_relu", LeakyRelu},
      {"linear_cross_entropy", LinearCrossEntropy},
      {"linear_regression_output", [](Exporter& x) { x.Alias(0); }},
      {"log", Unary("Log")},
      {"log_softmax", Softmax},
      {"lstm", Lstm},
      {"lstm_cell", LstmCell},
      {"logistic_regression_output", Unary("Sigmoid")},
      {"maximum", Binary("Max")},
      {"minimum", Binary("Min")},
      {"mul", Binary("Mul")},
      {"mul_scalar", Scalar("Mul", false)},
      {"negative", Unary("Neg")},
      {"pooling", Pooling},
      {"power", Binary("Pow")},
      {"rdiv_scalar", Scalar("Div", true)},
      {"relu", Unary("Relu")},
      {"reshape", ReshapeTo},
      {"rsub_scalar", Scalar("Sub", true)},
      {"softmax", Softmax},
      {"softmax_cross_entropy", [](Exporter& x) { SetInt(x.Add("Softmax", {x.In(0)}), "axis", -1); }},
      {"split", Split},
      {"sqrt", Unary("Sqrt")},
      {"sub", Binary("Sub")},
      {"sub_scalar", Scalar("Sub", false)},
      {"transpose", Transpose},
  };
  return rules;
}

}  // namespace

std::vector<std::string> OnnxExportOps() {
  std::vector<std::string> ops;
  for (const auto& [op, rule] : Rules()) ops.push_back(op);
  return ops;
}

onnx::ModelProto ExportOnnx(const Graph& g, const std::map<std::string, Tensor>& values, const std::string& name) {
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.set_producer_name("frugal");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  m.mutable_graph()->set_name(name);
  Exporter(g, values, m.mutable_graph()).Run();
  // ONNX's initializers do not say which are learned: the aux state (moving
  // statistics, an RNN's initial state) is named, so import-onnx makes it
  // aux again and the checkpoint it writes is the trained config's.
  std::set<std::string> initializers;
  for (const auto& t : m.graph().initializer()) initializers.insert(t.name());
  std::string aux;
  for (const Node& n : g.nodes())
    if (n.var == VarKind::kAux && initializers.count(n.name)) aux += (aux.empty() ? "" : ",") + n.name;
  if (aux.empty()) return m;
  onnx::StringStringEntryProto* p = m.add_metadata_props();
  p->set_key("frugal.aux"), p->set_value(aux);
  return m;
}

}  // namespace frugal
