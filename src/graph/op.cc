#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "frugal/op.h"

namespace frugal {

const char* CostName(Cost c) {
  switch (c) {
    case Cost::kFree: return "free";
    case Cost::kCheap: return "cheap";
    case Cost::kExpensive: return "expensive";
  }
  return "?";
}

void InferSameShape(ShapeCtx& c) {
  const Shape* known = nullptr;
  for (const Shape& s : c.in)
    if (s.known()) {
      known = &s;
      break;
    }
  if (!known) c.Fail("cannot infer shapes: no input shape is known");
  Shape s = *known;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.in[i].known()) c.in[i] = s;
    if (c.in[i] != s) {
      c.Fail(Fmt("input ", i, " has shape ", c.in[i], " but input 0 has ", s, " (this op needs equal shapes)"));
    }
  }
  for (Shape& o : c.out) o = s;
}

// ---------------------------------------------------------------- AttrReader

const std::string* AttrReader::Find(const std::string& key) {
  known_.push_back(key);
  auto it = attrs_.find(key);
  return it == attrs_.end() ? nullptr : &it->second;
}

std::string AttrReader::GivenNote() const {
  std::string given;
  for (const auto& [k, v] : attrs_) given += (given.empty() ? "'" : ", '") + k + "'";
  return given.empty() ? "" : "; the node gives " + given;
}

int64_t AttrReader::Int(const std::string& key) {
  const std::string* v = Find(key);
  FRUGAL_REQUIRE(v, where(), ": attribute '", key, "' is required (an integer)", GivenNote());
  return Int(key, 0);
}

int64_t AttrReader::Int(const std::string& key, int64_t dflt) {
  const std::string* v = Find(key);
  if (!v) return dflt;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v->c_str(), &end, 10);
  FRUGAL_REQUIRE(!v->empty() && *end == '\0' && errno == 0, where(), ": attribute '", key,
                 "' must be an integer, got '", *v, "'");
  return x;
}

double AttrReader::Float(const std::string& key, double dflt) {
  const std::string* v = Find(key);
  if (!v) return dflt;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  FRUGAL_REQUIRE(!v->empty() && *end == '\0', where(), ": attribute '", key, "' must be a number, got '", *v, "'");
  return x;
}

bool AttrReader::Bool(const std::string& key, bool dflt) {
  const std::string* v = Find(key);
  if (!v) return dflt;
  if (*v == "true" || *v == "1" || *v == "True") return true;
  if (*v == "false" || *v == "0" || *v == "False") return false;
  throw Error(Fmt(where(), ": attribute '", key, "' must be true or false, got '", *v, "'"));
}

std::string AttrReader::Str(const std::string& key, const std::string& dflt) {
  const std::string* v = Find(key);
  return v ? *v : dflt;
}

std::string AttrReader::Choice(const std::string& key, const std::string& dflt,
                               const std::vector<std::string>& allowed) {
  std::string v = Str(key, dflt);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw Error(Fmt(where(), ": attribute '", key, "' is '", v, "'; expected one of: ", list));
}

std::vector<int64_t> AttrReader::Ints(const std::string& key) {
  const std::string* v = Find(key);
  FRUGAL_REQUIRE(v, where(), ": attribute '", key, "' is required (a list like (2,3,-1))", GivenNote());
  std::string s = *v;
  for (char& c : s)
    if (c == '(' || c == ')' || c == '[' || c == ']' || c == ',') c = ' ';
  std::vector<int64_t> out;
  const char* p = s.c_str();
  while (true) {
    char* end = nullptr;
    long long x = std::strtoll(p, &end, 10);
    if (end == p) break;
    out.push_back(x);
    p = end;
  }
  while (*p == ' ') ++p;
  FRUGAL_REQUIRE(*p == '\0', where(), ": attribute '", key, "' must be a list of integers like (2,3,-1), got '", *v,
                 "'");
  return out;
}

void AttrReader::Finish() const {
  for (const auto& [key, value] : attrs_) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string list;
    for (const auto& k : known_)
      if (list.find("'" + k + "'") == std::string::npos) list += (list.empty() ? "'" : ", '") + k + "'";
    throw Error(Fmt(where(), ": unknown attribute '", key, "'",
                    list.empty() ? " (this op takes no attributes)" : " (known: " + list + ")"));
  }
}

// -------------------------------------------------------------------- OpDef

int OpDef::NumInputs(const std::any& params) const {
  return num_inputs_ ? num_inputs_(params) : static_cast<int>(inputs_.size());
}

int OpDef::NumOutputs(const std::any& params) const {
  return num_outputs_ ? num_outputs_(params) : static_cast<int>(outputs_.size());
}

