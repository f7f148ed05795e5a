// Hostile inputs to the importers (issue #48): MXNet arrays that disagree
// with the shapes the symbol infers, NaN and Inf in weights, ONNX attributes
// of the wrong type or missing, opsets out of range, duplicate initializers,
// negative dims, and shapes that no config field holds. Each is one Error
// line naming the user's file and the node, array or attribute; through the
// command, exit status 1 and no PREFIX file left behind.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "frugal/mxnet.h"
#include "frugal/onnx.h"
#include "onnx.pb.h"
#include "test_util.h"

namespace frugal::test::hostile {
namespace {

// The command fails with one error line holding every needle, names no
// generated file, and leaves no PREFIX.* behind.
void ExpectCommandFails(const std::string& args, const TempDir& dir, const std::vector<std::string>& needles) {
  const RunResult r = RunFrugal(args + " --out " + dir.File("out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("prototxt"), std::string::npos) << r.output;
  for (const std::string& n : needles)
    EXPECT_NE(r.output.find(n), std::string::npos) << "'" << n << "' not in: " << r.output;
  for (const char* ext : {".prototxt", ".frugal"})
    EXPECT_FALSE(std::filesystem::exists(dir.File(std::string("out") + ext))) << ext << " left behind";
}

Tensor Filled(Shape s, float v) {
  Tensor t = Tensor::Empty(s);
  t.Fill(v);
  return t;
}

// ---------------------------------------------------------------- MXNet

// data -> FullyConnected fc1 (num_hidden) -> SoftmaxOutput, or with conv:
// data -> Convolution conv1 (num_filter 4, kernel 3x3) -> Flatten -> fc1.
std::string MxnetJson(int num_hidden, bool conv, const std::string& fc_attrs = "") {
  std::string nodes = R"J({"op": "null", "name": "data", "inputs": []},)J";
  int x = 0;
  if (conv) {
    nodes += R"J({"op": "null", "name": "conv1_weight", "inputs": []},
{"op": "null", "name": "conv1_bias", "inputs": []},
{"op": "Convolution", "name": "conv1", "attrs": {"num_filter": "4", "kernel": "(3, 3)"},
 "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
{"op": "Flatten", "name": "flat", "inputs": [[3, 0, 0]]},)J";
    x = 4;
  }
  const int w = x + 1;
  nodes += Fmt(R"J({"op": "null", "name": "fc1_weight", "inputs": []},
{"op": "null", "name": "fc1_bias", "inputs": []},
{"op": "FullyConnected", "name": "fc1", "attrs": {"num_hidden": ")J",
               num_hidden, "\"", fc_attrs, R"J(}, "inputs": [[)J", x, ", 0, 0], [", w, ", 0, 0], [", w + 1,
               R"J(, 0, 0]]},
{"op": "null", "name": "softmax_label", "inputs": []},
{"op": "SoftmaxOutput", "name": "softmax", "inputs": [[)J",
               w + 2, ", 0, 0], [", w + 3, ", 0, 0]]}");
  return "{\"nodes\": [\n" + nodes + "\n], \"heads\": [[" + std::to_string(w + 4) + ", 0, 0]]}\n";
}

NamedTensors FcArrays(Shape w, Shape b) {
  return {{"arg:fc1_weight", Filled(w, 0.5f)}, {"arg:fc1_bias", Filled(b, 0.f)}};
}

MxnetImportOptions Data(std::vector<int64_t> dims) {
  MxnetImportOptions o;
  o.data_shape = std::move(dims);
  return o;
}

MxnetImport Import(const std::string& json, const NamedTensors& arrays, const MxnetImportOptions& o) {
  return ImportMxnet(ParseMxnetSymbol(json, "h-symbol.json"), arrays, "h", o);
}

TEST(ImportHostile, MxnetArraysAreCheckedAgainstTheInferredShapes) {
  // The good model imports.
  EXPECT_NO_THROW(Import(MxnetJson(8, false), FcArrays(Shape{8, 16}, Shape{8}), Data({2, 16})));
  // A weight of (5,16) against num_hidden 8.
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false), FcArrays(Shape{5, 16}, Shape{8}), Data({2, 16}));
      },
      {"h-symbol.json:", "node 'fc1' (FullyConnected) reading arg:fc1_weight (5,16), arg:fc1_bias (8)",
       "weight has shape (5,16)", "needs (8,16)", "num_hidden=8"});
  // A bias of the wrong length.
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false), FcArrays(Shape{8, 16}, Shape{9}), Data({2, 16}));
      },
      {"node 'fc1' (FullyConnected)", "bias has shape (9) but num_hidden is 8"});
  // A data shape that disagrees with the first layer's weight.
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false), FcArrays(Shape{8, 16}, Shape{8}), Data({2, 20}));
      },
      {"node 'fc1' (FullyConnected)", "needs (8,20)", "20 input features", "(2,20) is from --data-shape"});
  // A convolution weight of (6,1,5,5) against 4 filters of 3x3.
  NamedTensors conv = FcArrays(Shape{3, 144}, Shape{3});
  conv.push_back({"arg:conv1_weight", Filled(Shape{6, 1, 5, 5}, 0.1f)});
  conv.push_back({"arg:conv1_bias", Filled(Shape{4}, 0.f)});
  test::ExpectError(
      [&] {
        Import(MxnetJson(3, true), conv, Data({2, 1, 8, 8}));
      },
      {"node 'conv1' (Convolution) reading arg:conv1_weight (6,1,5,5)", "(4,1,3,3)"});
  conv[2].second = Filled(Shape{4, 1, 3, 3}, 0.1f);
  EXPECT_NO_THROW(Import(MxnetJson(3, true), conv, Data({2, 1, 8, 8})));
  // An input count the attributes do not take (no_bias, yet a bias).
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false, R"(, "no_bias": "True")"), FcArrays(Shape{8, 16}, Shape{8}), Data({2, 16}));
      },
      {"node 'fc1' (FullyConnected): has 3 inputs but frugal's fully_connected with these attributes takes 2"});
  // An attribute value the op cannot read names the symbol's node.
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false, R"(, "flatten": "maybe")"), FcArrays(Shape{8, 16}, Shape{8}), Data({2, 16}));
      },
      {"h-symbol.json:", "node 'fc1' (FullyConnected)", "flatten"});
  // No data shape: nothing to check the arrays against.
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false), FcArrays(Shape{8, 16}, Shape{8}), {});
      },
      {"node 'data' (null): the data input has no shape", "give --data-shape"});
  // A batch no config's batch_size holds.
  test::ExpectError(
      [&] {
        Import(MxnetJson(8, false), FcArrays(Shape{8, 16}, Shape{8}), Data({int64_t{1} << 31, 16}));
      },
      {"node 'data' (null): the batch 2147483648 (from --data-shape)", "batch_size holds (2147483647)"});
  // An output index the node does not have.
  std::string json = MxnetJson(8, false);
  json.replace(json.find("[[0, 0, 0], [1"), 10, "[[0, 3, 0]");
  test::ExpectError(
      [&] {
        Import(json, FcArrays(Shape{8, 16}, Shape{8}), Data({2, 16}));
      },
      {"node 'fc1' (FullyConnected): reads output 3 of node 'data', which has 1"});
}

