// Importing MXNet models: symbol JSON and NDArray params written here as
// MXNet 1.x writes them (the params by frugal's own writer of the format),
// imported, and run: the MLP against a hand computation, LeNet against the
// same network written as a frugal config, a ResNet unit through `frugal
// test` and a training step, the LSTM example's unrolled graph with shared
// weights; and files MXNet itself wrote (tests/mxnet) against MXNet's
// outputs. Every malformed file is one line naming the file and the entry.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/mxnet.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// Builds symbol JSON node by node, as NNVM saves it.
class SymbolBuilder {
 public:
  // attr_key: "attrs" (MXNet 1.x), "attr" (0.9) or "param" (0.8).
  int Var(const std::string& name, const std::string& attrs = "") { return Add("null", name, attrs, {}); }
  int Op(const std::string& op, const std::string& name, const std::string& attrs, std::vector<std::string> inputs,
         const std::string& attr_key = "attrs") {
    return Add(op, name, attrs, std::move(inputs), attr_key);
  }
  // [node, output, 0]
  static std::string In(int node, int output = 0) { return Fmt("[", node, ", ", output, ", 0]"); }
  std::string Json(const std::vector<std::string>& heads) const {
    std::string s = "{\n  \"nodes\": [\n";
    for (size_t k = 0; k < nodes_.size(); ++k) s += nodes_[k] + (k + 1 < nodes_.size() ? ",\n" : "\n");
    s += "  ],\n  \"arg_nodes\": [0],\n  \"node_row_ptr\": [0],\n  \"heads\": [";
    for (size_t k = 0; k < heads.size(); ++k) s += (k ? ", " : "") + heads[k];
    return s + "],\n  \"attrs\": {\"mxnet_version\": [\"int\", 10500]}\n}\n";
  }

 private:
  int Add(const std::string& op, const std::string& name, const std::string& attrs, std::vector<std::string> inputs,
          const std::string& attr_key = "attrs") {
    std::string s = "    {\n      \"op\": \"" + op + "\",\n      \"name\": \"" + name + "\",\n";
    if (!attrs.empty()) s += "      \"" + attr_key + "\": {" + attrs + "},\n";
    s += "      \"inputs\": [";
    for (size_t k = 0; k < inputs.size(); ++k) s += (k ? ", " : "") + inputs[k];
    nodes_.push_back(s + "]\n    }");
    return static_cast<int>(nodes_.size()) - 1;
  }
  std::vector<std::string> nodes_;
};

// Deterministic values in [-1, 1).
Tensor Values(Shape s, uint32_t seed) {
  Tensor t = Tensor::Empty(s);
  for (int64_t k = 0; k < t.size(); ++k) {
    seed = seed * 1664525u + 1013904223u;
    t.f()[k] = static_cast<float>(seed >> 8) / static_cast<float>(1 << 23) - 1.f;
  }
  return t;
}

std::vector<float> RunNet(const std::string& config_text, const std::map<std::string, Tensor>& inputs,
                          const std::map<std::string, Tensor>& weights) {
  std::map<std::string, Tensor> vars = weights;
  vars.insert(inputs.begin(), inputs.end());
  const Tensor y = RunForward(BuildGraph(ParseConfig(config_text, "imported.prototxt", {})), vars)[0];
  return std::vector<float>(y.f(), y.f() + y.size());
}

std::map<std::string, Tensor> Weights(const MxnetImport& imp) {
  std::map<std::string, Tensor> w = imp.params;
  w.insert(imp.aux.begin(), imp.aux.end());
  return w;
}

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); }
  return "";
}

