// The ONNX importer: walks the graph's nodes in order (ONNX requires
// topological order), lowers each through the op table, and builds the
// frugal forward graph. The compositions of src/interchange/onnx/fuse.cc (frugal's
// exported gelu and attention) are imported as the one node they spell out.
//
// Variables are made when an op first reads a value as a tensor: a graph
// input becomes a data input, an initializer a parameter (or aux state,
// where the op's input is declared so), a Constant node's tensor aux state.
// Values that ops read as attributes (Reshape's shape) never become
// variables. Shapes are tracked node by node with the frugal ops' own shape
// inference, so rules can ask for them.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <sstream>

#include "frugal/op.h"
#include "onnx.pb.h"
#include "interchange/onnx/fuse.h"
#include "interchange/onnx/op_table.h"

namespace frugal {
namespace {

using onnx_map::Lowering;
using onnx_map::MissingRequiredAttr;
using onnx_map::NodeView;
using onnx_map::Operand;
using onnx_map::ValueFacts;

// Names the config can carry: ':' separates an output index there.
std::string Sanitize(const std::string& name) {
  std::string s = name.empty() ? "unnamed" : name;
  for (char& c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/')) c = '_';
  return s;
}

// Every name a graph gives (values, nodes, op types) without control
// characters: a newline in a name would split the one-line errors that
// quote it, and no exporter writes one, so such a file is damaged.
void RequirePrintableNames(const onnx::GraphProto& g) {
  auto check = [](const std::string& name, const std::string& what) {
    for (unsigned char c : name) {
      if (c >= 0x20 && c != 0x7f) continue;
      std::string shown;
      for (unsigned char d : name) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\x%02x", d);
        shown += d >= 0x20 && d != 0x7f ? std::string(1, static_cast<char>(d)) : std::string(hex);
      }
      throw Error(Fmt(what, " is named '", shown, "', with a control character: is the file damaged?"));
    }
  };
  for (const auto& t : g.initializer()) check(t.name(), "an initializer");
  for (const auto& v : g.input()) check(v.name(), "a graph input");
  for (const auto& v : g.output()) check(v.name(), "a graph output");
  for (int k = 0; k < g.node_size(); ++k) {
    const onnx::NodeProto& n = g.node(k);
    const std::string where = Fmt("ONNX node #", k);
    check(n.op_type(), where + "'s op type");
    check(n.name(), where);
    for (const std::string& in : n.input()) check(in, where + "'s input");
    for (const std::string& out : n.output()) check(out, where + "'s output");
  }
}

// The opsets of the default domain the rules know.
constexpr int64_t kMinOpset = 1, kMaxOpset = 23;

// No NaN in a value that becomes a variable, and no Inf either where an op
// reads it in a weight slot (`weight`: the slot declares the variable it
// makes, a convolution's weight, a batch_norm's moving variance): -inf
// elsewhere is how a mask added to scores says "never attend".
void RequireFinite(const Tensor& t, bool weight, const std::string& onnx_name) {
  const float* x = t.f();
  for (int64_t k = 0; k < t.size(); ++k)
    FRUGAL_REQUIRE(weight ? std::isfinite(x[k]) : !std::isnan(x[k]), "initializer '", onnx_name, "' ", t.shape(),
                   " holds ", x[k], " at flat index ", k, " (the first ",
                   weight ? "non-finite value of a weight" : "NaN",
                   "); were the weights saved after training diverged? --allow-nonfinite imports them anyway");
}

struct Value {
  enum Source : uint8_t { kGraphInput, kInitializer, kConstant, kNode } source = kNode;
  ValueFacts facts;
  Entry entry;                      // valid once a graph node holds it
  std::string type_name = "FLOAT";  // the element type ("" for non-tensor types), an alias's too
  bool unavailable = false;         // made by a node that could not be imported
  std::string alias_of;             // Identity: this value is another one
};

class Importer {
 public:
  Importer(const onnx::ModelProto& model, const OnnxImportOptions& opts)
      : model_(model), opts_(opts), available_(opts.op_available ? opts.op_available : onnx_map::Registered) {
    for (const auto& p : model.metadata_props()) {
      if (p.key() != "frugal.aux") continue;
      std::stringstream names(p.value());
      for (std::string name; std::getline(names, name, ',');) aux_.insert(name);
    }
  }
  OnnxImport Run();

