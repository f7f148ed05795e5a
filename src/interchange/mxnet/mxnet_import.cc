// An MXNet symbol written as a frugal config (protobuf text, version 1).
//
// One rule per MXNet operator (aliases included) names the frugal op and
// what becomes of each attribute: kept under its name (the ops take MXNet's
// names and defaults), dropped (a choice of MXNet's kernels: workspace,
// cuDNN), or fixed (frugal computes only that value, e.g. layout NCHW: any
// other is refused). An attribute no rule names is refused, so nothing is
// silently lost.
//
// Variables: those with an array in the params file are weights. A weight
// read only by one node, in one of its op's trailing weight slots, is left
// out of the config; BuildGraph makes it as "<node>_<input>", the name its
// value gets (MXNet's own convention: fc1_weight, bn_moving_mean). Any other
// weight (an LSTM's, shared by the time steps) is a `variable` node. The
// other variables are the data input, the label and zero states.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "frugal/config.h"
#include "frugal/graph.h"
#include "frugal/mxnet.h"
#include "frugal/op.h"
#include "frugal/passes/shapes.h"
#include "interchange/config_text.h"
#include "interchange/mxnet/mxnet_lower.h"

namespace frugal {
// The importer's own names, apart from the ONNX importer's (a unity build
// compiles the interchange folder's files together).
namespace mxnet_import {
namespace {

using Fixed = std::vector<std::pair<const char*, const char*>>;
// Special cases: may change the op and attributes after the generic rule.
using Adjust = void (*)(const AttrMap& mx, std::string* op, AttrMap* attrs);

struct OpRule {
  const char* mx;
  const char* frugal;
  const char* keep = "";  // attributes frugal's op takes under the same name, space-separated
  const char* drop = "";  // attributes without effect on the result (or that `adjust` reads)
  Fixed fixed = {};       // attribute and the one value frugal computes (spellings separated by '|')
  Adjust adjust = nullptr;
};

std::string Get(const AttrMap& m, const std::string& key, const std::string& dflt = "") {
  auto it = m.find(key);
  return it == m.end() ? dflt : it->second;
}

// Activation(relu) is frugal's relu (which FuseBnRelu folds into a
// batch_norm before it); the others are activation's.
void ActivationAdjust(const AttrMap&, std::string* op, AttrMap* attrs) {
  if (Get(*attrs, "act_type") != "relu") return;
  *op = "relu";
  attrs->erase("act_type");
}

// SoftmaxOutput's normalization "null" leaves the division by the batch to
// the optimizer (Module.fit's rescale_grad = 1/batch); frugal's optimizers
// take the gradient as it is, so the loss divides by the batch: "batch".
void SoftmaxAdjust(const AttrMap& mx, std::string*, AttrMap* attrs) {
  if (Get(mx, "use_ignore") == "true") (*attrs)["ignore_label"] = Get(mx, "ignore_label", "-1");
  if (Get(mx, "normalization") == "valid") (*attrs)["normalization"] = "valid";
}

// SoftmaxActivation's modes as softmax's axis: channel, over dim 1;
// instance (the default), over all but the batch, which softmax's last axis
// is on the 2-D inputs it takes (CheckShapes requires them).
void SoftmaxActivationAdjust(const AttrMap& mx, std::string*, AttrMap* attrs) {
  (*attrs)["axis"] = Get(mx, "mode", "instance") == "channel" ? "1" : "-1";
}

// The integers of a tuple as MXNet writes it: "(0, 200)", "(32L, 200L)"
// (Python 2), "[2]"; false when there is anything else.
bool ParseDims(std::string s, std::vector<int64_t>* dims) {
  for (char& c : s)
    if (std::string("()[],L").find(c) != std::string::npos) c = ' ';
  std::istringstream in(s);
  for (long long d; in >> d;) dims->push_back(d);
  return in.eof();
}

// Reshape's older target_shape infers the dim given as 0 (as shape's -1);
// what is not a tuple is left to reshape to refuse.
void ReshapeAdjust(const AttrMap& mx, std::string*, AttrMap* attrs) {
  const std::string target = Get(mx, "target_shape");
  if (target.empty() || attrs->count("shape")) return;
  std::vector<int64_t> dims;
  if (!ParseDims(target, &dims)) {
    (*attrs)["shape"] = target;
    return;
  }
  for (int64_t& d : dims) d = d == 0 ? -1 : d;
  (*attrs)["shape"] = interchange::DimsText(dims);
}

const std::vector<OpRule>& Rules() {
  static const char* kConv = "kernel stride dilate pad num_filter num_group no_bias";
  static const char* kPool = "pool_type global_pool kernel stride pad pooling_convention count_include_pad";
  static const Fixed kSoftmaxFixed = {
      {"multi_output", "false"}, {"preserve_shape", "false"}, {"out_grad", "false"}, {"smooth_alpha", "0|0.0"}};
  static const std::vector<OpRule> rules = {
      {"Convolution", "convolution", kConv, "workspace cudnn_tune cudnn_off", {{"layout", "NCHW"}}},
      {"BatchNorm",
       "batch_norm",
       "eps momentum fix_gamma use_global_stats",
       "cudnn_off",
       {{"axis", "1|-3"}, {"output_mean_var", "false"}}},
      {"Activation", "activation", "act_type", "", {}, ActivationAdjust},
      {"LeakyReLU", "leaky_relu", "act_type slope", "lower_bound upper_bound"},
      {"Pooling", "pooling", kPool, "cudnn_off p_value", {{"layout", "NCHW"}}},
      {"FullyConnected", "fully_connected", "num_hidden no_bias flatten"},
      {"Flatten", "flatten"},
      {"Concat", "concat", "num_args dim"},
      {"elemwise_add", "add_n"},
      {"_plus", "add_n"},
      {"_Plus", "add_n"},
      {"_add", "add_n"},
      {"ElementWiseSum", "add_n", "num_args"},
      {"add_n", "add_n", "num_args"},
      {"broadcast_add", "add"},
      {"elemwise_sub", "sub"},
      {"_minus", "sub"},
      {"_Minus", "sub"},
      {"broadcast_sub", "sub"},
      {"elemwise_mul", "mul"},
      {"_mul", "mul"},
      {"_Mul", "mul"},
      {"broadcast_mul", "mul"},
      {"elemwise_div", "div"},
      {"_div", "div"},
      {"_Div", "div"},
      {"broadcast_div", "div"},
      {"Dropout", "dropout", "p", "cudnn_off", {{"mode", "training"}, {"axes", "()"}}},
      {"SliceChannel", "split", "num_outputs axis squeeze_axis"},
      {"split", "split", "num_outputs axis squeeze_axis"},
      {"Embedding", "embedding", "input_dim output_dim", "", {{"dtype", "float32"}, {"sparse_grad", "false"}}},
      {"Reshape", "reshape", "shape", "target_shape", {{"reverse", "false"}, {"keep_highest", "false"}}, ReshapeAdjust},
      {"transpose", "transpose", "axes"},
      {"square", "square"},
      {"sqrt", "sqrt"},
      {"exp", "exp"},
      {"log", "log"},
      {"_plus_scalar", "add_scalar", "scalar", "is_int"},
      {"_minus_scalar", "sub_scalar", "scalar", "is_int"},
      {"_rminus_scalar", "rsub_scalar", "scalar", "is_int"},
      {"_mul_scalar", "mul_scalar", "scalar", "is_int"},
      {"_div_scalar", "div_scalar", "scalar", "is_int"},
      {"_rdiv_scalar", "rdiv_scalar", "scalar", "is_int"},
      // A fused RNN's layer, as LowerComposites (mxnet_lower.h) writes it.
      {"RNN", "lstm", "num_hidden"},
      {"SoftmaxOutput", "softmax_cross_entropy", "grad_scale", "use_ignore ignore_label normalization", kSoftmaxFixed,
       SoftmaxAdjust},
      {"Softmax", "softmax_cross_entropy", "grad_scale", "use_ignore ignore_label normalization", kSoftmaxFixed,
       SoftmaxAdjust},
      {"SoftmaxActivation", "softmax", "", "mode", {}, SoftmaxActivationAdjust},
      {"softmax", "softmax", "axis", "", {{"temperature", "1|1.0"}, {"use_length", "false|0"}, {"dtype", "float32"}}},
      {"log_softmax",
       "log_softmax",
       "axis",
       "",
       {{"temperature", "1|1.0"}, {"use_length", "false|0"}, {"dtype", "float32"}}},
      {"LinearRegressionOutput", "linear_regression_output", "grad_scale"},
      {"LogisticRegressionOutput", "logistic_regression_output", "grad_scale"},
      {"BlockGrad", "block_grad"},
      {"stop_gradient", "block_grad"},
      {"identity", "identity"},
      {"_copy", "identity"},
  };
  return rules;
}

const OpRule* FindRule(const std::string& op) {
  for (const OpRule& r : Rules())
    if (op == r.mx) return &r;
  return nullptr;
}

// Whether key is one of words, separated by spaces or '|'.
bool Listed(std::string words, const std::string& key) {
  std::replace(words.begin(), words.end(), '|', ' ');
  std::istringstream in(words);
  for (std::string w; in >> w;)
    if (w == key) return true;
  return false;
}

// MXNet's spellings made frugal's: True/False lower case, tuples without spaces.
std::string Normalize(std::string v) {
  if (v == "True" || v == "False") v[0] = static_cast<char>(std::tolower(v[0]));
  if (!v.empty() && (v[0] == '(' || v[0] == '[')) v.erase(std::remove(v.begin(), v.end(), ' '), v.end());
  return v;
}

// The frugal op and attributes of node n (its rule found). Throws Error for
// an attribute frugal cannot express.
std::pair<std::string, AttrMap> Translate(const MxnetNode& n, const OpRule& rule, const std::string& where) {
  AttrMap mx, attrs;
  for (const auto& [key, value] : n.attrs)
    // __lr_mult__, __init__, __shape__, ...: Python's hints; "None": unset.
    if (key.rfind("__", 0) != 0 && value != "None") mx[key] = Normalize(value);
  for (const auto& [key, value] : mx) {
    auto fixed = std::find_if(rule.fixed.begin(), rule.fixed.end(), [&](const auto& f) { return key == f.first; });
    if (fixed != rule.fixed.end()) {
      FRUGAL_REQUIRE(Listed(fixed->second, value), where, ": ", key, " '", value,
                     "' is not supported: frugal computes only ", key, " ", fixed->second);
    } else if (Listed(rule.keep, key)) {
      attrs[key] = value;
    } else {
      FRUGAL_REQUIRE(Listed(rule.drop, key), where, ": attribute '", key, "' = '", value,
                     "' has no frugal counterpart (frugal's ", rule.frugal, " takes ", *rule.keep ? rule.keep : "none",
                     ")");
    }
  }
  std::string op = rule.frugal;
  if (rule.adjust) rule.adjust(mx, &op, &attrs);
  return {op, attrs};
}

enum class Role : uint8_t { kOp, kParam, kAux, kData, kLabel, kState };

// The whole import: roles of the variables, names, and the text.
class Importer {
 public:
  Importer(const MxnetSymbol& sym, const NamedTensors& arrays, const MxnetImportOptions& opts)
      : sym_(sym),
        opts_(opts),
        n_(sym.nodes.size()),
        role_(n_, Role::kOp),
        name_(n_),
        op_(n_),
        params_(n_),
        readers_(n_, 0),
        left_out_(n_, false) {
    for (const auto& [name, t] : arrays) {
      const bool aux = name.rfind("aux:", 0) == 0;
      const bool arg = name.rfind("arg:", 0) == 0;
      arrays_[aux || arg ? name.substr(4) : name] = {t, aux, name};
    }
  }