TEST(ImportHostile, MxnetNonFiniteWeightsNeedTheFlag) {
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    NamedTensors a = FcArrays(Shape{8, 16}, Shape{8});
    a[0].second.f()[37] = bad;
    MxnetImportOptions o = Data({2, 16});
    o.params_path = "h-0000.params";
    test::ExpectError([&] { Import(MxnetJson(8, false), a, o); },
                      {"h-0000.params: array arg:fc1_weight (8,16) holds ", " at flat index 37", "--allow-nonfinite"});
    o.allow_nonfinite = true;
    EXPECT_NO_THROW(Import(MxnetJson(8, false), a, o));
  }
}

TEST(ImportHostile, MxnetCommandFailsWithOneLineAndWritesNothing) {
  TempDir dir;
  std::ofstream(dir.File("m-symbol.json")) << MxnetJson(8, false);
  WriteMxnetParams(dir.File("m-0000.params"), FcArrays(Shape{8, 16}, Shape{8}));
  const std::string files = "import-mxnet " + dir.File("m-symbol.json") + " " + dir.File("m-0000.params");
  ExpectCommandFails(files + " --data-shape 2,20", dir, {"frugal: error: ", "m-symbol.json:", "needs (8,20)"});
  ExpectCommandFails(files + " --data-shape 3000000000,16", dir, {"the batch 3000000000 (from --data-shape)"});
  ExpectCommandFails(files, dir, {"give --data-shape"});
  NamedTensors nan = FcArrays(Shape{8, 16}, Shape{8});
  nan[1].second.f()[2] = std::nanf("");
  WriteMxnetParams(dir.File("n-0000.params"), nan);
  const std::string nan_files = "import-mxnet " + dir.File("m-symbol.json") + " " + dir.File("n-0000.params");
  ExpectCommandFails(nan_files + " --data-shape 2,16", dir,
                     {dir.File("n-0000.params") + ": array arg:fc1_bias (8) holds nan at flat index 2"});
  const RunResult r = RunFrugal(nan_files + " --data-shape 2,16 --allow-nonfinite --out " + dir.File("out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.File("out.frugal")));
}

// ---------------------------------------------------------------- ONNX

struct Model {
  onnx::ModelProto m;
  explicit Model(int64_t opset = 13) {
    m.set_ir_version(7);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  onnx::ValueInfoProto* Value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                              std::vector<int64_t> dims) {
    auto* v = list->Add();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    return v;
  }
  void Input(const std::string& name, std::vector<int64_t> dims) { Value(g()->mutable_input(), name, dims); }
  void Output(const std::string& name) { Value(g()->mutable_output(), name, {}); }
  void Init(const std::string& name, std::vector<int64_t> dims, float v) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t k = 0; k < n; ++k) t->add_float_data(v);
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g()->add_node();
    n->set_op_type(op);
    n->set_name(op + "_node");
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static onnx::AttributeProto* Attr(onnx::NodeProto* n, const std::string& name,
                                    onnx::AttributeProto::AttributeType t) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(t);
    return a;
  }
};