 private:
  void AddGraphInputs();
  void ImportNode(const onnx::NodeProto& node);
  void ImportConstant(const onnx::NodeProto& node, const std::string& label);
  void SetConstant(const std::string& onnx_name, OnnxTensor t);
  std::string CheckLowering(const Lowering& low, const onnx::NodeProto& node);
  std::vector<std::any> ParseAll(const Lowering& low, const onnx::NodeProto& node, const std::string& label);
  void Emit(const Lowering& low, const onnx::NodeProto& node, std::vector<std::any> params);
  Entry Resolve(const std::string& onnx_name, VarKind slot_kind);
  Value& Root(const std::string& onnx_name);
  std::string TensorProblem(const std::string& onnx_name, bool whole_numbers = false);
  std::string UniqueName(const std::string& base);
  void InferNode(int id);
  void Report(const onnx::NodeProto& node, const std::string& label, const std::string& why);
  const Shape& ShapeOf(Entry e) const { return shapes_[out_.graph.EntryId(e)]; }

  const onnx::ModelProto& model_;
  const OnnxImportOptions& opts_;
  onnx_map::OpAvailableFn available_;
  std::map<std::string, Value> values_;
  std::deque<OnnxTensor> tensors_;  // decoded initializers and constants (stable addresses)
  std::set<std::string> names_;     // frugal node names in use
  std::set<std::string> aux_;       // initializers frugal's export says are aux state (frugal.aux)
  std::vector<Shape> shapes_;       // per entry, where known
  OnnxImport out_;
};

// The kind a variable gets from the op input that reads it: the op's
// declared kind for omitted inputs (kParam, kAux), or `dflt`.
VarKind SlotKind(const OpDef& op, size_t slot, VarKind dflt) {
  const auto& specs = op.inputs();
  if (specs.empty()) return dflt;
  VarKind k = specs[std::min(slot, specs.size() - 1)].made_as;
  return k == VarKind::kNone ? dflt : k;
}

OnnxImport Importer::Run() {
  const onnx::GraphProto& g = model_.graph();
  RequirePrintableNames(g);
  out_.from_frugal = model_.producer_name() == "frugal";
  for (const auto& op : model_.opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;
    // The rules know the ops' forms from opset 1 to 23 (Attention's): a
    // later opset may change what an op means, and an earlier one is no
    // ONNX model.
    FRUGAL_REQUIRE(op.version() >= kMinOpset && op.version() <= kMaxOpset, "the model imports opset ", op.version(),
                   " of the default ONNX domain; frugal imports opsets ", kMinOpset, " to ", kMaxOpset,
                   " (convert the model with onnx.version_converter)");
    out_.opset = op.version();
  }
  const bool default_nodes = std::any_of(g.node().begin(), g.node().end(), [](const onnx::NodeProto& n) {
    return n.domain().empty() || n.domain() == "ai.onnx";
  });
  if (out_.opset == 0 && default_nodes)  // a graph of ai.onnx.preview.training's ops alone needs none
    out_.unsupported.push_back({g.name(), "(model)", "no opset of the default ONNX domain"});
  for (const auto& t : g.initializer()) {
    FRUGAL_REQUIRE(!t.name().empty(), "an initializer has no name");
    FRUGAL_REQUIRE(!values_.count(t.name()), "two initializers are named '", t.name(),
                   "': an ONNX graph assigns each name once; the file is malformed");
    Value& v = values_[t.name()];
    v.source = Value::kInitializer;
    tensors_.push_back(DecodeOnnxTensor(t, "initializer '" + t.name() + "'"));
    v.facts = {tensors_.back().shape(), &tensors_.back(), true};
    v.type_name = tensors_.back().type_name;
  }
  if (g.sparse_initializer_size() > 0)
    out_.unsupported.push_back({g.name(), "(graph)", "sparse initializers are not supported"});
  AddGraphInputs();
  // ONNX graphs are in single-assignment form: a second writer of a name is
  // a malformed file, not something to import silently.
  std::map<std::string, std::string> writer;
  for (const auto& node : g.node())
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;  // an optional output left out
      const std::string who = Fmt(node.op_type(), " '", node.name(), "'");
      FRUGAL_REQUIRE(!values_.count(out), "'", out, "' is an initializer or graph input and is written by ", who,
                     ": an ONNX graph assigns each name once; the file is malformed");
      const auto [it, first] = writer.emplace(out, who);
      FRUGAL_REQUIRE(first, "'", out, "' is written by two nodes (", it->second, ", ", who,
                     "): an ONNX graph assigns each name once; the file is malformed");
    }
  onnx_map::FusedNodes fused{{}, std::vector<bool>(g.node_size())};
  if (opts_.fuse) fused = onnx_map::FusePatterns(g, out_.opset);
  for (int k = 0; k < g.node_size(); ++k) {
    if (fused.skipped[k]) continue;
    auto f = fused.at.find(k);
    ImportNode(f != fused.at.end() ? f->second : g.node(k));
  }
  for (const auto& o : g.output()) {
    if (!values_.count(o.name())) throw Error(Fmt("graph output '", o.name(), "' is made by no node"));
    if (Root(o.name()).unavailable) continue;
    if (std::string why = TensorProblem(o.name()); !why.empty()) {
      out_.unsupported.push_back({o.name(), "(output)", why});
      continue;
    }
    out_.graph.outputs.push_back(Resolve(o.name(), VarKind::kNone));
    out_.output_names.push_back(o.name());
  }
  for (const auto& in : g.input()) {
    if (values_[in.name()].source != Value::kGraphInput) continue;
    const Value& v = values_[in.name()];
    if (v.entry.valid()) out_.inputs.push_back({in.name(), v.entry.node, v.facts.shape});
  }
  return std::move(out_);
}

void Importer::AddGraphInputs() {
  for (const auto& in : model_.graph().input()) {
    Value& v = values_[in.name()];
    if (v.source == Value::kInitializer) continue;  // old IR lists initializers as inputs
    v.source = Value::kGraphInput;
    const auto& type = in.type();
    if (!type.has_tensor_type()) {
      v.type_name = "";
    } else {
      int et = type.tensor_type().elem_type();
      v.type_name = onnx::TensorProto::DataType_IsValid(et)
                        ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(et))
                        : Fmt("type ", et);
      if (type.tensor_type().has_shape()) {
        std::vector<int64_t> dims;
        bool known = true;
        for (const auto& d : type.tensor_type().shape().dim()) {
          // ONNX's unknown dims are a dim_param or no value; a negative
          // dim_value is neither.
          FRUGAL_REQUIRE(!d.has_dim_value() || d.dim_value() >= 0, "graph input '", in.name(), "': dim ", dims.size(),
                         " is ", d.dim_value(), "; a dim is >= 0, or a dim_param (symbolic), or unset (unknown)");
          const bool batch = dims.empty() && !d.has_dim_value() && opts_.batch > 0;  // a symbolic first dim
          known = known && (batch || (d.has_dim_value() && d.dim_value() >= 0));
          dims.push_back(batch ? opts_.batch : d.dim_value());
        }
        if (known) v.facts.shape = Shape(dims);
      }
    }
    if (auto it = opts_.input_shapes.find(in.name()); it != opts_.input_shapes.end()) v.facts.shape = it->second;
    if (auto it = opts_.known_values.find(in.name()); it != opts_.known_values.end()) {
      v.facts.value = &it->second;
      if (!v.facts.shape.known()) v.facts.shape = it->second.shape();
    }
  }
}