  MxnetImport Run(const std::string& model_name) {
    TranslateOps();
    Classify();
    CheckShapes();
    CheckFinite();
    NameNodes();
    for (size_t i = 0; i < n_; ++i)
      if (role_[i] == Role::kOp) LeaveOutWeights(static_cast<int>(i));
    StoreMadeWeights();
    std::string nodes;
    for (size_t i = 0; i < n_; ++i) nodes += NodeText(static_cast<int>(i));
    for (const auto& [name, a] : arrays_)
      if (!used_.count(name)) out_.unused.push_back(a.file_name);
    const std::string graph = Header(model_name) + nodes + Outputs();
    out_.config_text = graph + DataSection();
    // A sequence model's label is one class per position (MXNet's bucketing
    // examples give it the data's shape): where one per sample does not
    // infer, a label of the sample's shape that does is written.
    const std::vector<int64_t> shape = DataShape().first;
    if (label_ >= 0 && shape.size() >= 2 && shape[0] > 0 && !Infers(out_.config_text, shape, {})) {
      const std::vector<int64_t> per_position(shape.begin() + 1, shape.end());
      const std::string text = graph + DataSection(per_position);
      if (Infers(text, shape, per_position)) out_.config_text = text;
    }
    return std::move(out_);
  }

 private:
  struct Array {
    Tensor value;
    bool aux = false;
    std::string file_name;  // "arg:fc1_weight"
  };

