// The ONNX importer on models built here with the generated onnx.proto
// classes: variables and their kinds, values, unsupported detection, and
// `frugal import-onnx` round trips (config + checkpoint loaded back and run).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/onnx.h"
#include "onnx.pb.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// A model under construction.
struct ModelBuilder {
  onnx::ModelProto m;
  explicit ModelBuilder(int64_t opset = 13) {
    m.set_ir_version(7);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  void Value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
             std::vector<int64_t> dims, int type) {
    auto* v = list->Add();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void Input(const std::string& name, std::vector<int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    Value(g()->mutable_input(), name, dims, type);
  }
  void Output(const std::string& name, std::vector<int64_t> dims = {}) {
    Value(g()->mutable_output(), name, dims, onnx::TensorProto::FLOAT);
  }
  void Init(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g()->add_node();
    n->set_op_type(op);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
  }
};

std::vector<float> Ramp(int64_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = std::sin(scale * k + offset);
  return v;
}

// x (2,3,2) -> Flatten -> Gemm(W1 (6,5) initializer, transB=0; b1 (5)) -> Relu
//   -> Gemm(W2 (3,5), transB=1; c2 (1,3)) -> y (2,3)
struct Mlp {
  std::vector<float> w1 = Ramp(30, 0.7f, 0.1f), b1 = Ramp(5, 1.3f, 0.2f), w2 = Ramp(15, 0.9f, 0.3f),
                     c2 = Ramp(3, 2.1f, 0.4f), x = Ramp(12, 0.5f, 0.0f);
  ModelBuilder b;
  Mlp() {
    b.Input("x:0", {2, 3, 2});  // a name a config cannot carry as is
    b.Init("W1", {6, 5}, w1);
    b.Init("b1", {5}, b1);
    b.Init("W2", {3, 5}, w2);
    b.Init("c2", {1, 3}, c2);
    b.Node("Flatten", {"x:0"}, {"flat"});
    b.Node("Gemm", {"flat", "W1", "b1"}, {"h"});
    b.Node("Relu", {"h"}, {"r"});
    ModelBuilder::IntAttr(b.Node("Gemm", {"r", "W2", "c2"}, {"y"}), "transB", 1);
    b.Output("y", {2, 3});
  }
  // y computed the obvious way, in double.
  std::vector<float> Expected() const {
    std::vector<float> y(6);
    for (int i = 0; i < 2; ++i) {
      double h[5];
      for (int j = 0; j < 5; ++j) {
        double s = b1[j];
        for (int k = 0; k < 6; ++k) s += static_cast<double>(x[i * 6 + k]) * w1[k * 5 + j];
        h[j] = std::max(s, 0.0);
      }
      for (int j = 0; j < 3; ++j) {
        double s = c2[j];
        for (int k = 0; k < 5; ++k) s += h[k] * w2[j * 5 + k];
        y[i * 3 + j] = static_cast<float>(s);
      }
    }
    return y;
  }
};

// Runs a forward graph on the given variables; returns output 0.
std::vector<float> RunGraph(Graph g, const std::map<std::string, Tensor>& vars) {
  const Tensor y = RunForward(std::move(g), vars)[0];
  return std::vector<float>(y.f(), y.f() + y.size());
}

Tensor FromVector(Shape s, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(s);
  std::copy(v.begin(), v.end(), t.f());
  return t;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5 + 1e-4 * std::fabs(want[k])) << k;
}