Value& Importer::Root(const std::string& onnx_name) {
  Value* v = &values_.at(onnx_name);
  while (!v->alias_of.empty()) v = &values_.at(v->alias_of);
  return *v;
}

// Why the value cannot be read as a frugal tensor, or "". With
// whole_numbers, integers Cast from a float tensor can (as that tensor).
std::string Importer::TensorProblem(const std::string& onnx_name, bool whole_numbers) {
  const Value& v = Root(onnx_name);
  if (v.type_name.empty()) return Fmt("'", onnx_name, "' is not a tensor (a sequence, map or optional)");
  if (v.type_name != "FLOAT") return Fmt("'", onnx_name, "' is ", v.type_name, "; frugal computes in float32 only");
  const std::string& type = values_.at(onnx_name).type_name;
  if (type != "FLOAT" && !whole_numbers)
    return Fmt("'", onnx_name, "' is float32 cast to ", type, ", which frugal reads only as Gather's indices");
  return "";
}

void Importer::Report(const onnx::NodeProto& node, const std::string& label, const std::string& why) {
  out_.unsupported.push_back({label, node.op_type(), why});
  for (const auto& o : node.output())
    if (!o.empty()) values_[o].unavailable = true;
}

void Importer::ImportNode(const onnx::NodeProto& node) {
  const std::string label = !node.name().empty() ? node.name() : node.output_size() ? node.output(0) : node.op_type();
  std::vector<ValueFacts> facts;
  for (const auto& in : node.input()) {
    if (in.empty()) {
      facts.emplace_back();
      continue;
    }
    FRUGAL_REQUIRE(values_.count(in), "ONNX node '", label, "' (", node.op_type(), "): input '", in,
                   "' is not a graph input, an initializer or the output of an earlier node");
    const Value& v = Root(in);
    if (v.unavailable) {  // an earlier node was not imported: this one is not reported again
      for (const auto& o : node.output())
        if (!o.empty()) values_[o].unavailable = true;
      return;
    }
    facts.push_back(v.facts);
    facts.back().type_name = values_.at(in).type_name;
  }
  if (!node.domain().empty() && node.domain() != "ai.onnx" && node.domain() != "ai.onnx.preview.training")
    return Report(node, label, "domain '" + node.domain() + "' is not supported");
  const std::string missing = MissingRequiredAttr(node, out_.opset);
  FRUGAL_REQUIRE(missing.empty(), "ONNX node '", label, "' (", node.op_type(), "): ", missing);
  if (node.op_type() == "Constant") return ImportConstant(node, label);
  const onnx_map::OpMapping* m = onnx_map::FindMapping(node.op_type());
  if (!m) return Report(node, label, "no mapping to a frugal op");
  Lowering low = m->rule(NodeView(node, out_.opset, facts, available_));
  if (low.unsupported.empty()) low.unsupported = CheckLowering(low, node);
  if (!low.unsupported.empty()) return Report(node, label, low.unsupported);
  if (low.value) return SetConstant(node.output(0), std::move(*low.value));
  Emit(low, node, ParseAll(low, node, label));
}