  // _zeros and _ones (MXNet's mx.sym.zeros, ones: the begin states of
  // mx.rnn's cells) import as constant variables, as zero states do.
  bool Constant(int i) const { return sym_.nodes[i].op == "_zeros" || sym_.nodes[i].op == "_ones"; }
  // A variable of the config: MXNet's (op "null") or a constant.
  bool Variable(int i) const { return sym_.nodes[i].op == "null" || Constant(i); }

  std::string Where(int i) const {
    const MxnetNode& n = sym_.nodes[i];
    return Fmt(sym_.path, ":", n.line, ": node '", n.name, "' (", n.op, ")");
  }

  // Unknown operators are all named at once, before any attribute is read.
  void TranslateOps() {
    RequireKnownOps();
    for (size_t i = 0; i < n_; ++i) {
      const MxnetNode& n = sym_.nodes[i];
      if (Variable(static_cast<int>(i))) continue;
      op_[i] = Translate(n, *FindRule(n.op), Where(static_cast<int>(i)));
      // The attributes parsed here, so that a bad value names this node and
      // not a line of the config written from it.
      const OpDef& def = OpRegistry::Get().Require(op_[i].first, [&] { return Where(static_cast<int>(i)); });
      AttrReader reader([&] { return Where(static_cast<int>(i)); }, op_[i].second);
      params_[i] = def.ParseParams(reader);
      for (const auto& in : n.inputs) ++readers_[in.node];
    }
    for (const auto& h : sym_.heads) ++readers_[h.node];
  }