TEST(OnnxImport, MlpVariablesKindsAndValues) {
  Mlp mlp;
  OnnxImport imp = ImportOnnx(mlp.b.m);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  EXPECT_EQ(imp.opset, 13);
  ASSERT_EQ(imp.inputs.size(), 1u);
  EXPECT_EQ(imp.inputs[0].onnx_name, "x:0");
  EXPECT_EQ(imp.graph.node(imp.inputs[0].node).name, "x_0");
  EXPECT_EQ(imp.graph.node(imp.inputs[0].node).var, VarKind::kInput);
  EXPECT_EQ(imp.inputs[0].shape, (Shape{2, 3, 2}));
  // W1 is used transposed (transB=0): only W1_T exists, with W1's values transposed.
  EXPECT_EQ(imp.graph.FindNode("W1"), -1);
  int w1t = imp.graph.FindNode("W1_T");
  ASSERT_GE(w1t, 0);
  EXPECT_EQ(imp.graph.node(w1t).var, VarKind::kParam);
  const Tensor& t = imp.values.at("W1_T");
  ASSERT_EQ(t.shape(), (Shape{5, 6}));
  EXPECT_EQ(t.f()[1 * 6 + 4], mlp.w1[4 * 5 + 1]);
  // c2 (1,3) is given to fully_connected as its (3,) bias.
  EXPECT_EQ(imp.values.at("c2_row").shape(), (Shape{3}));
  EXPECT_EQ(imp.graph.node(imp.graph.FindNode("b1")).var, VarKind::kParam);
  ASSERT_EQ(imp.output_names, std::vector<std::string>{"y"});
  EXPECT_EQ(imp.graph.node(imp.graph.outputs[0].node).op->name(), "fully_connected");

  std::map<std::string, Tensor> vars = imp.values;
  vars["x_0"] = FromVector(Shape{2, 3, 2}, mlp.x);
  ExpectNear(RunGraph(imp.graph, vars), mlp.Expected());
}

TEST(OnnxImport, UnsupportedNodesAreCountedNotThrown) {
  ModelBuilder b;
  b.Input("x", {2, 3});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("Frobnicate", {"r"}, {"f"});
  b.Node("Relu", {"f"}, {"y"});  // depends on an unsupported node: not reported again
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_EQ(imp.unsupported.size(), 1u);
  EXPECT_EQ(imp.unsupported[0].op_type, "Frobnicate");
  EXPECT_EQ(imp.unsupported[0].reason, "no mapping to a frugal op");
  EXPECT_TRUE(imp.graph.outputs.empty());

  // A mapped op whose frugal op is missing: here relu, left out by the options.
  ModelBuilder r;
  r.Input("x", {2});
  r.Node("Relu", {"x"}, {"y"});
  r.Output("y");
  OnnxImportOptions opts;
  opts.op_available = [](const std::string& op) { return op != "relu"; };
  OnnxImport missing = ImportOnnx(r.m, opts);
  ASSERT_EQ(missing.unsupported.size(), 1u);
  EXPECT_NE(missing.unsupported[0].reason.find("frugal op 'relu'"), std::string::npos);
  EXPECT_TRUE(ImportOnnx(r.m).unsupported.empty());
}

TEST(OnnxImport, NonFloatTensorsAndDomainsAreUnsupported) {
  ModelBuilder b;
  b.Input("x", {2}, onnx::TensorProto::INT64);
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_EQ(imp.unsupported.size(), 1u);
  EXPECT_EQ(imp.unsupported[0].reason, "'x' is INT64; frugal computes in float32 only");

  ModelBuilder d;
  d.Input("x", {2});
  d.Node("Relu", {"x"}, {"y"})->set_domain("com.example");
  d.Output("y");
  EXPECT_NE(ImportOnnx(d.m).unsupported.at(0).reason.find("com.example"), std::string::npos);
}