// Import options with the data shape (batch first), as --data-shape gives it.
MxnetImportOptions DataShape(std::vector<int64_t> dims) {
  MxnetImportOptions o;
  o.data_shape = std::move(dims);
  return o;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---------------------------------------------------------------- MLP

// MXNet's MLP example: data -> Flatten -> fc1 (relu) -> fc2 -> SoftmaxOutput,
// with the three spellings of the attributes MXNet versions wrote.
struct MxnetMlp {
  static constexpr int kBatch = 2, kIn = 6, kHidden = 5, kClasses = 3;
  std::string json;
  NamedTensors arrays = {{"arg:fc1_weight", Values(Shape{kHidden, kIn}, 1)},
                         {"arg:fc1_bias", Values(Shape{kHidden}, 2)},
                         {"arg:fc2_weight", Values(Shape{kClasses, kHidden}, 3)},
                         {"arg:fc2_bias", Values(Shape{kClasses}, 4)}};
  Tensor x = Values(Shape{kBatch, 1, 2, 3}, 5);

  MxnetMlp() {
    SymbolBuilder s;
    const int data = s.Var("data");
    const int flat = s.Op("Flatten", "flatten0", "", {SymbolBuilder::In(data)});
    const int w1 = s.Var("fc1_weight"), b1 = s.Var("fc1_bias");
    const int fc1 = s.Op("FullyConnected", "fc1", "\"num_hidden\": \"5\"",
                         {SymbolBuilder::In(flat), SymbolBuilder::In(w1), SymbolBuilder::In(b1)}, "param");
    const int relu = s.Op("Activation", "relu1", "\"act_type\": \"relu\"", {SymbolBuilder::In(fc1)}, "attr");
    const int w2 = s.Var("fc2_weight", "\"__lr_mult__\": \"0.5\", \"__wd_mult__\": \"0\""), b2 = s.Var("fc2_bias");
    const int fc2 = s.Op("FullyConnected", "fc2", "\"no_bias\": \"False\", \"num_hidden\": \"3\"",
                         {SymbolBuilder::In(relu), SymbolBuilder::In(w2), SymbolBuilder::In(b2)});
    const int label = s.Var("softmax_label");
    const int sm = s.Op("SoftmaxOutput", "softmax", "", {SymbolBuilder::In(fc2), SymbolBuilder::In(label)});
    json = s.Json({SymbolBuilder::In(sm)});
  }

  // softmax(W2 relu(W1 x + b1) + b2), row by row.
  std::vector<float> Expected() const {
    const float* w1 = arrays[0].second.f();
    const float* b1 = arrays[1].second.f();
    const float* w2 = arrays[2].second.f();
    const float* b2 = arrays[3].second.f();
    std::vector<float> out;
    for (int n = 0; n < kBatch; ++n) {
      std::vector<double> h(kHidden), z(kClasses);
      for (int j = 0; j < kHidden; ++j) {
        h[j] = b1[j];
        for (int i = 0; i < kIn; ++i) h[j] += w1[j * kIn + i] * x.f()[n * kIn + i];
        h[j] = std::max(h[j], 0.0);
      }
      double sum = 0;
      for (int c = 0; c < kClasses; ++c) {
        z[c] = b2[c];
        for (int j = 0; j < kHidden; ++j) z[c] += w2[c * kHidden + j] * h[j];
        sum += std::exp(z[c]);
      }
      for (int c = 0; c < kClasses; ++c) out.push_back(static_cast<float>(std::exp(z[c]) / sum));
    }
    return out;
  }
};

TEST(MxnetImport, MlpComputesWhatTheWeightsSay) {
  MxnetMlp mlp;
  TempDir dir;
  WriteMxnetParams(dir.File("mlp-0000.params"), mlp.arrays);
  const MxnetSymbol sym = ParseMxnetSymbol(mlp.json, "mlp-symbol.json");
  EXPECT_EQ(sym.mxnet_version, 10500);
  MxnetImport imp =
      ImportMxnet(sym, ReadMxnetParams(dir.File("mlp-0000.params")), "mlp", DataShape({MxnetMlp::kBatch, 1, 2, 3}));
  EXPECT_NE(imp.config_text.find("label_name: \"softmax_label\""), std::string::npos) << imp.config_text;
  EXPECT_NE(imp.config_text.find("op: \"relu\""), std::string::npos) << imp.config_text;
  // fc2_weight's __lr_mult__ and __wd_mult__ become fc2's multipliers of its weight, as BuildGraph reads them.
  EXPECT_NE(imp.config_text.find("attr { key: \"num_hidden\" value: \"3\" } lr_mult { key: \"weight\" value: 0.5 } "
                                 "wd_mult { key: \"weight\" value: 0 } }"),
            std::string::npos)
      << imp.config_text;
  const Graph g = BuildGraph(ParseConfig(imp.config_text, "mlp.prototxt", {}));
  EXPECT_EQ(g.node(g.FindNode("fc2_weight")).lr_mult, 0.5f);
  EXPECT_EQ(g.node(g.FindNode("fc2_weight")).wd_mult, 0.f);
  // The weights are left to BuildGraph.
  EXPECT_EQ(imp.config_text.find("op: \"variable\""), std::string::npos) << imp.config_text;
  ASSERT_EQ(imp.params.size(), 4u);
  EXPECT_TRUE(imp.aux.empty());
  EXPECT_TRUE(imp.unused.empty());
  const std::vector<float> want = mlp.Expected();
  const std::vector<float> got =
      RunNet(imp.config_text, {{"data", mlp.x}, {"softmax_label", Tensor::Empty(Shape{2})}}, Weights(imp));
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << k;
}

TEST(MxnetImport, ParamsRoundTripEveryTypeFlagAndLegacyLayout) {
  const NamedTensors arrays = {{"arg:w", Values(Shape{2, 3}, 7)}, {"aux:s", Values(Shape{4}, 8)}};
  const NamedTensors back = DecodeMxnetParams(EncodeMxnetParams(arrays), "p.params");
  ASSERT_EQ(back.size(), 2u);
  for (size_t a = 0; a < 2; ++a) {
    EXPECT_EQ(back[a].first, arrays[a].first);
    ASSERT_EQ(back[a].second.shape(), arrays[a].second.shape());
    for (int64_t k = 0; k < back[a].second.size(); ++k) EXPECT_EQ(back[a].second.f()[k], arrays[a].second.f()[k]);
  }
  // One array of 2 float16 values (1.5, -2) in the legacy layout (no
  // magic: uint32 ndim, uint32 dims), as MXNet before 0.9 wrote it.
  std::string legacy(
      "\x12\x01\0\0\0\0\0\0"
      "\0\0\0\0\0\0\0\0"
      "\x01\0\0\0\0\0\0\0",
      24);
  legacy += std::string(
      "\x01\0\0\0"
      "\x02\0\0\0"
      "\x01\0\0\0\0\0\0\0"
      "\x02\0\0\0",
      20);
  legacy += std::string("\x00\x3e\x00\xc0", 4);
  legacy += std::string(
      "\x01\0\0\0\0\0\0\0"
      "\x05\0\0\0\0\0\0\0"
      "arg:h",
      21);
  const NamedTensors h = DecodeMxnetParams(legacy, "legacy.params");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].second.shape(), (Shape{2}));
  EXPECT_EQ(h[0].second.f()[0], 1.5f);
  EXPECT_EQ(h[0].second.f()[1], -2.f);
}

// ---------------------------------------------------------------- LeNet