  void RequireKnownOps() const {
    std::vector<std::string> unknown;
    std::set<std::string> ops;
    for (size_t i = 0; i < n_; ++i) {
      const MxnetNode& n = sym_.nodes[i];
      if (Variable(static_cast<int>(i)) || FindRule(n.op)) continue;
      unknown.push_back(Fmt("'", n.name, "' (", n.op, ")"));
      ops.insert(n.op);
    }
    std::string list;
    for (size_t k = 0; k < unknown.size() && k < 8; ++k) list += (k ? ", " : "") + unknown[k];
    if (unknown.size() > 8) list += Fmt(", and ", unknown.size() - 8, " more");
    std::string names;
    for (const std::string& op : ops) names += (names.empty() ? "" : ", ") + op;
    FRUGAL_REQUIRE(unknown.empty(), sym_.path, ": ", unknown.size(),
                   " node(s) use MXNet operators frugal does not import (", names, "): ", list,
                   "; `frugal import-mxnet` maps the operators of MXNet's ResNet, Inception-BN, VGG, LeNet/MLP and ",
                   "LSTM examples, of mx.rnn's LSTM cells and of the fused RNN in LSTM mode (mx.sym.RNN, ",
                   "gluon.rnn.LSTM)");
  }

  // Variables: weights (an array names them), then the input named "data",
  // then labels (names ending in "label"), zero states (with __shape__) and
  // the data input if no variable is named "data".
  void Classify() {
    std::vector<int> rest;
    for (size_t i = 0; i < n_; ++i) {
      const MxnetNode& n = sym_.nodes[i];
      if (Constant(static_cast<int>(i))) {
        FRUGAL_REQUIRE(n.inputs.empty(), Where(static_cast<int>(i)), ": reads ", n.inputs.size(),
                       " inputs; a constant takes none");
        role_[i] = Role::kState;
        continue;
      }
      if (n.op != "null") continue;
      auto a = arrays_.find(n.name);
      if (a != arrays_.end()) {
        role_[i] = a->second.aux ? Role::kAux : Role::kParam;
        used_.insert(n.name);
      } else if (n.name == "data") {
        SetInput(static_cast<int>(i), Role::kData, &data_);
      } else {
        rest.push_back(static_cast<int>(i));
      }
    }
    for (int i : rest) {
      const std::string& name = sym_.nodes[i].name;
      if (name.size() >= 5 && name.compare(name.size() - 5, 5, "label") == 0) {
        SetInput(i, Role::kLabel, &label_);
      } else if (sym_.nodes[i].attrs.count("__shape__")) {
        role_[i] = Role::kState;
      } else {
        RequireNotAWeight(i);
        SetInput(i, Role::kData, &data_);
      }
    }
  }

  // The data input's shape with the batch first, and where it comes from:
  // the options (--data-shape) or the data node's __shape__; empty if
  // neither gives it.
  std::pair<std::vector<int64_t>, std::string> DataShape() const {
    if (!opts_.data_shape.empty()) return {opts_.data_shape, "--data-shape"};
    if (data_ >= 0) return {ShapeAttr(data_), "its __shape__"};
    return {};
  }

