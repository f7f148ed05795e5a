// Compositions of standard ONNX ops that import as one frugal op: the forms
// frugal's exporter (src/interchange/onnx/exporter.cc) writes for ops that opset 17 does
// not have, so that an exported model imports back into the same ops and
// computes the same bits.
//   Gelu:       Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5), as PyTorch
//               exports it too (Add and Mul operands in either order)
//   Attention:  MatMul(Softmax(S, axis -1), v) with
//               S = Scores [+ mask] [+ causal], either Add order,
//               Scores = Mul(MatMul(q, Transpose(k, perm (0,1,3,2))), scale),
//               causal a (Tq, Tk) constant of 0 where j <= i, -inf after
// A pattern's inner values must have exactly one reader (the next node of
// the pattern) and be no graph output, so nothing else sees them. The fused
// node is the standard op the composition spells out (Gelu of opset 20,
// Attention of opset 23, whose rules in op_table.cc import them), put in
// place of the pattern's last node.
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "frugal/onnx.h"
#include "interchange/onnx/fuse.h"

namespace frugal::onnx_map {
namespace {

class Matcher {
 public:
  Matcher(const onnx::GraphProto& g, int64_t opset) : g_(g), opset_(opset), out_{{}, std::vector<bool>(g.node_size())} {
    for (const auto& t : g.initializer()) constants_[t.name()] = &t;
    for (int k = 0; k < g.node_size(); ++k) {
      const onnx::NodeProto& n = g.node(k);
      for (const std::string& out : n.output()) producer_[out] = k;
      for (const std::string& in : n.input()) ++readers_[in];
      if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).name() == "value")
        constants_[n.output(0)] = &n.attribute(0).t();
    }
    for (const auto& o : g.output()) ++readers_[o.name()];
  }

  FusedNodes Run() {
    for (int k = 0; k < g_.node_size(); ++k) {
      const std::string& op = g_.node(k).op_type();
      if (out_.skipped[k]) continue;
      if (op == "Mul") Gelu(k);
      if (op == "MatMul") Attention(k);
    }
    return std::move(out_);
  }

 private:
  // The node that writes `value` if it is of this type, in the default
  // domain, not in another pattern, and `value` is its only output read, by
  // one node; else -1.
  int Inner(const std::string& value, const char* op_type) const {
    auto p = producer_.find(value);
    if (p == producer_.end() || out_.skipped[p->second] || readers_.at(value) != 1) return -1;
    const onnx::NodeProto& n = g_.node(p->second);
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    return default_domain && n.op_type() == op_type && n.output_size() == 1 ? p->second : -1;
  }

  // A float constant's values (an initializer or a Constant node's), or nullopt.
  std::optional<OnnxTensor> Floats(const std::string& value) const {
    auto c = constants_.find(value);
    if (c == constants_.end() || c->second->data_type() != onnx::TensorProto::FLOAT) return std::nullopt;
    OnnxTensor t = DecodeOnnxTensor(*c->second, "'" + value + "'");
    return t.kind == OnnxTensor::Kind::kFloat ? std::optional<OnnxTensor>(std::move(t)) : std::nullopt;
  }

  // Whether `value` is a constant holding the single float v (to within tol).
  bool IsScalar(const std::string& value, float v, float tol = 0) const {
    const auto t = Floats(value);
    return t && t->f.size() == 1 && std::fabs(t->f[0] - v) <= tol;
  }

  // Of a binary node's two inputs, the one that is not the constant `is`
  // accepts: its index, or -1.
  template <typename Pred>
  int OtherThan(const onnx::NodeProto& n, Pred is) const {
    if (n.input_size() != 2) return -1;
    if (is(n.input(1))) return 0;
    return is(n.input(0)) ? 1 : -1;
  }

  void Fuse(int last, onnx::NodeProto node, const std::vector<int>& inner) {
    node.set_name(g_.node(last).name());
    node.add_output(g_.node(last).output(0));
    for (int k : inner) out_.skipped[k] = true;
    out_.at[last] = std::move(node);
  }