void Importer::ImportConstant(const onnx::NodeProto& node, const std::string& label) {
  if (node.attribute_size() != 1 || node.output_size() != 1) return Report(node, label, "expected one attribute");
  const auto& a = node.attribute(0);
  const std::map<std::string, int> types = {{"value", onnx::AttributeProto::TENSOR},
                                            {"value_float", onnx::AttributeProto::FLOAT},
                                            {"value_floats", onnx::AttributeProto::FLOATS},
                                            {"value_int", onnx::AttributeProto::INT},
                                            {"value_ints", onnx::AttributeProto::INTS}};
  if (auto it = types.find(a.name()); it != types.end())
    onnx_map::RequireAttrType(a, it->second, Fmt("ONNX node '", label, "' (Constant)"));
  onnx::TensorProto t;
  if (a.name() == "value") {
    t = a.t();
  } else if (a.name() == "value_float") {
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(a.f());
  } else if (a.name() == "value_floats") {
    t.set_data_type(onnx::TensorProto::FLOAT);
    *t.mutable_float_data() = a.floats();
    t.add_dims(a.floats_size());
  } else if (a.name() == "value_int") {
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_int64_data(a.i());
  } else if (a.name() == "value_ints") {
    t.set_data_type(onnx::TensorProto::INT64);
    *t.mutable_int64_data() = a.ints();
    t.add_dims(a.ints_size());
  } else {
    return Report(node, label, "Constant '" + a.name() + "' is not supported");
  }
  SetConstant(node.output(0), DecodeOnnxTensor(t, "Constant '" + label + "'"));
}

// A value known at import: a Constant node's, or one a rule computed.
void Importer::SetConstant(const std::string& onnx_name, OnnxTensor t) {
  tensors_.push_back(std::move(t));
  Value& v = values_[onnx_name];
  v.source = Value::kConstant;
  v.facts = {tensors_.back().shape(), &tensors_.back(), false};
  v.type_name = tensors_.back().type_name;
}