  // "arg:fc1_weight (5,16), arg:fc1_bias (8)": the arrays node i reads.
  std::string ArraysRead(int i) const {
    std::string s;
    for (const auto& in : sym_.nodes[i].inputs) {
      auto a = arrays_.find(sym_.nodes[in.node].name);
      if (role_[in.node] == Role::kParam || role_[in.node] == Role::kAux)
        s += Fmt(s.empty() ? "" : ", ", a->second.file_name, " ", a->second.value.shape());
    }
    return s;
  }

  // Every array against the shape the graph infers from the data shape,
  // node by node with the ops' own shape inference, as MXNet's bind checks
  // them against data_shapes: a mismatch names the node, the arrays it reads
  // and the op's reason (the attribute and the input that set the shape).
  // Invariant after it: every array has the shape its readers need.
  void CheckShapes() const {
    const auto [data, from] = DataShape();
    const bool positive = std::all_of(data.begin(), data.end(), [](int64_t d) { return d > 0; });
    FRUGAL_REQUIRE(data_ < 0 || (data.size() >= 2 && positive), Where(data_), ": the data input has no shape (or ",
                   from, " leaves a dim unknown), so the arrays cannot ",
                   "be checked against the shapes the graph infers; give --data-shape with the batch first, e.g. ",
                   "64,1,28,28 (MXNet's bind takes it as data_shapes)");
    FRUGAL_REQUIRE(data.empty() || data[0] <= INT32_MAX, Where(data_), ": the batch ", data[0], " (from ", from,
                   ") is more than a config's batch_size holds (", INT32_MAX, ")");
    Graph g;
    std::vector<Shape> shapes;  // per entry of g
    std::vector<int> id(n_);
    for (size_t i = 0; i < n_; ++i) {
      const MxnetNode& n = sym_.nodes[i];
      if (Variable(static_cast<int>(i))) {
        id[i] = g.AddVariable(n.name, VarKind::kInput);
        shapes.push_back(role_[i] == Role::kParam || role_[i] == Role::kAux ? arrays_.at(n.name).value.shape()
                         : role_[i] == Role::kState                         ? Shape(StateShape(static_cast<int>(i)))
                         : static_cast<int>(i) == data_                     ? Shape(data)
                                                                            : Shape());
        continue;
      }
      Node node;
      node.name = n.name;
      node.op = &OpRegistry::Get().Require(op_[i].first, [&] { return Where(static_cast<int>(i)); });
      node.attrs = op_[i].second;
      node.params = params_[i];
      FRUGAL_REQUIRE(static_cast<int>(n.inputs.size()) == node.op->NumInputs(node.params), Where(static_cast<int>(i)),
                     ": has ", n.inputs.size(), " inputs but frugal's ", node.op->name(),
                     " with these attributes takes ", node.op->NumInputs(node.params));
      for (const auto& in : n.inputs) {
        FRUGAL_REQUIRE(in.index < g.NumOutputs(id[in.node]), Where(static_cast<int>(i)), ": reads output ", in.index,
                       " of node '", sym_.nodes[in.node].name, "', which has ", g.NumOutputs(id[in.node]));
        node.inputs.push_back({id[in.node], in.index});
      }
      id[i] = g.AddNode(std::move(node));
      if (n.op == "SoftmaxActivation" && Get(n.attrs, "mode", "instance") != "channel") {
        const Shape& x = shapes[g.EntryId(g.node(id[i]).inputs[0])];
        FRUGAL_REQUIRE(!x.known() || x.ndim() == 2, Where(static_cast<int>(i)),
                       ": mode instance takes the softmax over all of an instance's values (the input is ", x,
                       "), which frugal's softmax (over one axis) computes on 2-D inputs only; Flatten the input ",
                       "first, or use mode channel");
      }
      InferNode(g, id[i], static_cast<int>(i), &shapes, Fmt(" (the data shape ", Shape(data), " is from ", from, ")"));
    }
  }