// x (2,4) -> Gemm(W (3,4), b (3), transB=1) -> y.
Model Gemm(float w = 0.5f) {
  Model b;
  b.Input("x", {2, 4});
  b.Init("W", {3, 4}, w);
  b.Init("B", {3}, 0.f);
  Model::Attr(b.Node("Gemm", {"x", "W", "B"}, {"y"}), "transB", onnx::AttributeProto::INT)->set_i(1);
  b.Output("y");
  return b;
}

// x (2,3) -> Concat(x, x) -> y, with the axis attribute as `attr` makes it.
Model Concat(int64_t opset, const std::function<void(onnx::NodeProto*)>& attr) {
  Model b(opset);
  b.Input("x", {2, 3});
  attr(b.Node("Concat", {"x", "x"}, {"y"}));
  b.Output("y");
  return b;
}

TEST(ImportHostile, OnnxAttributesOfTheWrongTypeOrMissing) {
  EXPECT_NO_THROW(ImportOnnx(
      Concat(13, [](onnx::NodeProto* n) { Model::Attr(n, "axis", onnx::AttributeProto::INT)->set_i(1); }).m));
  // An INT attribute sent as FLOAT is not read as 0.
  test::ExpectError(
      [] {
        ImportOnnx(
            Concat(13, [](onnx::NodeProto* n) { Model::Attr(n, "axis", onnx::AttributeProto::FLOAT)->set_f(1.f); }).m);
      },
      {"ONNX node 'Concat_node' (Concat): attribute 'axis' is FLOAT, expected INT"});
  // Required by Concat-4 and later: no default of 1.
  test::ExpectError([] { ImportOnnx(Concat(13, [](onnx::NodeProto*) {}).m); },
                    {"ONNX node 'Concat_node' (Concat): attribute 'axis' is required", "at opset 13"});
  // Concat-1 defaulted it to 1, as ONNX's schema says.
  const OnnxImport old = ImportOnnx(Concat(1, [](onnx::NodeProto*) {}).m);
  EXPECT_TRUE(old.unsupported.empty()) << DescribeUnsupported(old.unsupported);
  // A list attribute sent as one value.
  Model t;
  t.Input("x", {2, 3});
  Model::Attr(t.Node("Transpose", {"x"}, {"y"}), "perm", onnx::AttributeProto::INT)->set_i(1);
  t.Output("y");
  test::ExpectError([&] { ImportOnnx(t.m); },
                    {"ONNX node 'Transpose_node' (Transpose): attribute 'perm' is INT, expected INTS"});
  // A Constant's value of another type than its name says.
  Model c;
  c.Input("x", {2, 3});
  Model::Attr(c.Node("Constant", {}, {"k"}), "value_int", onnx::AttributeProto::FLOAT)->set_f(2.f);
  c.Node("Add", {"x", "k"}, {"y"});
  c.Output("y");
  test::ExpectError([&] { ImportOnnx(c.m); },
                    {"ONNX node 'Constant_node' (Constant): attribute 'value_int' is FLOAT, expected INT"});
  // MaxPool without its kernel.
  Model p;
  p.Input("x", {1, 1, 4, 4});
  p.Node("MaxPool", {"x"}, {"y"});
  p.Output("y");
  test::ExpectError([&] { ImportOnnx(p.m); },
                    {"ONNX node 'MaxPool_node' (MaxPool): attribute 'kernel_shape' is required"});
}