// MXNet's LeNet example, small: conv (tanh) -> max pool -> conv (tanh) ->
// avg pool -> flatten -> fc -> SoftmaxOutput; against the same network
// written as a frugal config by hand, with the same weights.
TEST(MxnetImport, LeNetMatchesTheSameNetworkWrittenInFrugal) {
  SymbolBuilder s;
  using B = SymbolBuilder;
  const int data = s.Var("data", "\"__shape__\": \"(2, 1, 8, 8)\"");
  const int c1 = s.Op("Convolution", "conv1",
                      "\"kernel\": \"(3, 3)\", \"num_filter\": \"4\", \"pad\": \"(1, 1)\", \"workspace\": \"1024\", "
                      "\"cudnn_tune\": \"fastest\", \"layout\": \"NCHW\"",
                      {B::In(data), B::In(s.Var("conv1_weight")), B::In(s.Var("conv1_bias"))});
  const int t1 = s.Op("Activation", "tanh1", "\"act_type\": \"tanh\"", {B::In(c1)});
  const int p1 =
      s.Op("Pooling", "pool1", "\"kernel\": \"(2, 2)\", \"pool_type\": \"max\", \"stride\": \"(2, 2)\"", {B::In(t1)});
  const int c2 = s.Op("Convolution", "conv2", "\"kernel\": \"(3, 3)\", \"num_filter\": \"6\", \"no_bias\": \"True\"",
                      {B::In(p1), B::In(s.Var("conv2_weight"))});
  const int t2 = s.Op("LeakyReLU", "lrelu2", "\"act_type\": \"leaky\", \"slope\": \"0.1\"", {B::In(c2)});
  const int p2 = s.Op("Pooling", "pool2",
                      "\"kernel\": \"(2, 2)\", \"pool_type\": \"avg\", \"stride\": \"(1, 1)\", "
                      "\"pooling_convention\": \"full\", \"count_include_pad\": \"False\", \"cudnn_off\": \"False\"",
                      {B::In(t2)});
  const int f = s.Op("Flatten", "flatten", "", {B::In(p2)});
  const int d = s.Op("Dropout", "drop", "\"p\": \"0.5\"", {B::In(f)});
  const int fc = s.Op("FullyConnected", "fc", "\"num_hidden\": \"3\"",
                      {B::In(d), B::In(s.Var("fc_weight")), B::In(s.Var("fc_bias"))});
  const int sm =
      s.Op("SoftmaxOutput", "softmax", "\"normalization\": \"null\"", {B::In(fc), B::In(s.Var("softmax_label"))});
  const NamedTensors arrays = {{"arg:conv1_weight", Values(Shape{4, 1, 3, 3}, 11)},
                               {"arg:conv1_bias", Values(Shape{4}, 12)},
                               {"arg:conv2_weight", Values(Shape{6, 4, 3, 3}, 13)},
                               {"arg:fc_weight", Values(Shape{3, 6}, 14)},
                               {"arg:fc_bias", Values(Shape{3}, 15)}};
  const MxnetImport imp = ImportMxnet(ParseMxnetSymbol(s.Json({B::In(sm)}), "lenet-symbol.json"), arrays, "lenet");
  EXPECT_NE(imp.config_text.find("batch_size: 2\n  sample_shape: [1, 8, 8]"), std::string::npos) << imp.config_text;

  const std::string by_hand = R"cfg(version: 1
node { name: "c1" op: "convolution" input: "x" attr { key: "kernel" value: "(3,3)" }
       attr { key: "num_filter" value: "4" } attr { key: "pad" value: "(1,1)" } }
node { name: "t1" op: "activation" input: "c1" attr { key: "act_type" value: "tanh" } }
node { name: "p1" op: "pooling" input: "t1" attr { key: "kernel" value: "(2,2)" }
       attr { key: "stride" value: "(2,2)" } }
node { name: "c2" op: "convolution" input: "p1" attr { key: "kernel" value: "(3,3)" }
       attr { key: "num_filter" value: "6" } attr { key: "no_bias" value: "true" } }
node { name: "l2" op: "leaky_relu" input: "c2" attr { key: "slope" value: "0.1" } }
node { name: "p2" op: "pooling" input: "l2" attr { key: "kernel" value: "(2,2)" }
       attr { key: "pool_type" value: "avg" } attr { key: "pooling_convention" value: "full" }
       attr { key: "count_include_pad" value: "false" } }
node { name: "f" op: "flatten" input: "p2" }
node { name: "fc" op: "fully_connected" input: "f" attr { key: "num_hidden" value: "3" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "y" }
data { data_name: "x" label_name: "y" }
)cfg";
  std::map<std::string, Tensor> same = {{"c1_weight", arrays[0].second},
                                        {"c1_bias", arrays[1].second},
                                        {"c2_weight", arrays[2].second},
                                        {"fc_weight", arrays[3].second},
                                        {"fc_bias", arrays[4].second}};
  const Tensor x = Values(Shape{2, 1, 8, 8}, 16), label = Tensor::Empty(Shape{2});
  const std::vector<float> want = RunNet(by_hand, {{"x", x}, {"y", label}}, same);
  const std::vector<float> got = RunNet(imp.config_text, {{"data", x}, {"softmax_label", label}}, Weights(imp));
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], want[k]) << k;
}

// ---------------------------------------------------------------- ResNet

// A pre-activation residual unit as MXNet's ResNet example writes it, then
// global pooling and the classifier.
std::string ResnetUnitJson() {
  SymbolBuilder s;
  using B = SymbolBuilder;
  auto bn = [&](const std::string& name, int in) {
    return s.Op("BatchNorm", name, "\"eps\": \"2e-05\", \"fix_gamma\": \"False\", \"momentum\": \"0.9\"",
                {B::In(in), B::In(s.Var(name + "_gamma")), B::In(s.Var(name + "_beta")),
                 B::In(s.Var(name + "_moving_mean")), B::In(s.Var(name + "_moving_var"))});
  };
  auto conv = [&](const std::string& name, int in) {
    return s.Op("Convolution", name,
                "\"kernel\": \"(3, 3)\", \"no_bias\": \"True\", \"num_filter\": \"4\", \"pad\": \"(1, 1)\", "
                "\"stride\": \"(1, 1)\", \"workspace\": \"256\"",
                {B::In(in), B::In(s.Var(name + "_weight"))});
  };
  const int data = s.Var("data");
  const int c0 = conv("conv0", data);
  const int b1 = bn("unit_bn1", c0);
  const int r1 = s.Op("Activation", "unit_relu1", "\"act_type\": \"relu\"", {B::In(b1)});
  const int c1 = conv("unit_conv1", r1);
  const int b2 = bn("unit_bn2", c1);
  const int r2 = s.Op("Activation", "unit_relu2", "\"act_type\": \"relu\"", {B::In(b2)});
  const int c2 = conv("unit_conv2", r2);
  const int add = s.Op("elemwise_add", "_plus0", "", {B::In(c2), B::In(c0)});
  const int b3 = bn("bn1", add);
  const int r3 = s.Op("Activation", "relu1", "\"act_type\": \"relu\"", {B::In(b3)});
  const int pool = s.Op("Pooling", "pool1", "\"global_pool\": \"True\", \"kernel\": \"(7, 7)\", \"pool_type\": \"avg\"",
                        {B::In(r3)});
  const int flat = s.Op("Flatten", "flatten0", "", {B::In(pool)});
  const int fc = s.Op("FullyConnected", "fc1", "\"num_hidden\": \"10\"",
                      {B::In(flat), B::In(s.Var("fc1_weight")), B::In(s.Var("fc1_bias"))});
  const int sm = s.Op("SoftmaxOutput", "softmax", "", {B::In(fc), B::In(s.Var("softmax_label"))});
  return s.Json({B::In(sm)});
}