void OpDef::InferDTypes(DTypeCtx& c) const {
  if (infer_dtype_) return infer_dtype_(c);
  if (c.fwd && c.fwd->op->backward_op() == name_) {  // outputs: the gradients of the forward inputs
    c.out = *c.fwd_in;
    return;
  }
  const DType t = c.in.empty() ? DType::kFloat32 : c.in[0];
  const int visible = NumVisibleOutputs(c.node.params);
  for (size_t k = 1; k < c.in.size(); ++k) {
    const bool param = k < inputs_.size() && inputs_[k].made_as != VarKind::kNone;
    if (!param && c.in[k] != t) {
      throw Error(Fmt(c.node.Where(), ": input ", k, " is ", DTypeName(c.in[k]), " but input 0 is ", DTypeName(t),
                      "; the op takes one element type (insert a cast node)"));
    }
  }
  for (size_t k = 0; k < c.out.size(); ++k) c.out[k] = static_cast<int>(k) < visible ? t : DType::kFloat32;
}

std::any OpDef::ParseParams(AttrReader& r) const {
  std::any p = parse_ ? parse_(r) : std::any();
  r.Finish();
  return p;
}

Node BackwardNode(const Graph& g, const GradCtx& c, const std::string& backward_op) {
  const Node& f = g.node(c.fwd);
  Node b;
  b.name = f.name + "_backward";
  b.op = &OpRegistry::Get().Require(backward_op, [&f] { return f.Where(); });
  b.params = f.params;
  b.attrs = f.attrs;
  b.fwd = c.fwd;
  b.loc = f.loc;
  return b;
}

std::vector<Entry> OpDef::BuildGradient(Graph& g, const GradCtx& c) const {
  CHECK(!no_gradient_) << name_ << " has no gradient";
  if (gradient_) return gradient_(g, c);
  CHECK(!backward_op_.empty()) << name_ << " declares neither a gradient nor a backward op";
  const Node& f = g.node(c.fwd);
  Node b = BackwardNode(g, c, backward_op_);
  for (const BackwardRead& r : backward_reads_) {
    switch (r.kind) {
      case BackwardRead::kInput:  // an optional input the node does not have is skipped
        if (r.index < static_cast<int>(c.inputs.size())) b.inputs.push_back(c.inputs[r.index]);
        break;
      case BackwardRead::kOutput: b.inputs.push_back(c.outputs[r.index]); break;
      case BackwardRead::kOutGrad:
        CHECK(c.out_grads[r.index].valid()) << f.name << ": output " << r.index << " has no gradient";
        b.inputs.push_back(c.out_grads[r.index]);
        break;
    }
  }
  int n_in = NumInputs(f.params);
  CHECK_EQ(b.op->NumOutputs(b.params), n_in) << backward_op_ << " must have one output per input of " << name_;
  int id = g.AddNode(std::move(b));
  std::vector<Entry> grads;
  for (int i = 0; i < n_in; ++i) grads.push_back({id, i});
  return grads;
}

double OpDef::Flops(const Node& n, const std::vector<Shape>& in, const std::vector<Shape>& out) const {
  if (flops_) return flops_(n, in, out);
  double elements = 0;
  for (const Shape& s : out) elements += static_cast<double>(s.Size());
  return elements;
}

void ShapeCtx::Fail(const std::string& message) const { throw Error(Fmt(node.Where(), ": ", message)); }

// ----------------------------------------------------------------- registry

const OpRegistry& OpRegistry::Get() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterOps(r);
    return r;
  }();
  return *registry;
}

OpDef& OpRegistry::Add(const std::string& name) {
  CHECK(ops_.count(name) == 0) << "op " << name << " registered twice";
  auto& slot = ops_[name];
  slot = std::make_unique<OpDef>(name);
  return *slot;
}

OpDef& OpRegistry::Existing(const std::string& name) {
  auto it = ops_.find(name);
  CHECK(it != ops_.end()) << "CUDA kernel for op " << name << ", which is not registered";
  return *it->second;
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::Require(const std::string& name, const std::function<std::string()>& where) const {
  if (const OpDef* op = Find(name)) return *op;
  std::vector<std::string> names;
  for (const auto& [n, op] : ops_)
    if (n[0] != '_') names.push_back(n);  // backward ops are not for configs
  const std::string best = Nearest(name, names);
  throw Error(Fmt(where(), ": unknown op '", name, "'",
                  best.empty() ? " (run 'frugal ops' for the list)" : " (did you mean '" + best + "'?)"));
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> all;
  for (const auto& [n, op] : ops_) all.push_back(op.get());
  return all;
}

}  // namespace frugal
