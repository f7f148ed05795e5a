// Shared by the ONNX op table's tests (onnx_map_*test.cc): a node builder,
// value facts, and lowering with a chosen set of frugal ops. Rules are
// called directly, so the tests hold for ops mapped but not registered yet.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "onnx.pb.h"
#include "interchange/onnx/op_table.h"

namespace frugal::onnx_map {

struct NodeBuilder {
  onnx::NodeProto n;
  NodeBuilder(const std::string& op, std::vector<std::string> in, std::vector<std::string> out = {"y"}) {
    n.set_op_type(op);
    for (auto& s : in) n.add_input(s);
    for (auto& s : out) n.add_output(s);
  }
  NodeBuilder& Int(const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
    return *this;
  }
  NodeBuilder& Float(const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(v);
    return *this;
  }
  NodeBuilder& Str(const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
    return *this;
  }
  NodeBuilder& Ints(const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
};

inline ValueFacts Facts(Shape s) { return {s, nullptr, false}; }
inline ValueFacts Known(const OnnxTensor& t, bool init = false) { return {t.shape(), &t, init}; }
inline OnnxTensor IntsTensor(std::vector<int64_t> v) {
  OnnxTensor t;
  t.kind = OnnxTensor::Kind::kInt, t.type_name = "INT64", t.dims = {static_cast<int64_t>(v.size())}, t.i = v;
  return t;
}
inline OnnxTensor FloatTensor(std::vector<int64_t> dims, std::vector<float> v) {
  OnnxTensor t;
  t.kind = OnnxTensor::Kind::kFloat, t.type_name = "FLOAT", t.dims = dims, t.f = v;
  return t;
}

// Lowers with every frugal op available (or only those in `ops`).
inline Lowering Lower(const NodeBuilder& b, int64_t opset, std::vector<ValueFacts> facts,
                      std::vector<std::string> ops = {}) {
  const OpMapping* m = FindMapping(b.n.op_type());
  EXPECT_NE(m, nullptr) << b.n.op_type();
  if (!m) return Unsupported("no mapping");
  facts.resize(b.n.input_size());
  OpAvailableFn avail = [ops](const std::string& op) {
    return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  return m->rule(NodeView(b.n, opset, facts, avail));
}

// The single node of a lowering (fails the test otherwise).
inline NewNode Single(const Lowering& l) {
  EXPECT_EQ(l.unsupported, "");
  EXPECT_EQ(l.nodes.size(), 1u);
  return l.nodes.empty() ? NewNode{} : l.nodes[0];
}

// The value a lowering folded (fails the test when it made nodes instead).
inline OnnxTensor Value(const Lowering& l) {
  EXPECT_EQ(l.unsupported, "");
  EXPECT_TRUE(l.nodes.empty());
  EXPECT_TRUE(l.value.has_value());
  return l.value.value_or(OnnxTensor{});
}

// The positions a Take lowering copies (its one constant).
inline std::vector<float> Positions(const Lowering& l) {
  EXPECT_EQ(l.unsupported, "");
  EXPECT_EQ(l.constants.size(), 1u);
  if (l.constants.empty()) return {};
  EXPECT_FALSE(l.constants[0].learned);
  const Tensor& t = l.constants[0].value;
  return std::vector<float>(t.f(), t.f() + t.size());
}

}  // namespace frugal::onnx_map