// Gather of a 2-D float tensor's rows at a float tensor Cast to int64 (what
// export-onnx makes of embedding) is an embedding over the floats; the Cast
// read anywhere else, or an int64 input as indices, is unsupported.
TEST(OnnxImport, GatherAtFloatsCastToIntegersIsAnEmbedding) {
  ModelBuilder b;
  b.Input("ids", {3});
  b.Init("w", {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  ModelBuilder::IntAttr(b.Node("Cast", {"ids"}, {"idx"}), "to", onnx::TensorProto::INT64);
  b.Node("Identity", {"idx"}, {"idx2"});
  b.Node("Gather", {"w", "idx2"}, {"y"});
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  std::map<std::string, Tensor> vars = imp.values;
  vars[imp.graph.node(imp.inputs.at(0).node).name] = FromVector(Shape{3}, {3, 0, 2});
  ExpectNear(RunGraph(imp.graph, vars), {6, 7, 0, 1, 4, 5});

  b.Node("Relu", {"idx"}, {"r"});
  b.Output("r");
  imp = ImportOnnx(b.m);
  ASSERT_EQ(imp.unsupported.size(), 1u);
  EXPECT_EQ(imp.unsupported[0].reason, "'idx' is float32 cast to INT64, which frugal reads only as Gather's indices");

  ModelBuilder i;
  i.Input("ids", {3}, onnx::TensorProto::INT64);
  i.Init("w", {4, 2}, Ramp(8, 1, 0));
  i.Node("Gather", {"w", "ids"}, {"y"});
  i.Output("y");
  imp = ImportOnnx(i.m);
  ASSERT_EQ(imp.unsupported.size(), 1u);
  EXPECT_EQ(imp.unsupported[0].reason, "'ids' is INT64; frugal computes in float32 only");
}

TEST(OnnxImport, ConstantsAndKnownValuesFeedAttributes) {
  // Reshape's shape from a Constant node; a float Constant read as a tensor
  // becomes aux state (not learned).
  ModelBuilder b;
  b.Input("x", {2, 3});
  auto* c = b.Node("Constant", {}, {"shape"});
  auto* a = c->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(3), a->add_ints(-1);
  b.Node("Reshape", {"x", "shape"}, {"r"});
  auto* k = b.Node("Constant", {}, {"k"});
  auto* t = k->add_attribute()->mutable_t();
  k->mutable_attribute(0)->set_name("value"), k->mutable_attribute(0)->set_type(onnx::AttributeProto::TENSOR);
  t->set_data_type(onnx::TensorProto::FLOAT), t->add_dims(3), t->add_dims(2);
  for (int i = 0; i < 6; ++i) t->add_float_data(static_cast<float>(i));
  b.Node("Sum", {"r", "k"}, {"y"});
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  EXPECT_EQ(imp.graph.FindNode("shape"), -1) << "a value read as an attribute is no variable";
  ASSERT_GE(imp.graph.FindNode("k"), 0);
  EXPECT_EQ(imp.graph.node(imp.graph.FindNode("k")).var, VarKind::kAux);
  const Node& r = imp.graph.node(imp.graph.FindNode("r"));
  EXPECT_EQ(r.attrs.at("shape"), "(3,-1)");
  std::map<std::string, Tensor> vars = imp.values;
  vars["x"] = FromVector(Shape{2, 3}, {10, 20, 30, 40, 50, 60});
  ExpectNear(RunGraph(imp.graph, vars), {10, 21, 32, 43, 54, 65});

  // The same shape given as a graph input whose value is known at import.
  ModelBuilder fed;
  fed.Input("x", {2, 3});
  fed.Input("shape", {2}, onnx::TensorProto::INT64);
  fed.Node("Reshape", {"x", "shape"}, {"y"});
  fed.Output("y");
  EXPECT_NE(ImportOnnx(fed.m).unsupported.at(0).reason.find("must be known at import"), std::string::npos);
  OnnxImportOptions opts;
  OnnxTensor s;
  s.kind = OnnxTensor::Kind::kInt, s.type_name = "INT64", s.dims = {2}, s.i = {6, 1};
  opts.known_values["shape"] = s;
  OnnxImport known = ImportOnnx(fed.m, opts);
  ASSERT_TRUE(known.unsupported.empty()) << DescribeUnsupported(known.unsupported);
  EXPECT_EQ(known.inputs.size(), 1u) << "'shape' is read only as a value";
}

TEST(OnnxImport, ShapeArithmeticFoldsToAStaticReshape) {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): the shape
  // is folded at import, so the graph is one reshape of (2,12) and no
  // variable holds the shape values.
  ModelBuilder b;
  b.Input("x", {2, 3, 4});
  b.Node("Shape", {"x"}, {"shape"});
  auto* zero = b.Node("Constant", {}, {"zero"});
  ModelBuilder::IntAttr(zero, "value_int", 0);
  b.Node("Gather", {"shape", "zero"}, {"batch"});
  auto* axes = b.Node("Constant", {}, {"axes"});
  auto* a = axes->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(0);
  b.Node("Unsqueeze", {"batch", "axes"}, {"batch1"});
  auto* rest = b.Node("Constant", {}, {"rest"});
  auto* r = rest->add_attribute();
  r->set_name("value_ints"), r->set_type(onnx::AttributeProto::INTS), r->add_ints(-1);
  ModelBuilder::IntAttr(b.Node("Concat", {"batch1", "rest"}, {"target"}), "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"y"});
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  int ops = 0;
  for (int id = 0; id < imp.graph.num_nodes(); ++id) ops += imp.graph.node(id).op != nullptr;
  EXPECT_EQ(ops, 1) << "Shape, Gather, Unsqueeze and Concat make no node";
  EXPECT_TRUE(imp.values.empty()) << "the folded shape is no variable";
  const Node& y = imp.graph.node(imp.graph.FindNode("y"));
  EXPECT_EQ(y.attrs.at("shape"), "(2,-1)");
  std::vector<float> x = Ramp(24, 0.3f, 0.1f);
  ExpectNear(RunGraph(imp.graph, {{"x", FromVector(Shape{2, 3, 4}, x)}}), x);
}

TEST(OnnxImport, CausalMaskFoldsToOneConstant) {
  // PyTorch's causal mask, Where(Equal(Trilu(Expand(1, (T, T)), upper=0), 0),
  // -inf, 0), added to the scores: copies and selections of values known at
  // import, folded to one (T, T) aux value; the graph is the add.
  ModelBuilder b;
  b.Input("x", {2, 3, 3});
  b.Init("one", {1}, {1});
  b.Init("zero", {1}, {0});
  b.Init("ninf", {1}, {-std::numeric_limits<float>::infinity()});
  auto* shape = b.Node("Constant", {}, {"shape"});
  auto* a = shape->add_attribute();
  a->set_name("value_ints"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(3), a->add_ints(3);
  b.Node("Expand", {"one", "shape"}, {"ones"});
  ModelBuilder::IntAttr(b.Node("Trilu", {"ones"}, {"lower"}), "upper", 0);
  b.Node("Equal", {"lower", "zero"}, {"above"});
  b.Node("Where", {"above", "ninf", "zero"}, {"mask"});
  b.Node("Add", {"x", "mask"}, {"y"});
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  int ops = 0;
  for (int id = 0; id < imp.graph.num_nodes(); ++id) ops += imp.graph.node(id).op != nullptr;
  EXPECT_EQ(ops, 1) << "Expand, Trilu, Equal and Where make no node";
  const std::vector<float> x = Ramp(18, -0.4f, 0.1f);
  std::map<std::string, Tensor> vars = imp.values;
  vars["x"] = FromVector(Shape{2, 3, 3}, x);
  const std::vector<float> y = RunGraph(imp.graph, vars);
  ASSERT_EQ(y.size(), x.size());
  for (int k = 0; k < 18; ++k) {
    const int i = k / 3 % 3, j = k % 3;
    if (j > i)
      EXPECT_EQ(y[k], -std::numeric_limits<float>::infinity()) << k;
    else
      EXPECT_FLOAT_EQ(y[k], x[k]) << k;
  }
}

TEST(OnnxImport, TriluOfDataIsAMaskedProduct) {
  // Trilu(x, k=1), upper: the elements with j - i >= 1 of each (3, 4) matrix.
  ModelBuilder b;
  b.Input("x", {2, 3, 4});
  auto* k = b.Node("Constant", {}, {"k"});
  ModelBuilder::IntAttr(k, "value_int", 1);
  b.Node("Trilu", {"x", "k"}, {"y"});
  b.Output("y");
  OnnxImport imp = ImportOnnx(b.m);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  const std::vector<float> x = Ramp(24, 0.3f, 0.1f);
  std::vector<float> want(24);
  for (int e = 0; e < 24; ++e) want[e] = e % 4 - e / 4 % 3 >= 1 ? x[e] : 0.f;
  std::map<std::string, Tensor> vars = imp.values;
  vars["x"] = FromVector(Shape{2, 3, 4}, x);
  ExpectNear(RunGraph(imp.graph, vars), want);
}

TEST(OnnxImport, GeluOfOpset20InBothForms) {
  const std::vector<float> x = {-3, -1, 0, 0.5f, 2};
  for (const std::string form : {"", "none", "tanh"}) {
    ModelBuilder b;
    b.m.mutable_opset_import(0)->set_version(20);
    b.Input("x", {5});
    auto* n = b.Node("Gelu", {"x"}, {"y"});
    if (!form.empty()) {
      auto* a = n->add_attribute();
      a->set_name("approximate"), a->set_type(onnx::AttributeProto::STRING), a->set_s(form);
    }
    b.Output("y");
    OnnxImport imp = ImportOnnx(b.m);
    ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
    std::vector<float> want;
    for (float v : x) {
      const double u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
      want.push_back(static_cast<float>(form == "tanh" ? 0.5 * v * (1 + std::tanh(u))
                                                       : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))));
    }
    ExpectNear(RunGraph(imp.graph, {{"x", FromVector(Shape{5}, x)}}), want);
  }
}

TEST(OnnxImport, PreviewTrainingOptimizersNeedNoDefaultOpset) {
  ModelBuilder b;
  b.m.mutable_opset_import(0)->set_domain("ai.onnx.preview.training");
  b.m.mutable_opset_import(0)->set_version(1);
  b.Input("R", {});
  b.Input("T", {}, onnx::TensorProto::INT64);
  for (const char* name : {"X", "G", "V"}) b.Input(name, {2});
  auto* n = b.Node("Momentum", {"R", "T", "X", "G", "V"}, {"X_new", "V_new"});
  n->set_domain("ai.onnx.preview.training");
  auto* alpha = n->add_attribute();
  alpha->set_name("alpha"), alpha->set_type(onnx::AttributeProto::FLOAT), alpha->set_f(0.9f);
  auto* beta = n->add_attribute();
  beta->set_name("beta"), beta->set_type(onnx::AttributeProto::FLOAT), beta->set_f(0.5f);
  b.Output("X_new", {2});
  b.Output("V_new", {2});
  OnnxImportOptions opts;
  OnnxTensor r, t;
  r.kind = OnnxTensor::Kind::kFloat, r.type_name = "FLOAT", r.f = {0.1f};
  t.kind = OnnxTensor::Kind::kInt, t.type_name = "INT64", t.i = {1};
  opts.known_values = {{"R", r}, {"T", t}};
  OnnxImport imp = ImportOnnx(b.m, opts);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  // V_new = 0.9 V + 0.5 G = (2.05, -0.5); X_new = X - 0.1 V_new.
  std::map<std::string, Tensor> vars = imp.values;
  vars["X"] = FromVector(Shape{2}, {1, 2});
  vars["G"] = FromVector(Shape{2}, {0.5f, -1});
  vars["V"] = FromVector(Shape{2}, {2, 0});
  ExpectNear(RunGraph(imp.graph, vars), {0.795f, 2.05f});

  n->set_domain("com.example");
  EXPECT_NE(ImportOnnx(b.m, opts).unsupported.at(0).reason.find("domain"), std::string::npos);
}

TEST(OnnxImport, MalformedModelsThrow) {
  ModelBuilder b;
  b.Input("x", {2});
  b.Node("Relu", {"nowhere"}, {"y"});
  b.Output("y");
  try {
    ImportOnnx(b.m);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'nowhere' is not a graph input"), std::string::npos) << e.what();
  }
  ModelBuilder bad;
  bad.Input("x", {2});
  bad.Init("w", {2, 2}, {1, 2, 3});  // 3 values for 4
  bad.Node("Relu", {"x"}, {"y"});
  bad.Output("y");
  EXPECT_THROW(ImportOnnx(bad.m), Error);
}

TEST(OnnxImport, HostileModelsAreOneLineErrors) {
  auto expect_error = [](const onnx::ModelProto& m, const std::string& needle) {
    try {
      ImportOnnx(m);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); }
  };
  {  // an initializer whose dims overflow a count
    ModelBuilder b;
    b.Input("x", {2});
    b.Init("w", {4294967296, 4294967296, 4}, {1});
    b.Node("Add", {"x", "w"}, {"y"});
    b.Output("y");
    expect_error(b.m, "initializer 'w': tensor 'w' has dims (4294967296,4294967296,4), more elements than");
  }
  {  // two nodes writing one output
    ModelBuilder b;
    b.Input("x", {2});
    b.Node("Relu", {"x"}, {"y"});
    b.Node("Sigmoid", {"x"}, {"y"});
    b.Output("y");
    expect_error(b.m, "'y' is written by two nodes");
  }
  {  // an Identity of the empty (absent) input: reported, not a CHECK
    ModelBuilder b;
    b.Input("x", {2});
    b.Node("Identity", {""}, {"y"});
    b.Node("Add", {"x", "y"}, {"z"});
    b.Output("z");
    const OnnxImport r = ImportOnnx(b.m);
    ASSERT_FALSE(r.unsupported.empty());
    EXPECT_EQ(r.unsupported[0].op_type, "Identity");
    EXPECT_EQ(r.unsupported[0].reason, "input 1 is absent, and Identity needs it");
  }
}