// Why the lowering cannot be emitted (frugal ops missing, inputs that are
// not float32 tensors), or "".
std::string Importer::CheckLowering(const Lowering& low, const onnx::NodeProto& node) {
  for (const auto& n : low.nodes) {
    if (!OpRegistry::Get().Find(n.op)) return Fmt("maps to frugal op '", n.op, "', which is not registered yet");
    if (!available_(n.op)) return Fmt("maps to frugal op '", n.op, "', which the import options leave out");
  }
  std::vector<Operand> used;
  for (const auto& n : low.nodes) used.insert(used.end(), n.inputs.begin(), n.inputs.end());
  if (low.alias) used.push_back({Operand::kInput, low.alias->index, 0, true});  // an alias keeps the type
  for (const Operand& o : used) {
    if (o.kind != Operand::kInput) continue;
    if (o.index >= node.input_size() || node.input(o.index).empty())
      return Fmt("input ", o.index + 1, " is absent, and ", node.op_type(), " needs it");
    if (std::string why = TensorProblem(node.input(o.index), o.whole_numbers); !why.empty()) return why;
  }
  if ((low.alias || low.value) && node.output_size() != 1) return "an alias or a value known at import is one output";
  CHECK(low.alias || low.value || !low.nodes.empty()) << node.op_type() << " rule made no node";
  return "";
}

// Parses every node's attributes up front, so that nothing is emitted for a
// node whose outputs frugal's op does not produce. A bad attribute is a bug
// in the table or the op: an Error naming the ONNX node.
std::vector<std::any> Importer::ParseAll(const Lowering& low, const onnx::NodeProto& node, const std::string& label) {
  std::vector<std::any> params;
  for (const auto& n : low.nodes) {
    const OpDef* op = OpRegistry::Get().Find(n.op);
    AttrReader reader([&] { return Fmt("ONNX node '", label, "' (", node.op_type(), " -> ", n.op, ")"); }, n.attrs);
    params.push_back(op->ParseParams(reader));
  }
  return params;
}

void Importer::Emit(const Lowering& low, const onnx::NodeProto& node, std::vector<std::any> params) {
  const std::string base = Sanitize(node.output_size() && !node.output(0).empty() ? node.output(0) : node.op_type());
  if (low.alias) {
    Value& out = values_[node.output(0)];
    out.alias_of = node.input(low.alias->index);
    out.type_name = low.alias_type.empty() ? values_.at(out.alias_of).type_name : low.alias_type;
    return;
  }
  const OpDef* last_op = OpRegistry::Get().Find(low.nodes.back().op);
  int named = 0;
  for (int k = 0; k < node.output_size(); ++k)
    if (!node.output(k).empty()) named = k + 1;
  const int given = !low.outputs.empty()     ? static_cast<int>(low.outputs.size())
                    : low.hidden_outputs_too ? last_op->NumOutputs(params.back())
                                             : last_op->NumVisibleOutputs(params.back());
  if (named > given) {
    return Report(node, node.name().empty() ? base : node.name(),
                  Fmt(node.op_type(), " has ", named, " outputs; frugal's ", last_op->name(), " gives ", given));
  }
  std::vector<int> made;
  std::vector<Entry> constants(low.constants.size());
  for (size_t k = 0; k < low.nodes.size(); ++k) {
    const auto& nn = low.nodes[k];
    Node n;
    n.op = OpRegistry::Get().Find(nn.op);
    n.name = UniqueName(k + 1 == low.nodes.size() ? base : base + "_" + nn.op);
    n.attrs = nn.attrs;
    n.params = std::move(params[k]);
    for (size_t j = 0; j < nn.inputs.size(); ++j) {
      const Operand& o = nn.inputs[j];
      if (o.kind == Operand::kInput) {
        n.inputs.push_back(Resolve(node.input(o.index), SlotKind(*n.op, j, VarKind::kNone)));
      } else if (o.kind == Operand::kNode) {
        n.inputs.push_back({made[o.index], o.output});
      } else {
        Entry& e = constants[o.index];
        if (!e.valid()) {
          const auto& c = low.constants[o.index];
          std::string name = UniqueName(Sanitize(node.input(c.from_input)) + "_" + c.suffix);
          const VarKind kind = c.learned ? SlotKind(*n.op, j, VarKind::kParam) : VarKind::kAux;
          if (!opts_.allow_nonfinite)
            RequireFinite(c.value, SlotKind(*n.op, j, VarKind::kNone) != VarKind::kNone, node.input(c.from_input));
          e = {out_.graph.AddVariable(name, kind), 0};
          shapes_.push_back(c.value.shape());
          out_.values[name] = c.value;
        }
        n.inputs.push_back(e);
      }
    }
    made.push_back(out_.graph.AddNode(std::move(n)));
    InferNode(made.back());
  }
  for (int k = 0; k < node.output_size(); ++k) {
    if (node.output(k).empty()) continue;
    Value& v = values_[node.output(k)];
    v.source = Value::kNode;
    if (low.outputs.empty()) {
      v.entry = {made.back(), k};
    } else {
      const Operand& o = low.outputs[k];
      CHECK(o.kind == Operand::kNode) << node.op_type() << " rule names an output that is not a node's";
      v.entry = {made[o.index], o.output};
    }
    v.facts.shape = ShapeOf(v.entry);
  }
}