  // Output shapes of graph node k (symbol node i) from its op; the inputs it
  // completes (a label) flow back to their entries. Throws Error naming the
  // symbol node and the arrays it reads.
  void InferNode(const Graph& g, int k, int i, std::vector<Shape>* shapes, const std::string& data_note) const {
    const Node& n = g.node(k);
    std::vector<Shape> in, out(g.NumOutputs(k));
    for (const Entry& e : n.inputs) in.push_back((*shapes)[g.EntryId(e)]);
    const std::string reads = ArraysRead(i);
    const std::string where = Where(i) + (reads.empty() ? "" : " reading " + reads) + ": ";
    // An input not known here derives from the label, whose shape the loss
    // reading it sets: such a node is left to the loss, and its outputs
    // unknown.
    const bool all_known = std::all_of(in.begin(), in.end(), [](const Shape& s) { return s.known(); });
    try {
      ShapeCtx ctx{n, in, out};
      n.op->infer_shape()(ctx);
    } catch (const Error& e) {  // the op's reason, without its own naming of the node
      if (!all_known) {
        shapes->insert(shapes->end(), out.size(), Shape());
        return;
      }
      std::string why = e.what();
      if (why.rfind(n.Where() + ": ", 0) == 0) why = why.substr(n.Where().size() + 2);
      throw Error(where + why + data_note);
    }
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      Shape& s = (*shapes)[g.EntryId(n.inputs[j])];
      FRUGAL_REQUIRE(!s.known() || s == in[j], where, "input ", j, " '", g.node(n.inputs[j].node).name, "' has shape ",
                     s, " but the node needs ", in[j], data_note);
      if (!s.known()) s = in[j];
    }
    for (const Shape& s : out) {
      FRUGAL_REQUIRE(s.known() || !all_known, where, "the shape of an output is not inferred", data_note);
      shapes->push_back(s);
    }
  }

  // No NaN or Inf in the arrays imported, unless the options allow them: a
  // diverged training's weights import without complaint, then fail far
  // from here.
  void CheckFinite() const {
    if (opts_.allow_nonfinite) return;
    for (const auto& [name, a] : arrays_) {
      if (!used_.count(name)) continue;
      const float* x = a.value.f();
      for (int64_t k = 0; k < a.value.size(); ++k)
        FRUGAL_REQUIRE(std::isfinite(x[k]), opts_.params_path.empty() ? "the params file" : opts_.params_path,
                       ": array ", a.file_name, " ", a.value.shape(), " holds ", x[k], " at flat index ", k,
                       " (the first non-finite value); were the weights saved after training ",
                       "diverged? --allow-nonfinite imports them anyway");
    }
  }

  // A variable an op reads in a weight slot needs its array.
  void RequireNotAWeight(int v) const {
    for (size_t i = 0; i < n_; ++i) {
      if (Variable(static_cast<int>(i))) continue;
      const auto& specs = OpRegistry::Get().Require(op_[i].first, [&] { return Where(static_cast<int>(i)); }).inputs();
      const auto& inputs = sym_.nodes[i].inputs;
      for (size_t k = 0; k < inputs.size(); ++k) {
        const InputSpec& spec = specs[std::min(k, specs.size() - 1)];
        FRUGAL_REQUIRE(inputs[k].node != v || spec.made_as == VarKind::kNone, Where(v),
                       ": the params file has no array arg:", sym_.nodes[v].name, " (nor aux:), which node '",
                       sym_.nodes[i].name, "' reads as its ", spec.name,
                       "; give the params file saved with this symbol");
      }
    }
  }

  void SetInput(int i, Role role, int* slot) {
    FRUGAL_REQUIRE(*slot < 0, Where(i), ": a second ", role == Role::kLabel ? "label" : "data", " input (after '",
                   sym_.nodes[*slot].name, "'): a frugal config takes one data input and one label. If it is a ",
                   "weight, the params file lacks arg:", sym_.nodes[i].name, "; if it is an initial state, give it a ",
                   "__shape__ attribute (it becomes zeros)");
    role_[i] = role;
    *slot = i;
  }

  // Config names: MXNet's, with ':' (an output index in a config) and other
  // punctuation made '_', unique.
  void NameNodes() {
    std::set<std::string> taken;
    for (size_t i = 0; i < n_; ++i) {
      std::string s;
      for (char c : sym_.nodes[i].name)
        s += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-' ? c : '_';
      if (s.empty()) s = "node";
      std::string unique = s;
      for (int k = 2; taken.count(unique); ++k) unique = Fmt(s, "_", k);
      taken.insert(unique);
      name_[i] = unique;
    }
  }

  // Marks the trailing weights of op node i that its config node leaves out,
  // and records their values under the names BuildGraph gives them.
  void LeaveOutWeights(int i) {
    const OpDef& def = OpRegistry::Get().Require(op_[i].first, [&] { return Where(i); });
    const auto& specs = def.inputs();
    const auto& inputs = sym_.nodes[i].inputs;
    for (size_t k = inputs.size(); k-- > 0;) {
      const int v = inputs[k].node;
      const InputSpec& spec = specs[std::min(k, specs.size() - 1)];
      const bool weight = role_[v] == Role::kParam || role_[v] == Role::kAux;
      if (!weight || spec.made_as == VarKind::kNone || readers_[v] != 1 ||
          (role_[v] == Role::kAux) != (spec.made_as == VarKind::kAux))
        return;
      left_out_[v] = true;
      made_.emplace_back(name_[i] + "_" + spec.name, v);
      mults_[i] += Multipliers(v, spec.name);
    }
  }