  void Gelu(int y) {
    const onnx::NodeProto& half = g_.node(y);
    const int hi = OtherThan(half, [&](const std::string& v) { return IsScalar(v, 0.5f); });
    const int m = hi < 0 ? -1 : Inner(half.input(hi), "Mul");
    if (m < 0 || g_.node(m).input_size() != 2) return;
    for (int xi = 0; xi < 2; ++xi) {  // Mul(x, Add(...)) or Mul(Add(...), x)
      const std::string& x = g_.node(m).input(xi);
      const int a = Inner(g_.node(m).input(1 - xi), "Add");
      const int ai = a < 0 ? -1 : OtherThan(g_.node(a), [&](const std::string& v) { return IsScalar(v, 1.f); });
      const int e = ai < 0 ? -1 : Inner(g_.node(a).input(ai), "Erf");
      const int d = e < 0 ? -1 : Inner(g_.node(e).input(0), "Div");
      if (d < 0) continue;
      const onnx::NodeProto& div = g_.node(d);
      if (div.input_size() != 2 || div.input(0) != x || !IsScalar(div.input(1), std::sqrt(2.f), 1e-6f)) continue;
      onnx::NodeProto gelu;
      gelu.set_op_type("Gelu");
      gelu.add_input(x);
      return Fuse(y, std::move(gelu), {m, a, e, d});
    }
  }

  // Whether `value` is the causal (Tq, Tk) constant: 0 where j <= i, -inf after.
  bool IsCausal(const std::string& value) const {
    const auto t = Floats(value);
    if (!t || t->dims.size() != 2) return false;
    const int64_t tq = t->dims[0], tk = t->dims[1];
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        if (t->f[i * tk + j] != (j > i ? -std::numeric_limits<float>::infinity() : 0.f)) return false;
    return true;
  }

  void Attention(int y) {
    const onnx::NodeProto& out = g_.node(y);
    const int sm = out.input_size() == 2 ? Inner(out.input(0), "Softmax") : -1;
    if (sm < 0) return;
    const onnx::NodeProto& softmax = g_.node(sm);
    for (const auto& a : softmax.attribute())
      if (a.name() != "axis" || a.i() != -1) return;
    if (softmax.attribute_size() == 0 && opset_ < 13) return;  // before 13, over all axes from 1
    std::vector<int> inner = {sm};
    std::string s = softmax.input(0), mask;
    bool causal = false;
    for (int add; (add = Inner(s, "Add")) >= 0;) {  // the masks, the scores' chain on the other side
      const onnx::NodeProto& n = g_.node(add);
      if (n.input_size() != 2) return;
      const int chain = Inner(n.input(0), "Mul") >= 0 || Inner(n.input(0), "Add") >= 0 ? 0 : 1;
      const std::string& m = n.input(1 - chain);
      if (!causal && IsCausal(m)) {
        causal = true;
      } else if (mask.empty()) {
        mask = m;
      } else {
        return;
      }
      inner.push_back(add);
      s = n.input(chain);
    }
    const int mul = Inner(s, "Mul");
    if (mul < 0) return;
    const int si = OtherThan(g_.node(mul), [&](const std::string& v) {
      const auto t = Floats(v);
      return t && t->f.size() == 1;
    });
    const int qk = si < 0 ? -1 : Inner(g_.node(mul).input(si), "MatMul");
    const int kt = qk < 0 || g_.node(qk).input_size() != 2 ? -1 : Inner(g_.node(qk).input(1), "Transpose");
    if (kt < 0) return;
    const onnx::NodeProto& t = g_.node(kt);
    if (t.attribute_size() != 1 || t.attribute(0).name() != "perm") return;
    const auto& perm = t.attribute(0).ints();
    if (perm.size() != 4 || perm[0] != 0 || perm[1] != 1 || perm[2] != 3 || perm[3] != 2) return;
    onnx::NodeProto attention;
    attention.set_op_type("Attention");
    for (const std::string& in : {g_.node(qk).input(0), t.input(0), out.input(1), mask}) attention.add_input(in);
    if (mask.empty()) attention.mutable_input()->RemoveLast();
    auto* a = attention.add_attribute();
    a->set_name("is_causal"), a->set_type(onnx::AttributeProto::INT), a->set_i(causal);
    a = attention.add_attribute();
    a->set_name("scale"), a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(Floats(g_.node(mul).input(1 - si))->f[0]);
    inner.insert(inner.end(), {mul, qk, kt});
    Fuse(y, std::move(attention), inner);
  }

  const onnx::GraphProto& g_;
  int64_t opset_;
  std::map<std::string, const onnx::TensorProto*> constants_;
  std::map<std::string, int> producer_;  // value -> the node writing it
  std::map<std::string, int> readers_;   // value -> node inputs and graph outputs reading it
  FusedNodes out_;
};

}  // namespace

FusedNodes FusePatterns(const onnx::GraphProto& g, int64_t opset) { return Matcher(g, opset).Run(); }

}  // namespace frugal::onnx_map