// Writes a model to dir/name and returns the path.
std::string WriteModel(const TempDir& dir, const std::string& name, const onnx::ModelProto& m) {
  std::ofstream out(dir.File(name), std::ios::binary);
  m.SerializeToOstream(&out);
  return dir.File(name);
}

// Loads PREFIX.prototxt and the checkpoint PREFIX.frugal as a user would and
// runs the graph.
std::vector<float> RunExported(const std::string& prefix, const Tensor& x) {
  ConfigFile cfg = LoadConfig(prefix + ".prototxt", {});
  Graph g = BuildGraph(cfg);
  const CheckpointState ck = LoadCheckpoint(prefix + ".frugal");
  std::map<std::string, Tensor> vars = ck.params;
  vars.insert(ck.aux.begin(), ck.aux.end());
  vars[cfg.net.data().data_name()] = x;
  return RunGraph(g, vars);
}

TEST(OnnxImport, ImportOnnxCommandRoundTrips) {
  TempDir dir;
  Mlp mlp;
  std::string model = WriteModel(dir, "mlp.onnx", mlp.b.m);
  RunResult r = RunFrugal("import-onnx " + model + " --out " + dir.File("mlp"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mlp.frugal (4 params, 0 aux, 53 values)"), std::string::npos) << r.output;
  std::ifstream cfg(dir.File("mlp.prototxt"));
  std::string text((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("version: 1"), std::string::npos);
  EXPECT_NE(text.find("data_name: \"x_0\""), std::string::npos) << text;
  EXPECT_NE(text.find("# The data section is yours"), std::string::npos);
  const CheckpointState ck = LoadCheckpoint(dir.File("mlp.frugal"));
  EXPECT_EQ(ck.params.size(), 4u);
  EXPECT_TRUE(ck.params.count("h_weight"));  // W1_T, renamed to what BuildGraph makes
  ExpectNear(RunExported(dir.File("mlp"), FromVector(Shape{2, 3, 2}, mlp.x)), mlp.Expected());
}

TEST(OnnxImport, ImportOnnxCommandOnPyTorchExport) {
  // PyTorch's nn.Linear export (opset 6, initializers listed as inputs) with
  // the output ONNX recorded for it.
  const std::string test = std::string(ONNX_TESTDATA_DIR) + "/pytorch-converted/test_Linear";
  TempDir dir;
  RunResult r = RunFrugal("import-onnx " + test + "/model.onnx --out " + dir.File("linear"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  OnnxTensor x = ReadOnnxTensorFile(test + "/test_data_set_0/input_0.pb");
  OnnxTensor want = ReadOnnxTensorFile(test + "/test_data_set_0/output_0.pb");
  std::vector<float> got = RunExported(dir.File("linear"), ToTensor(x));
  ASSERT_EQ(got.size(), want.f.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want.f[k], 1e-7 + 1e-3 * std::fabs(want.f[k]));
}

TEST(OnnxImport, ImportOnnxCommandWritesVariablesForOtherParameters) {
  // A parameter where the op makes none (add_n's inputs), read first: a
  // variable node, its name made a config name (':' marks an output index).
  TempDir dir;
  ModelBuilder s;
  s.Input("x", {3});
  s.Init("onnx::k", {3}, {1, 2, 3});
  s.Node("Sum", {"onnx::k", "x"}, {"y"});
  s.Output("y");
  RunResult r = RunFrugal("import-onnx " + WriteModel(dir, "s.onnx", s.m) + " --out " + dir.File("s"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream cfg(dir.File("s.prototxt"));
  std::string text((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("node { name: \"onnx__k\" op: \"variable\" attr { key: \"shape\" value: \"(3)\" } }"),
            std::string::npos)
      << text;
  ExpectNear(RunExported(dir.File("s"), FromVector(Shape{3}, {0.5f, -1, 4})), {1.5f, 1, 7});
}

TEST(OnnxImport, ImportOnnxCommandOnPyTorchTransformerBlock) {
  // A pre-LN GPT block (causal attention, erf GELU) PyTorch 2.x exported at
  // opset 17 (tools/onnx/transformer_block.py), with PyTorch's output:
  // the causal mask folds to a constant, and the config and checkpoint that
  // import-onnx writes compute what PyTorch did.
  const std::string test = std::string(FRUGAL_SOURCE_DIR) + "/tests/onnx/pytorch/test_transformer_block";
  TempDir dir;
  RunResult r = RunFrugal("import-onnx " + test + "/model.onnx --out " + dir.File("block"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  OnnxTensor x = ReadOnnxTensorFile(test + "/test_data_set_0/input_0.pb");
  OnnxTensor want = ReadOnnxTensorFile(test + "/test_data_set_0/output_0.pb");
  std::vector<float> got = RunExported(dir.File("block"), ToTensor(x));
  ASSERT_EQ(got.size(), want.f.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want.f[k], 1e-5 + 1e-4 * std::fabs(want.f[k])) << k;
}

TEST(OnnxImport, ImportOnnxCommandErrors) {
  TempDir dir;
  ModelBuilder b;
  b.Input("x", {2, 3});
  b.Node("Frobnicate", {"x"}, {"y"});
  b.Output("y");
  RunResult r = RunFrugal("import-onnx " + WriteModel(dir, "f.onnx", b.m) + " --out " + dir.File("f"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("1 node(s) cannot be imported: Frobnicate 'y': no mapping to a frugal op"), std::string::npos)
      << r.output;

  r = RunFrugal("import-onnx " + dir.File("f.onnx"));
  EXPECT_NE(r.output.find("needs --out PREFIX"), std::string::npos) << r.output;
  r = RunFrugal("import-onnx " + dir.File("missing.onnx") + " --out " + dir.File("m"));
  EXPECT_NE(r.output.find("cannot open the ONNX model"), std::string::npos) << r.output;
  std::ofstream(dir.File("empty.onnx")).close();
  r = RunFrugal("import-onnx " + dir.File("empty.onnx") + " --out " + dir.File("e"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("empty.onnx: the file is empty, not an ONNX model"), std::string::npos) << r.output;
}

// Damaged .onnx files (bytes changed, the file cut short) are one-line
// Errors or some other model; none crashes on import-onnx's path (read,
// import, write the config, build it back).
TEST(OnnxImport, RandomDamageIsAnErrorNeverACrash) {
  Mlp mlp;  // W1 as raw bytes, the others as float_data: both encodings get damaged
  onnx::TensorProto* w1 = mlp.b.m.mutable_graph()->mutable_initializer(0);
  w1->set_raw_data(std::string(reinterpret_cast<const char*>(mlp.w1.data()), mlp.w1.size() * sizeof(float)));
  w1->clear_float_data();
  std::string bytes;
  ASSERT_TRUE(mlp.b.m.SerializeToString(&bytes));
  uint32_t seed = 11;
  auto next = [&seed](size_t n) {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<size_t>(seed >> 8) % n;
  };
  TempDir dir;
  const std::string path = dir.File("d.onnx");
  int errors = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string d = bytes;
    for (int k = 0, flips = 1 + static_cast<int>(next(3)); k < flips; ++k)
      d[next(d.size())] = static_cast<char>(next(256));
    if (trial % 5 == 0) d.resize(next(d.size()));
    std::ofstream(path, std::ios::binary) << d;
    try {
      const OnnxImport imp = ImportOnnxFile(path);
      if (!imp.unsupported.empty()) continue;
      const FrugalExport ex = ExportFrugalConfig(imp, "d");
      BuildGraph(ParseConfig(ex.config_text, "d.prototxt", {}));
    } catch (const Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(errors, 500);  // most damage is found
}

}  // namespace
}  // namespace frugal::test