TEST(ImportHostile, OnnxModelLevelDamage) {
  EXPECT_NO_THROW(ImportOnnx(Gemm().m));
  for (const int64_t opset : {0, 24, 99}) {
    Model b = Gemm();
    b.m.mutable_opset_import(0)->set_version(opset);
    test::ExpectError([&] { ImportOnnx(b.m); }, {Fmt("the model imports opset ", opset,
                                                     " of the default ONNX domain; frugal imports opsets 1 to 23")});
  }
  Model dup = Gemm();
  dup.Init("W", {3, 4}, 0.25f);
  test::ExpectError([&] { ImportOnnx(dup.m); }, {"two initializers are named 'W'"});
  Model neg = Gemm();
  neg.g()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(-4);
  test::ExpectError([&] { ImportOnnx(neg.m); }, {"graph input 'x': dim 1 is -4"});
  // ONNX's own unknown dims (a dim_param, or nothing) stay accepted.
  Model sym = Gemm();
  sym.g()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  OnnxImportOptions at2;
  at2.batch = 2;
  EXPECT_NO_THROW(ImportOnnx(sym.m, at2));
}

TEST(ImportHostile, OnnxNonFiniteWeightsNeedTheFlag) {
  for (const float bad : {std::nanf(""), -std::numeric_limits<float>::infinity()}) {
    const Model b = Gemm(bad);
    test::ExpectError([&] { ImportOnnx(b.m); },
                      {"initializer 'W' (3,4) holds ", " at flat index 0 (the first non-finite value of a weight)",
                       "--allow-nonfinite"});
    OnnxImportOptions o;
    o.allow_nonfinite = true;
    EXPECT_NO_THROW(ImportOnnx(b.m, o));
  }
  // Outside a weight slot -inf is a mask's "never": it imports; NaN does not.
  for (const float v : {-std::numeric_limits<float>::infinity(), std::nanf("")}) {
    Model m;
    m.Input("x", {2, 3});
    m.Init("mask", {2, 3}, v);
    m.Node("Add", {"x", "mask"}, {"y"});
    m.Output("y");
    if (std::isnan(v)) {
      test::ExpectError([&] { ImportOnnx(m.m); },
                        {"initializer 'mask' (2,3) holds nan at flat index 0 (the first NaN)"});
    } else {
      EXPECT_NO_THROW(ImportOnnx(m.m));
    }
  }
}

TEST(ImportHostile, OnnxCommandFailsWithOneLineAndWritesNothing) {
  TempDir dir;
  auto save = [&](const Model& b, const std::string& name) {
    std::ofstream out(dir.File(name), std::ios::binary);
    b.m.SerializeToOstream(&out);
    return dir.File(name);
  };
  ExpectCommandFails("import-onnx " + save(Concat(13, [](onnx::NodeProto*) {}), "c.onnx"), dir,
                     {"frugal: error: ", "c.onnx: ONNX node 'Concat_node' (Concat): attribute 'axis' is required"});
  // A batch of 2^31: named as the input's dim, not as a line of a config.
  Model big = Gemm();
  big.g()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(
      int64_t{3} << 30);
  ExpectCommandFails("import-onnx " + save(big, "big.onnx"), dir,
                     {"big.onnx: graph input 'x' (3221225472,4): dim 0 (the batch) is 3221225472"});
  const std::string nan = save(Gemm(std::nanf("")), "nan.onnx");
  ExpectCommandFails("import-onnx " + nan, dir, {"nan.onnx: initializer 'W' (3,4) holds nan at flat index 0"});
  const RunResult r = RunFrugal("import-onnx " + nan + " --allow-nonfinite --out " + dir.File("out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace frugal::test::hostile