  // A weight's __lr_mult__ and __wd_mult__ (0 freezes a layer when
  // fine-tuning) as its reader's lr_mult / wd_mult for that input.
  std::string Multipliers(int v, const std::string& input) const {
    std::string s;
    for (const char* key : {"lr_mult", "wd_mult"}) {
      auto it = sym_.nodes[v].attrs.find(Fmt("__", key, "__"));
      if (it == sym_.nodes[v].attrs.end()) continue;
      char* end = nullptr;
      const double m = std::strtod(it->second.c_str(), &end);
      FRUGAL_REQUIRE(!it->second.empty() && *end == '\0' && std::isfinite(m), Where(v), ": __", key, "__ '", it->second,
                     "' is not a number");
      s += Fmt(" ", key, " { key: ", QuoteConfigString(input), " value: ", it->second, " }");
    }
    return s;
  }

  // The names BuildGraph gives the weights left out must be free.
  void StoreMadeWeights() {
    std::set<std::string> taken;
    for (size_t i = 0; i < n_; ++i)
      if (!left_out_[i]) taken.insert(name_[i]);
    for (const auto& [name, v] : made_) {
      FRUGAL_REQUIRE(taken.insert(name).second, Where(v), ": BuildGraph would name this weight '", name,
                     "', a name another node has; rename one of them in the symbol");
      Store(name, v);
    }
  }

  void Store(const std::string& name, int v) {
    const Array& a = arrays_.at(sym_.nodes[v].name);
    (a.aux ? out_.aux : out_.params)[name] = a.value;
  }

  std::string Ref(const MxnetNode::Input& in) const {
    return in.index == 0 ? name_[in.node] : Fmt(name_[in.node], ":", in.index);
  }

  std::string NodeText(int i) {
    switch (role_[i]) {
      case Role::kOp: return OpText(i);
      case Role::kParam:
      case Role::kAux: return left_out_[i] || readers_[i] == 0 ? "" : WeightVariable(i);
      case Role::kState: return StateVariable(i);
      default: return "";
    }
  }

  std::string OpText(int i) {
    std::vector<std::string> inputs;
    for (const auto& in : sym_.nodes[i].inputs)
      if (!left_out_[in.node]) inputs.push_back(Ref(in));
    return interchange::OpNodeText(name_[i], op_[i].first, inputs, {op_[i].second.begin(), op_[i].second.end()},
                                   mults_[i]);
  }

  std::string WeightVariable(int i) {
    Store(name_[i], i);
    const Array& a = arrays_.at(sym_.nodes[i].name);
    return interchange::VariableText(name_[i], a.value.shape().dims(), a.aux);
  }

  // An initial state MXNet's examples feed as zeros, or a constant: a
  // variable of that value here, not trained.
  std::string StateVariable(int i) {
    const std::vector<int64_t> dims = StateShape(i);
    const bool one = sym_.nodes[i].op == "_ones";
    Tensor value = Tensor::Empty(Shape(dims), DType::kFloat32, {}, MemKind::kParam);
    value.Fill(one ? 1.f : 0.f);
    out_.aux[name_[i]] = value;
    return interchange::VariableText(name_[i], dims, /*aux=*/true, one ? "one" : "zero");
  }

  // A constant's shape: its shape attribute, whose dim 0 may be 0 (MXNet
  // infers it; mx.rnn's begin states are (0, hidden)): the batch, from the
  // data shape. float32 only.
  std::vector<int64_t> ConstantShape(int i) const {
    const MxnetNode& n = sym_.nodes[i];
    const std::string dtype = Get(n.attrs, "dtype", "float32");
    FRUGAL_REQUIRE(dtype == "float32", Where(i), ": dtype '", dtype, "': frugal imports float32 constants only");
    const std::string text = Get(n.attrs, "shape");
    std::vector<int64_t> dims;
    FRUGAL_REQUIRE(ParseDims(text, &dims) && !dims.empty(), Where(i), ": shape '", text,
                   "' is not a shape like (0, 200)");
    const auto [data, from] = DataShape();
    for (size_t k = 0; k < dims.size(); ++k) {
      FRUGAL_REQUIRE(dims[k] > 0 || (k == 0 && dims[k] == 0), Where(i), ": shape '", text, "' has ", dims[k],
                     " at dim ", k, "; only dim 0 may be 0 (the batch, which MXNet infers)");
      if (dims[k] > 0) continue;
      FRUGAL_REQUIRE(!data.empty(), Where(i), ": shape '", text,
                     "' leaves the batch to be inferred; give --data-shape with the batch first");
      dims[k] = data[0];
    }
    return dims;
  }