// The entry of an ONNX value read as a tensor, making its variable on first
// use. slot_kind: the reading op's declared kind for that input (kNone: none).
Entry Importer::Resolve(const std::string& onnx_name, VarKind slot_kind) {
  Value& v = Root(onnx_name);
  if (v.entry.valid()) return v.entry;
  CHECK(v.source != Value::kNode) << onnx_name << " has no entry";
  VarKind kind = v.source == Value::kGraphInput                          ? VarKind::kInput
                 : v.source == Value::kConstant || aux_.count(onnx_name) ? VarKind::kAux  // never learned
                 : slot_kind != VarKind::kNone                           ? slot_kind
                                                                         : VarKind::kParam;
  const std::string name = UniqueName(Sanitize(onnx_name));
  v.entry = {out_.graph.AddVariable(name, kind), 0};
  shapes_.push_back(v.facts.shape);
  if (kind != VarKind::kInput) {
    out_.values[name] = ToTensor(*v.facts.value, MemKind::kParam);
    if (!opts_.allow_nonfinite) RequireFinite(out_.values[name], slot_kind != VarKind::kNone, onnx_name);
  }
  return v.entry;
}

std::string Importer::UniqueName(const std::string& base) {
  std::string name = base;
  for (int k = 1; names_.count(name); ++k) name = Fmt(base, "_", k);
  names_.insert(name);
  return name;
}

// Output shapes of node id from its op's shape inference, where every input
// shape is known; left unknown otherwise.
void Importer::InferNode(int id) {
  const Graph& g = out_.graph;
  const Node& n = g.node(id);
  std::vector<Shape> in, out(g.NumOutputs(id));
  bool known = true;
  for (const Entry& e : n.inputs) {
    in.push_back(ShapeOf(e));
    known = known && in.back().known();
  }
  if (known) {
    ShapeCtx ctx{n, in, out};
    n.op->infer_shape()(ctx);
  }
  for (const Shape& s : out) shapes_.push_back(known ? s : Shape());
}

}  // namespace

OnnxImport ImportOnnx(const onnx::ModelProto& model, const OnnxImportOptions& opts) {
  return Importer(model, opts).Run();
}

OnnxImport ImportOnnxFile(const std::string& path, const OnnxImportOptions& opts) {
  onnx::ModelProto m = ReadOnnxModel(path);
  try {
    return ImportOnnx(m, opts);
  } catch (const Error& e) { throw Error(path + ": " + e.what()); }
}

std::string DescribeUnsupported(const std::vector<OnnxUnsupported>& u, size_t max) {
  std::string s;
  for (size_t k = 0; k < u.size() && k < max; ++k)
    s += (k ? "; " : "") + Fmt(u[k].op_type, " '", u[k].node, "': ", u[k].reason);
  if (u.size() > max) s += Fmt("; and ", u.size() - max, " more");
  return s;
}

}  // namespace frugal