NamedTensors ResnetUnitArrays() {
  NamedTensors a = {{"arg:conv0_weight", Values(Shape{4, 3, 3, 3}, 21)},
                    {"arg:unit_conv1_weight", Values(Shape{4, 4, 3, 3}, 22)},
                    {"arg:unit_conv2_weight", Values(Shape{4, 4, 3, 3}, 23)},
                    {"arg:fc1_weight", Values(Shape{10, 4}, 24)},
                    {"arg:fc1_bias", Values(Shape{10}, 25)}};
  uint32_t seed = 30;
  for (const char* bn : {"unit_bn1", "unit_bn2", "bn1"}) {
    a.push_back({Fmt("arg:", bn, "_gamma"), Values(Shape{4}, ++seed)});
    a.push_back({Fmt("arg:", bn, "_beta"), Values(Shape{4}, ++seed)});
    a.push_back({Fmt("aux:", bn, "_moving_mean"), Values(Shape{4}, ++seed)});
    Tensor var = Values(Shape{4}, ++seed);
    for (int64_t k = 0; k < 4; ++k) var.f()[k] = 1.5f + var.f()[k];  // positive
    a.push_back({Fmt("aux:", bn, "_moving_var"), var});
  }
  return a;
}

TEST(MxnetImport, ResnetUnitTestsAndTrainsThroughTheCommand) {
  TempDir dir;
  std::ofstream(dir.File("resnet-symbol.json")) << ResnetUnitJson();
  WriteMxnetParams(dir.File("resnet-0000.params"), ResnetUnitArrays());
  RunResult r = RunFrugal("import-mxnet " + dir.File("resnet-symbol.json") + " " + dir.File("resnet-0000.params") +
                          " --out " + dir.File("resnet") + " --data-shape 4,3,8,8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("17 arrays -> " + dir.File("resnet.frugal") + " (11 params, 6 aux)"), std::string::npos)
      << r.output;
  const CheckpointState ck = LoadCheckpoint(dir.File("resnet.frugal"));
  ASSERT_TRUE(ck.aux.count("unit_bn2_moving_var"));
  EXPECT_EQ(ck.aux.at("unit_bn2_moving_var").f()[3], ResnetUnitArrays()[12].second.f()[3]);
  EXPECT_TRUE(ck.params.count("conv0_weight"));

  // The config gets data sources, as a user adds them.
  std::string config = ReadFile(dir.File("resnet.prototxt"));
  const size_t at = config.find("data {\n");
  ASSERT_NE(at, std::string::npos) << config;
  config.insert(at + 7, "  train { synthetic { num_samples: 8 } }\n  val { synthetic { num_samples: 8 } }\n");
  std::ofstream(dir.File("resnet.prototxt")) << config;
  r = RunFrugal("test --config " + dir.File("resnet.prototxt") + " --checkpoint " + dir.File("resnet.frugal"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(8 samples)"), std::string::npos) << r.output;
  r = RunFrugal("train --config " + dir.File("resnet.prototxt") + " --weights " + dir.File("resnet.frugal") +
                " --max-iters 1 --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("17 matched, 0 missing, 0 wrong shape, 0 unused"), std::string::npos) << r.output;
}

// ---------------------------------------------------------------- LSTM

// MXNet's LSTM example (example/rnn/old/lstm.py), one layer unrolled over 3
// steps: Embedding, SliceChannel over time, weights shared by the steps,
// initial states fed as zeros, Concat, the label transposed and Reshaped.
TEST(MxnetImport, LstmExampleImportsWithSharedWeightsAndZeroStates) {
  constexpr int kSteps = 3, kBatch = 2, kHidden = 5, kEmbed = 4, kVocab = 7;
  SymbolBuilder s;
  using B = SymbolBuilder;
  const int data = s.Var("data");
  const int embed_w = s.Var("embed_weight");
  const int embed =
      s.Op("Embedding", "embed", "\"input_dim\": \"7\", \"output_dim\": \"4\"", {B::In(data), B::In(embed_w)});
  const int words =
      s.Op("SliceChannel", "slice_time", "\"num_outputs\": \"3\", \"squeeze_axis\": \"1\"", {B::In(embed)});
  const int i2h_w = s.Var("l0_i2h_weight"), i2h_b = s.Var("l0_i2h_bias");
  const int h2h_w = s.Var("l0_h2h_weight"), h2h_b = s.Var("l0_h2h_bias");
  int c = s.Var("l0_init_c", "\"__shape__\": \"(2, 5)\"");
  int h = s.Var("l0_init_h", "\"__shape__\": \"(2L, 5L)\"");
  std::vector<std::string> hidden;
  for (int t = 0; t < kSteps; ++t) {
    const std::string p = Fmt("t", t, "_l0_");
    const int i2h =
        s.Op("FullyConnected", p + "i2h", "\"num_hidden\": \"20\"", {B::In(words, t), B::In(i2h_w), B::In(i2h_b)});
    const int h2h = s.Op("FullyConnected", p + "h2h", "\"num_hidden\": \"20\"", {B::In(h), B::In(h2h_w), B::In(h2h_b)});
    const int gates = s.Op("_Plus", p + "plus", "", {B::In(i2h), B::In(h2h)});
    const int g = s.Op("SliceChannel", p + "slice", "\"num_outputs\": \"4\"", {B::In(gates)});
    const int in_gate = s.Op("Activation", p + "in", "\"act_type\": \"sigmoid\"", {B::In(g, 0)});
    const int in_tr = s.Op("Activation", p + "tr", "\"act_type\": \"tanh\"", {B::In(g, 1)});
    const int forget = s.Op("Activation", p + "forget", "\"act_type\": \"sigmoid\"", {B::In(g, 2)});
    const int out_gate = s.Op("Activation", p + "out", "\"act_type\": \"sigmoid\"", {B::In(g, 3)});
    const int fcell = s.Op("_Mul", p + "fc", "", {B::In(forget), B::In(c)});
    const int it = s.Op("_Mul", p + "it", "", {B::In(in_gate), B::In(in_tr)});
    c = s.Op("_Plus", p + "c", "", {B::In(fcell), B::In(it)});
    const int tc = s.Op("Activation", p + "tanh_c", "\"act_type\": \"tanh\"", {B::In(c)});
    h = s.Op("_Mul", p + "h", "", {B::In(out_gate), B::In(tc)});
    hidden.push_back(B::In(h));
  }
  const int concat = s.Op("Concat", "concat", "\"dim\": \"0\", \"num_args\": \"3\"", hidden);
  const int pred = s.Op("FullyConnected", "pred", "\"num_hidden\": \"7\"",
                        {B::In(concat), B::In(s.Var("cls_weight")), B::In(s.Var("cls_bias"))});
  const int label_t = s.Op("transpose", "label_t", "", {B::In(s.Var("softmax_label"))});
  const int label = s.Op("Reshape", "label_r", "\"target_shape\": \"(0,)\"", {B::In(label_t)});
  const int sm = s.Op("SoftmaxOutput", "softmax", "", {B::In(pred), B::In(label)});
  const NamedTensors arrays = {{"arg:embed_weight", Values(Shape{kVocab, kEmbed}, 41)},
                               {"arg:l0_i2h_weight", Values(Shape{20, kEmbed}, 42)},
                               {"arg:l0_i2h_bias", Values(Shape{20}, 43)},
                               {"arg:l0_h2h_weight", Values(Shape{20, kHidden}, 44)},
                               {"arg:l0_h2h_bias", Values(Shape{20}, 45)},
                               {"arg:cls_weight", Values(Shape{kVocab, kHidden}, 46)},
                               {"arg:cls_bias", Values(Shape{kVocab}, 47)}};
  const MxnetImport imp = ImportMxnet(ParseMxnetSymbol(s.Json({B::In(sm)}), "lstm-symbol.json"), arrays, "lstm",
                                      DataShape({kBatch, kSteps}));
  const std::string& text = imp.config_text;
  // Shared weights are variable nodes; the states zero aux variables.
  EXPECT_NE(text.find("node { name: \"l0_i2h_weight\" op: \"variable\" attr { key: \"shape\" value: \"(20,4)\" } }"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("node { name: \"l0_init_h\" op: \"variable\" attr { key: \"shape\" value: \"(2,5)\" } attr { "
                      "key: \"kind\" value: \"aux\" } attr { key: \"init\" value: \"zero\" } }"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("op: \"reshape\" input: \"label_t\" attr { key: \"shape\" value: \"(-1)\" }"), std::string::npos)
      << text;
  EXPECT_NE(text.find("input: \"t0_l0_slice:3\""), std::string::npos) << text;
  EXPECT_EQ(imp.params.size(), 7u);
  EXPECT_EQ(imp.aux.size(), 2u);
  EXPECT_TRUE(imp.params.count("embed_weight"));  // embed's own, left to BuildGraph
  EXPECT_TRUE(imp.params.count("pred_weight"));   // cls_weight, renamed to what BuildGraph makes
  Tensor tokens = Tensor::Empty(Shape{kBatch, kSteps});
  for (int k = 0; k < kBatch * kSteps; ++k) tokens.f()[k] = static_cast<float>((k * 3) % kVocab);
  const std::vector<float> p =
      RunNet(text, {{"data", tokens}, {"softmax_label", Tensor::Empty(Shape{kBatch, kSteps})}}, Weights(imp));
  ASSERT_EQ(p.size(), static_cast<size_t>(kSteps * kBatch * kVocab));
  for (int row = 0; row < kSteps * kBatch; ++row) {
    double sum = 0;
    for (int k = 0; k < kVocab; ++k) sum += p[row * kVocab + k];
    EXPECT_NEAR(sum, 1.0, 1e-5) << row;
  }
  // Time step 0 of sample 1 (row 1) by hand: zero states, so h = o * tanh(i * g).
  const float* e = imp.params.at("embed_weight").f() + 2 * kEmbed;  // token (3 * 3) % 7 of sample 1, step 0
  const float* wi = imp.params.at("l0_i2h_weight").f();
  std::vector<double> gate(20);
  for (int j = 0; j < 20; ++j) {
    gate[j] = imp.params.at("l0_i2h_bias").f()[j] + imp.params.at("l0_h2h_bias").f()[j];
    for (int i = 0; i < kEmbed; ++i) gate[j] += wi[j * kEmbed + i] * e[i];
  }
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  std::vector<double> hid(kHidden), z(kVocab);
  for (int j = 0; j < kHidden; ++j) hid[j] = sig(gate[15 + j]) * std::tanh(sig(gate[j]) * std::tanh(gate[5 + j]));
  double sum = 0;
  for (int k = 0; k < kVocab; ++k) {
    z[k] = imp.params.at("pred_bias").f()[k];
    for (int j = 0; j < kHidden; ++j) z[k] += imp.params.at("pred_weight").f()[k * kHidden + j] * hid[j];
    sum += std::exp(z[k]);
  }
  for (int k = 0; k < kVocab; ++k) EXPECT_NEAR(p[1 * kVocab + k], std::exp(z[k]) / sum, 1e-5) << k;
}

// _ones and _zeros are constants of their shape, the batch filled in for a
// 0 in dim 0: data + ones - zeros adds one to every value.
TEST(MxnetImport, ConstantsTakeTheBatchOfTheData) {
  SymbolBuilder s;
  const int x = s.Var("data");
  const int ones = s.Op("_ones", "one", "\"shape\": \"(0, 3)\", \"dtype\": \"float32\"", {});
  const int zeros = s.Op("_zeros", "zero", "\"shape\": \"(0, 3)\"", {});
  const int sum = s.Op("elemwise_add", "sum", "", {SymbolBuilder::In(x), SymbolBuilder::In(ones)});
  const int out = s.Op("elemwise_sub", "out", "", {SymbolBuilder::In(sum), SymbolBuilder::In(zeros)});
  const MxnetImport imp =
      ImportMxnet(ParseMxnetSymbol(s.Json({SymbolBuilder::In(out)}), "c-symbol.json"), {}, "c", DataShape({2, 3}));
  EXPECT_NE(imp.config_text.find("name: \"one\" op: \"variable\" attr { key: \"shape\" value: \"(2,3)\" }"),
            std::string::npos)
      << imp.config_text;
  Tensor data = Tensor::Empty(Shape{2, 3});
  for (int k = 0; k < 6; ++k) data.f()[k] = 0.5f * k;
  const std::vector<float> got = RunNet(imp.config_text, {{"data", data}}, Weights(imp));
  ASSERT_EQ(got.size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(got[k], 0.5f * k + 1) << k;
}

// SoftmaxActivation's channel mode normalises over dim 1 at each position;
// its instance mode over a 4-D input is refused with the fix.
TEST(MxnetImport, SoftmaxActivationModes) {
  for (const std::string mode : {"channel", "instance"}) {
    SymbolBuilder s;
    const int x = s.Var("data");
    const int y = s.Op("SoftmaxActivation", "act", "\"mode\": \"" + mode + "\"", {SymbolBuilder::In(x)});
    const MxnetSymbol sym = ParseMxnetSymbol(s.Json({SymbolBuilder::In(y)}), "s-symbol.json");
    if (mode == "instance") {
      ExpectError(
          [&] {
            ImportMxnet(sym, {}, "s", DataShape({1, 3, 2, 2}));
          },
          {"s-symbol.json:",
           ": node 'act' (SoftmaxActivation): mode instance takes the softmax over all of an "
           "instance's values (the input is (1,3,2,2)), which frugal's softmax",
           "Flatten the input first, or use mode channel"});
      continue;
    }
    const MxnetImport imp = ImportMxnet(sym, {}, "s", DataShape({1, 3, 2, 2}));
    Tensor data = Tensor::Empty(Shape{1, 3, 2, 2});
    for (int k = 0; k < 12; ++k) data.f()[k] = 0.25f * k - 1;
    const std::vector<float> got = RunNet(imp.config_text, {{"data", data}}, Weights(imp));
    ASSERT_EQ(got.size(), 12u);
    for (int p = 0; p < 4; ++p) {  // position (h, w): the softmax of the 3 channels there
      double sum = 0;
      for (int c = 0; c < 3; ++c) sum += std::exp(data.f()[c * 4 + p]);
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c * 4 + p], std::exp(data.f()[c * 4 + p]) / sum, 1e-6) << c << p;
    }
  }
}

// ---------------------------------------------------------------- MXNet's own files

// Files MXNet 1.9.1 wrote (tools/mxnet/make_test_files.py: a CNN with
// BatchNorm, a residual add, Concat and global pooling by
// Module.save_checkpoint; the LSTM example by Symbol.save and mx.nd.save;
// mx.rnn's LSTM cells, begun from _zeros, under log_softmax,
// SoftmaxActivation and softmax; the fused RNN of mx.sym.RNN and of
// gluon.rnn.LSTM and mx.rnn.FusedRNNCell, each two LSTM layers, and one
// begun from learned states; a convolution under LRN),
// with MXNet's inference output for an input: frugal computes the same.
TEST(MxnetImport, FilesMxnetWroteComputeWhatMxnetComputed) {
  const std::string dir = std::string(FRUGAL_SOURCE_DIR) + "/tests/mxnet/";
  for (const std::string name : {"cnn", "lstm", "rnn", "fused", "gluon", "lrn", "fusedcell", "fusedstate"}) {
    SCOPED_TRACE(name);
    const MxnetSymbol sym = ReadMxnetSymbol(dir + name + "-symbol.json");
    EXPECT_EQ(sym.mxnet_version, 10901);
    std::map<std::string, Tensor> io;
    for (const auto& [key, t] : ReadMxnetParams(dir + name + "-io.params")) io[key] = t;
    const Tensor& x = io.at("data");
    const MxnetImport imp =
        ImportMxnet(sym, ReadMxnetParams(dir + name + "-0000.params"), name, DataShape(x.shape().dims()));
    EXPECT_TRUE(imp.unused.empty());
    std::map<std::string, Tensor> feed{{"data", x}};
    if (name == "cnn" || name == "lrn") feed["softmax_label"] = Tensor::Empty(Shape{x.shape()[0]});
    if (name == "lstm") feed["softmax_label"] = Tensor::Empty(x.shape());
    const std::vector<float> got = RunNet(imp.config_text, feed, Weights(imp));
    const Tensor& want = io.at("output");
    ASSERT_EQ(got.size(), static_cast<size_t>(want.size()));
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want.f()[k], 1e-6) << k;
  }
}

// ---------------------------------------------------------------- bad input

TEST(MxnetImport, BadParamsFilesAreOneLineErrors) {
  const NamedTensors arrays = {{"arg:fc1_weight", Values(Shape{4, 3}, 51)}};
  const std::string good = EncodeMxnetParams(arrays);
  // Header 24 bytes; the array: magic, storage type, ndim, 2 dims, context,
  // type flag (at 24 + 36), 48 bytes of data; then the names.
  ASSERT_EQ(good.size(), 24u + 40 + 48 + 8 + 8 + 14);
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string e = ErrorOf([&] { DecodeMxnetParams(good.substr(0, n), "cut.params"); });
    EXPECT_EQ(e.rfind("cut.params: ", 0), 0u) << n << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  ExpectError([&] { DecodeMxnetParams(good.substr(0, 50), "cut.params"); },
              {"cut.params: truncated MXNet params file: it ends inside array 0 of 1 (its dims)"});

  std::string magic = good;
  magic[0] = 0x13;
  ExpectError([&] { DecodeMxnetParams(magic, "m.params"); },
              {"m.params: not an MXNet params file (magic 0x113, expected 0x112"});

  std::string small = good.substr(0, 24 + 40 + 48);  // the last array's data cut short: dims say (4, 5)
  small[24 + 12 + 8] = 5;
  ExpectError([&] { DecodeMxnetParams(small, "s.params"); },
              {"s.params: array 0 of 1 declares (4,5) float32 = 80 bytes but only 48 bytes are left"});

  std::string dtype = good;
  dtype[24 + 36] = 99;
  ExpectError([&] { DecodeMxnetParams(dtype, "d.params"); },
              {"d.params: array 0 of 1 (4,3) has type flag 99, which frugal does not read"});

  TempDir dir;
  std::ofstream(dir.File("d.params"), std::ios::binary) << dtype;
  ExpectError([&] { ReadMxnetParams(dir.File("nope.params")); },
              {"nope.params: cannot open the MXNet params (No such file or directory"});
  // A folder where a file is expected says so (was "expected a value" or "bad magic").
  ExpectError([&] { ReadMxnetParams(dir.path()); }, {dir.path() + ": is a folder; give the MXNet params file"});
  ExpectError([&] { ReadMxnetSymbol(dir.path()); }, {dir.path() + ": is a folder; give the MXNet symbol file"});
  // Through the command: one line, exit status 1.
  std::ofstream(dir.File("net-symbol.json")) << MxnetMlp().json;
  RunResult r = RunFrugal("import-mxnet " + dir.File("net-symbol.json") + " " + dir.File("d.params") + " --out " +
                          dir.File("net"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("frugal: error: " + dir.File("d.params") + ": array 0 of 1 (4,3) has type flag 99"),
            std::string::npos)
      << r.output;
}

TEST(MxnetImport, BadSymbolFilesAreOneLineErrors) {
  const std::string json = MxnetMlp().json;
  ExpectError([&] { ParseMxnetSymbol(json.substr(0, json.size() / 2), "cut-symbol.json"); },
              {"cut-symbol.json:", "(is the file complete JSON?)"});
  std::string colon = json;
  const size_t at = colon.find("\"name\": \"fc1\"");
  colon.replace(at, 13, "\"name\" \"fc1\"");
  const size_t line = std::count(colon.begin(), colon.begin() + at, '\n') + 1;
  const size_t col = at + 7 - colon.rfind('\n', at);  // the quote of "fc1", 1-based
  ExpectError([&] { ParseMxnetSymbol(colon, "c-symbol.json"); },
              {Fmt("c-symbol.json:", line, ":", col, ": expected ':' after the key, got '\"fc1\"")});
  ExpectError([&] { ParseMxnetSymbol("{\"nodes\": {}, \"heads\": []}", "o-symbol.json"); },
              {"o-symbol.json:1:11: the symbol: \"nodes\" is an object, expected an array"});
  const std::string forward = R"({"nodes": [{"op": "null", "name": "a", "inputs": [[3, 0, 0]]}], "heads": [[0, 0]]})";
  ExpectError([&] { ParseMxnetSymbol(forward, "f-symbol.json"); },
              {"f-symbol.json:1:52: node 0 'a' (null): input 0's node (an earlier node's index) must be a whole number "
               "below 0, got 3"});

  // Unknown operators: all named in one line.
  SymbolBuilder s;
  const int data = s.Var("data");
  const int roi = s.Op("ROIPooling", "roi0", "\"pooled_size\": \"(2, 2)\"", {SymbolBuilder::In(data)});
  const int lrn = s.Op("GridGenerator", "grid0", "\"transform_type\": \"affine\"", {SymbolBuilder::In(roi)});
  const int z = s.Op("_zeros", "zeros0", "\"shape\": \"(0, 4)\"", {});
  const int add = s.Op("elemwise_add", "sum", "", {SymbolBuilder::In(lrn), SymbolBuilder::In(z)});
  const MxnetSymbol sym = ParseMxnetSymbol(s.Json({SymbolBuilder::In(add)}), "u-symbol.json");
  ExpectError([&] { ImportMxnet(sym, {}, "u"); },
              {"u-symbol.json: 2 node(s) use MXNet operators frugal does not import (GridGenerator, ROIPooling): "
               "'roi0' (ROIPooling), 'grid0' (GridGenerator)"});
  // LRN over an even window (MXNet centres it on each channel).
  SymbolBuilder l;
  const int in = l.Var("data");
  const int even = l.Op("LRN", "norm", "\"nsize\": \"4\"", {SymbolBuilder::In(in)});
  ExpectError([&] { ImportMxnet(ParseMxnetSymbol(l.Json({SymbolBuilder::In(even)}), "l-symbol.json"), {}, "l"); },
              {"l-symbol.json:", ": node 'norm' (LRN): nsize '4': frugal's LRN takes an odd window"});
  // A constant's shape leaves only the batch (dim 0) to be inferred.
  SymbolBuilder c;
  const int x = c.Var("data");
  const int zeros = c.Op("_zeros", "z", "\"shape\": \"(4, 0)\"", {});
  const int sum = c.Op("elemwise_add", "sum", "", {SymbolBuilder::In(x), SymbolBuilder::In(zeros)});
  ExpectError(
      [&] {
        ImportMxnet(ParseMxnetSymbol(c.Json({SymbolBuilder::In(sum)}), "z-symbol.json"), {}, "z", DataShape({4, 4}));
      },
      {"z-symbol.json:",
       ": node 'z' (_zeros): shape '(4, 0)' has 0 at dim 1; only dim 0 may be 0 (the batch, "
       "which MXNet infers)"});

  // An attribute frugal cannot express names the node and the value.
  std::string nhwc = json;
  nhwc.replace(nhwc.find("\"act_type\": \"relu\""), 18, "\"act_type\": \"relu\", \"layout\": \"NHWC\"");
  ExpectError([&] { ImportMxnet(ParseMxnetSymbol(nhwc, "a-symbol.json"), MxnetMlp().arrays, "a"); },
              {"a-symbol.json:", ": node 'relu1' (Activation): attribute 'layout' = 'NHWC' has no frugal counterpart"});
  // A weight the params file lacks is named.
  NamedTensors missing = MxnetMlp().arrays;
  missing.pop_back();
  ExpectError([&] { ImportMxnet(ParseMxnetSymbol(json, "w-symbol.json"), missing, "w"); },
              {"w-symbol.json:",
               ": node 'fc2_bias' (null): the params file has no array arg:fc2_bias (nor aux:), which "
               "node 'fc2' reads as its bias"});
}

// A fused RNN that frugal's lstm does not compute, or whose parameters or
// begin states it cannot take, is one line naming the node and the value.
TEST(MxnetImport, FusedRnnItCannotComputeIsAnErrorNamingTheNode) {
  constexpr int64_t kH = 4, kIn = 3;
  // One layer over (T, B, kIn), the data batch first: 4H x kIn + 4H x H weights, 2 x 4H biases.
  const int64_t packed = 4 * kH * kIn + 4 * kH * kH + 8 * kH;
  const Shape one_layer{1, 2, kH};  // a begin state for the one layer, batch 2
  auto import = [&](const std::string& attrs, int64_t values, bool zero_states = true, int head_output = 0,
                    const Shape* state = nullptr) {
    SymbolBuilder s;
    const int batch_first = s.Var("data", "\"__shape__\": \"(2, 5, 3)\"");
    const int data = s.Op("transpose", "steps", "\"axes\": \"(1, 0, 2)\"", {SymbolBuilder::In(batch_first)});
    const int params = s.Var("rnn_parameters");
    const int h = zero_states ? s.Op("_zeros", "h", "\"shape\": \"(1, 0, 4)\"", {}) : s.Var("h_given");
    const int c = s.Op("_zeros", "c", "\"shape\": \"(1, 0, 4)\"", {});
    const int rnn =
        s.Op("RNN", "rnn", "\"state_size\": \"4\", \"num_layers\": \"1\"" + attrs,
             {SymbolBuilder::In(data), SymbolBuilder::In(params), SymbolBuilder::In(h), SymbolBuilder::In(c)});
    NamedTensors arrays = {{"arg:rnn_parameters", Values(Shape{values}, 7)}};
    if (!zero_states) arrays.push_back({"arg:h_given", Values(state ? *state : one_layer, 8)});
    return ImportMxnet(ParseMxnetSymbol(s.Json({SymbolBuilder::In(rnn, head_output)}), "r-symbol.json"), arrays, "r");
  };
  EXPECT_NE(import(", \"mode\": \"lstm\"", packed).config_text.find("op: \"lstm\""), std::string::npos);
  ExpectError([&] { import(", \"mode\": \"gru\"", packed); },
              {"r-symbol.json:", ": node 'rnn' (RNN): mode 'gru': frugal imports the fused RNN in LSTM mode only"});
  ExpectError([&] { import(", \"mode\": \"lstm\", \"bidirectional\": \"True\"", packed); },
              {"node 'rnn' (RNN): bidirectional 'True' is not supported: frugal's lstm computes bidirectional false"});
  ExpectError([&] { import(", \"mode\": \"lstm\", \"projection_size\": \"2\"", packed); },
              {"node 'rnn' (RNN): projection_size '2' is not supported"});
  ExpectError([&] { import(", \"mode\": \"lstm\"", packed + 1); },
              {"node 'rnn' (RNN): its parameters hold 145 values, where num_layers 1 of state_size 4 hold 96 + 16 x "
               "the input size"});
  // A begin state given as an array: each layer's part of it (one layer here).
  const std::string given = import(", \"mode\": \"lstm\"", packed, /*zero_states=*/false).config_text;
  EXPECT_NE(given.find("name: \"rnn_h0_layers\" op: \"split\""), std::string::npos) << given;
  const Shape two_layers{2, 2, kH};
  ExpectError([&] { import(", \"mode\": \"lstm\"", packed, false, 0, &two_layers); },
              {"node 'rnn' (RNN): its begin state 'h_given' is (2,2,4) in the params file, where num_layers 1 and "
               "state_size 4 begin from (1, batch, 4)"});
  ExpectError([&] { import(", \"mode\": \"lstm\", \"state_outputs\": \"True\"", packed, true, 1); },
              {"node 'rnn' (RNN): the symbol's output is its output 1 (a final state)"});
}

// Damage anywhere in either file (bytes changed, the file cut) is an Error,
// never a crash, a hang or another exception: the reader, the import and
// the config it writes, as `frugal import-mxnet` runs them.
TEST(MxnetImport, RandomDamageIsAnErrorNeverACrash) {
  const std::string params = EncodeMxnetParams(ResnetUnitArrays()), json = ResnetUnitJson();
  uint32_t seed = 7;
  auto next = [&seed](size_t n) {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<size_t>(seed >> 8) % n;
  };
  int errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string p = params, j = json;
    std::string& target = trial % 2 ? p : j;
    for (int k = 0, flips = 1 + static_cast<int>(next(3)); k < flips; ++k)
      target[next(target.size())] = static_cast<char>(next(256));
    if (trial % 5 == 0) target.resize(next(target.size()));
    try {
      const MxnetImport imp = ImportMxnet(ParseMxnetSymbol(j, "d-symbol.json"), DecodeMxnetParams(p, "d.params"), "d",
                                          DataShape({4, 3, 8, 8}));
      BuildGraph(ParseConfig(imp.config_text, "d.prototxt", {}));
    } catch (const Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(errors, 1000);  // most damage is found
}

}  // namespace
}  // namespace frugal::test