  // A zero state's shape: its __shape__, every dim given; a constant's
  // (ConstantShape).
  std::vector<int64_t> StateShape(int i) const {
    if (Constant(i)) return ConstantShape(i);
    const std::vector<int64_t> dims = ShapeAttr(i);
    FRUGAL_REQUIRE(!dims.empty() && std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d > 0; }), Where(i),
                   ": __shape__ '", sym_.nodes[i].attrs.at("__shape__"),
                   "' must give every dim (a zero state's shape)");
    return dims;
  }

  std::vector<int64_t> ShapeAttr(int i) const {
    const MxnetNode& n = sym_.nodes[i];
    auto it = n.attrs.find("__shape__");
    if (it == n.attrs.end()) return {};
    std::vector<int64_t> dims;
    FRUGAL_REQUIRE(ParseDims(it->second, &dims), Where(i), ": __shape__ '", it->second,
                   "' is not a shape like (32, 200)");
    return dims;
  }

  std::string Header(const std::string& model_name) const {
    const int64_t v = sym_.mxnet_version;
    const std::string version = v > 0 ? Fmt("MXNet ", v / 10000, ".", v / 100 % 100, ".", v % 100) : "MXNet";
    return Fmt("# Imported from ", version, " by `frugal import-mxnet`; the weights are in the checkpoint\n",
               "# beside this file, under the parameter names BuildGraph gives (<node>_<input>)\n",
               "# and the variable nodes' names.\nversion: 1\nname: ", QuoteConfigString(model_name), "\n");
  }

  std::string Outputs() const {
    std::string s;
    for (const auto& h : sym_.heads) s += interchange::OutputText(Ref(h));
    return s;
  }

  // Whether a config's graph infers its shapes with data of `shape` (the
  // batch first) and a label of label_dims per sample.
  bool Infers(const std::string& text, const std::vector<int64_t>& shape, std::vector<int64_t> label_dims) const {
    try {
      Graph g = BuildGraph(ParseConfig(text, sym_.path, {}));
      label_dims.insert(label_dims.begin(), shape[0]);
      InferShapes(&g, {{name_[data_], Shape(shape)}, {name_[label_], Shape(label_dims)}});
      return true;
    } catch (const Error&) { return false; }
  }

  std::string DataSection(const std::vector<int64_t>& label_dims = {}) const {
    interchange::DataText d;
    d.note =
        "# The data section is yours: add train { ... } and val { ... } sources (and label_shape\n"
        "# where a label is not one class index per sample).\n";
    if (data_ >= 0) d.data_name = name_[data_];
    if (label_ >= 0) d.label_name = name_[label_];
    const std::vector<int64_t> shape = DataShape().first;
    if (shape.size() >= 2) d.shape = shape;
    d.label_dims = label_dims;
    d.label_why = "one class per position: the per-sample label does not fit the graph";
    return interchange::DataSectionText(d);
  }

  const MxnetSymbol& sym_;
  const MxnetImportOptions& opts_;
  const size_t n_;
  std::map<std::string, Array> arrays_;  // by MXNet variable name
  std::set<std::string> used_;
  std::vector<Role> role_;
  std::vector<std::string> name_;                    // config names
  std::vector<std::pair<std::string, AttrMap>> op_;  // frugal op and attributes of op nodes
  std::vector<std::any> params_;                     // op nodes' attributes as their op parsed them
  std::vector<int> readers_;                         // op inputs and heads reading each node
  std::vector<bool> left_out_;                       // weights BuildGraph makes
  std::vector<std::pair<std::string, int>> made_;    // their names, and the variable
  std::map<int, std::string> mults_;                 // lr_mult and wd_mult of op nodes' left-out weights
  int data_ = -1, label_ = -1;
  MxnetImport out_;
};

}  // namespace
}  // namespace mxnet_import

MxnetImport ImportMxnet(const MxnetSymbol& sym, const NamedTensors& arrays, const std::string& model_name,
                        const MxnetImportOptions& opts) {
  MxnetSymbol lowered = sym;
  NamedTensors lowered_arrays = arrays;
  LowerComposites(&lowered, &lowered_arrays);
  return mxnet_import::Importer(lowered, lowered_arrays, opts).Run(model_name);
}

}  // namespace frugal
