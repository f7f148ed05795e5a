// ONNX export (`frugal export-onnx`, ExportOnnx): configs given random
// weights and BatchNorm moving statistics, written as checkpoints, exported,
// imported back by frugal's importer and run: the outputs of frugal's own
// inference; ONNX's checker (Debian's python3-onnx) accepts the files; bad
// inputs are one-line errors naming the node or the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/io.h"
#include "frugal/onnx.h"
#include "frugal/passes/shapes.h"
#include "onnx.pb.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// Flatten, fully_connected (bias and none), relu, dropout, the loss head.
const char* kMlp = R"cfg(version: 1
name: "mlp"
node { name: "flat"  op: "flatten" input: "data" }
node { name: "fc1"   op: "fully_connected" input: "flat" attr { key: "num_hidden" value: "16" } }
node { name: "relu1" op: "relu" input: "fc1" }
node { name: "drop"  op: "dropout" input: "relu1" attr { key: "p" value: "0.5" } }
node { name: "fc2"   op: "fully_connected" input: "drop" attr { key: "num_hidden" value: "5" }
       attr { key: "no_bias" value: "true" } }
node { name: "fc3"   op: "fully_connected" input: "fc2" attr { key: "num_hidden" value: "10" } }
node { name: "prob"  op: "softmax_cross_entropy" input: "fc3" input: "label" }
data { batch_size: 4 sample_shape: [1, 6, 6] }
)cfg";

// A residual network in small: convolution with and without bias,
// batch_norm fused with its relu (fix_gamma false and true), max, average
// and global pooling, a sum of branches, a strided 1x1 projection, a fully
// connected layer on the pooled (N, C, 1, 1) without a flatten.
const char* kResNet = R"cfg(version: 1
name: "resnet"
node { name: "conv0" op: "convolution" input: "data" attr { key: "kernel" value: "(3,3)" }
       attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } attr { key: "no_bias" value: "true" } }
node { name: "bn0"   op: "batch_norm" input: "conv0" attr { key: "fix_gamma" value: "false" } }
node { name: "relu0" op: "relu" input: "bn0" }
node { name: "pool0" op: "pooling" input: "relu0" attr { key: "pool_type" value: "max" }
       attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } }
node { name: "conv1" op: "convolution" input: "pool0" attr { key: "kernel" value: "(3,3)" }
       attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "8" } }
node { name: "bn1"   op: "batch_norm" input: "conv1" attr { key: "eps" value: "0.00002" } }
node { name: "relu1" op: "activation" input: "bn1" attr { key: "act_type" value: "relu" } }
node { name: "add"   op: "add_n" input: "relu1" input: "pool0" }
node { name: "avg"   op: "pooling" input: "add" attr { key: "pool_type" value: "avg" }
       attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } }
node { name: "proj"  op: "convolution" input: "avg" attr { key: "kernel" value: "(1,1)" }
       attr { key: "stride" value: "(2,2)" } attr { key: "num_filter" value: "6" }
       attr { key: "no_bias" value: "true" } }
node { name: "gpool" op: "pooling" input: "proj" attr { key: "pool_type" value: "avg" }
       attr { key: "global_pool" value: "true" } }
node { name: "fc"    op: "fully_connected" input: "gpool" attr { key: "num_hidden" value: "10" } }
node { name: "prob"  op: "softmax_cross_entropy" input: "fc" input: "label" }
data { batch_size: 4 sample_shape: [3, 8, 8] }
)cfg";

// Every other op the export maps, each an output of the graph.
const char* kOthers = R"cfg(version: 1
name: "others"
node { name: "fc"   op: "fully_connected" input: "data" attr { key: "num_hidden" value: "6" } }
node { name: "sig"  op: "activation" input: "fc" attr { key: "act_type" value: "sigmoid" } }
node { name: "th"   op: "activation" input: "fc" attr { key: "act_type" value: "tanh" } }
node { name: "sr"   op: "activation" input: "fc" attr { key: "act_type" value: "softrelu" } }
node { name: "cat"  op: "concat" input: "sig" input: "th" input: "sr" attr { key: "num_args" value: "3" }
       attr { key: "dim" value: "1" } }
node { name: "r"    op: "reshape" input: "cat" attr { key: "shape" value: "(4,3,6)" } }
node { name: "t"    op: "transpose" input: "r" attr { key: "axes" value: "(0,-1,1)" } }
node { name: "t2"   op: "transpose" input: "t" }
node { name: "ln"   op: "layer_norm" input: "t" attr { key: "axis" value: "-1" } attr { key: "eps" value: "0.001" } }
node { name: "ln2"  op: "layer_norm" input: "t" attr { key: "no_bias" value: "true" } }
node { name: "lk"   op: "leaky_relu" input: "ln" attr { key: "slope" value: "0.1" } }
node { name: "elu"  op: "leaky_relu" input: "ln" attr { key: "act_type" value: "elu" }
       attr { key: "slope" value: "0.5" } }
node { name: "ed"   op: "expand_dims" input: "fc" attr { key: "axis" value: "1" } }
node { name: "sm"   op: "softmax" input: "fc" attr { key: "axis" value: "1" } }
node { name: "lsm"  op: "log_softmax" input: "fc" }
node { name: "e"    op: "exp" input: "fc" }
node { name: "q"    op: "add_scalar" input: "e" attr { key: "scalar" value: "0.5" } }
node { name: "a"    op: "add" input: "fc" input: "th" }
node { name: "s"    op: "sub" input: "fc" input: "sig" }
node { name: "m"    op: "mul" input: "fc" input: "sr" }
node { name: "d"    op: "div" input: "fc" input: "q" }
node { name: "mx"   op: "maximum" input: "fc" input: "th" }
node { name: "mn"   op: "minimum" input: "fc" input: "th" }
node { name: "pw"   op: "power" input: "q" input: "sig" }
node { name: "lg"   op: "log" input: "q" }
node { name: "sq"   op: "sqrt" input: "q" }
node { name: "ab"   op: "abs" input: "fc" }
node { name: "ng"   op: "negative" input: "fc" }
node { name: "er"   op: "erf" input: "fc" }
node { name: "fl"   op: "floor" input: "fc" }
node { name: "ce"   op: "ceil" input: "fc" }
node { name: "ss"   op: "sub_scalar" input: "fc" attr { key: "scalar" value: "0.25" } }
node { name: "ms"   op: "mul_scalar" input: "fc" attr { key: "scalar" value: "-3" } }
node { name: "ds"   op: "div_scalar" input: "fc" attr { key: "scalar" value: "7" } }
node { name: "rs"   op: "rsub_scalar" input: "fc" attr { key: "scalar" value: "2" } }
node { name: "rd"   op: "rdiv_scalar" input: "q" attr { key: "scalar" value: "3" } }
node { name: "cl"   op: "clip" input: "fc" attr { key: "a_min" value: "-0.5" } attr { key: "a_max" value: "0.5" } }
node { name: "id"   op: "identity" input: "fc" }
node { name: "bg"   op: "block_grad" input: "fc" }
node { name: "g8"   op: "fully_connected" input: "data" attr { key: "num_hidden" value: "8" } }
node { name: "c2"   op: "fully_connected" input: "data" attr { key: "num_hidden" value: "2" } }
node { name: "cell" op: "lstm_cell" input: "g8" input: "g8" input: "c2" }
node { name: "reg"  op: "fully_connected" input: "fc" attr { key: "num_hidden" value: "1" } }
node { name: "lin"  op: "linear_regression_output" input: "reg" input: "label" }
node { name: "logi" op: "logistic_regression_output" input: "reg" input: "label" }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { batch_size: 4 sample_shape: [6] }
)cfg";

// The char LSTM of models/lstm/char_lm.prototxt in small: two layers of 16
// units over two runs of 3 steps of a 12-character vocabulary.
const std::vector<std::string> kSmallLstm = {"layers=2", "hidden=16", "seq_len=6", "chunk=3", "batch=4", "vocab=12"};

std::string CharLm() { return ReadTextFile(std::string(FRUGAL_SOURCE_DIR) + "/models/lstm/char_lm.prototxt"); }

// The GPT of models/gpt/gpt.prototxt in small (tests/interchange/onnx_gpt_test.cc takes it through ONNX).
const std::vector<std::string> kSmallGpt = {"layers=1", "heads=2", "d_model=16", "seq_len=8", "batch=4", "vocab=16"};

std::string Gpt() { return ReadTextFile(std::string(FRUGAL_SOURCE_DIR) + "/models/gpt/gpt.prototxt"); }

// The shapes of the data inputs g reads: data (batch, sample_shape...), label (batch, label_shape...).
std::vector<std::pair<std::string, Shape>> InputShapes(const ConfigFile& cfg, const Graph& g) {
  const int64_t batch = cfg.net.data().batch_size();
  std::vector<int64_t> data{batch}, label{batch};
  for (int64_t d : cfg.net.data().sample_shape()) data.push_back(d);
  for (int64_t d : cfg.net.data().label_shape()) label.push_back(d);
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const Node& n : g.nodes())
    if (n.var == VarKind::kInput) shapes.push_back({n.name, Shape(n.name == "label" ? label : data)});
  return shapes;
}

Tensor Uniform(const Shape& s, float lo, float hi, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::Empty(s);
  for (int64_t k = 0; k < t.size(); ++k) t.f()[k] = u(*rng);
  return t;
}

// Random parameters and moving statistics (means in [-0.5, 0.5], variances
// in [0.5, 2]: not the initial 0 and 1) in a checkpoint of the config.
CheckpointState RandomCheckpoint(const std::string& text, const std::vector<std::string>& defines) {
  const ConfigFile cfg = ParseConfig(text, "net.prototxt", defines);
  Graph g = BuildGraph(cfg);
  InferShapes(&g, InputShapes(cfg, g));
  std::mt19937 rng(7);
  CheckpointState c;
  c.config_text = text;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    const Shape& s = g.shape(Entry{i, 0});
    const bool var = n.name.size() > 4 && n.name.compare(n.name.size() - 4, 4, "_var") == 0;
    if (n.var == VarKind::kParam) c.params[n.name] = Uniform(s, -1, 1, &rng);
    if (n.var == VarKind::kAux) c.aux[n.name] = var ? Uniform(s, 0.5f, 2, &rng) : Uniform(s, -0.5f, 0.5f, &rng);
  }
  return c;
}

// A config's model (with --define values) written as a checkpoint and exported by the command.
struct Exported {
  TempDir dir;
  std::string config, checkpoint, model;
  std::vector<std::string> defines;
  CheckpointState state;
  Exported(const std::string& name, const std::string& text, std::vector<std::string> defs = {})
      : defines(std::move(defs)), state(RandomCheckpoint(text, defines)) {
    config = dir.Write(name + ".prototxt", text);
    checkpoint = dir.File(name + ".frugal");
    model = dir.File(name + ".onnx");
    SaveCheckpoint(checkpoint, state);
  }
  RunResult Export() const {
    std::string args = "export-onnx --config " + config + " --checkpoint " + checkpoint + " --out " + model;
    for (const std::string& d : defines) args += " --define " + d;
    return RunFrugal(args);
  }
};

// Exports the config through the command, imports the file with frugal's
// importer and runs both on one random batch (uniform in [-1, 1], or token
// ids below `tokens`): every output the same.
void ExpectRoundTrip(const std::string& name, const std::string& text, const std::vector<std::string>& defines = {},
                     int tokens = 0) {
  Exported ex(name, text, defines);
  RunResult r = ex.Export();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("-> " + ex.model + ": opset 17"), std::string::npos) << r.output;

  const ConfigFile cfg = ParseConfig(text, ex.config, defines);
  const Graph g = BuildGraph(cfg);
  std::mt19937 rng(11);
  std::map<std::string, Tensor> vars;  // the label (zeros: class 0) only feeds loss heads
  for (const auto& [name, shape] : InputShapes(cfg, g))
    vars[name] = name != "data" ? Tensor::Empty(shape) : Uniform(shape, tokens ? 0 : -1, tokens ? tokens : 1, &rng);
  Tensor& x = vars.at("data");
  for (int64_t i = 0; tokens && i < x.size(); ++i) x.f()[i] = std::floor(x.f()[i]);
  for (const auto* part : {&ex.state.params, &ex.state.aux}) vars.insert(part->begin(), part->end());
  const std::vector<Tensor> want = RunForward(g, vars);

  OnnxImportOptions opts;
  opts.batch = cfg.net.data().batch_size();  // where the batch axis is dynamic
  OnnxImport imp = ImportOnnxFile(ex.model, opts);
  ASSERT_TRUE(imp.unsupported.empty()) << DescribeUnsupported(imp.unsupported);
  ASSERT_EQ(imp.inputs.size(), 1u);  // the label only feeds loss heads
  std::map<std::string, Tensor> back = imp.values;
  back[imp.graph.node(imp.inputs[0].node).name] = x;
  const std::vector<Tensor> got = RunForward(imp.graph, back);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape()) << imp.output_names[k];
    for (int64_t i = 0; i < want[k].size(); ++i) {
      const float w = want[k].f()[i];
      ASSERT_NEAR(got[k].f()[i], w, 1e-5 * std::max(1.f, std::fabs(w))) << imp.output_names[k] << "[" << i << "]";
    }
  }
}

TEST(OnnxExport, MlpImportsBackToTheSameOutputs) { ExpectRoundTrip("mlp", kMlp); }

TEST(OnnxExport, ResNetWithMovingStatisticsImportsBackToTheSameOutputs) { ExpectRoundTrip("resnet", kResNet); }

TEST(OnnxExport, EveryOtherMappedOpImportsBackToTheSameOutputs) { ExpectRoundTrip("others", kOthers); }

// Embedding, split with squeeze_axis over data and label, lstm_cell (h and c
// read by the next step and the layer above), the initial state as aux values,
// a loss head at every step.
TEST(OnnxExport, CharLstmImportsBackToTheSameOutputs) { ExpectRoundTrip("char_lm", CharLm(), kSmallLstm, 12); }

// `frugal import-onnx` on frugal's own export of a net with batch_norm ->
// relu pairs (kResNet's bn0 and bn1): the config it writes builds them
// fused again, as the trained config did (the command aborted on a CHECK of
// the node count before), and that config with the weights the command
// wrote computes what the trained model did.
TEST(OnnxExport, ImportOnnxCommandRebuildsFusedBatchNormRelu) {
  Exported ex("resnet", kResNet);
  ASSERT_EQ(ex.Export().exit_code, 0);
  const std::string prefix = ex.dir.File("imported");
  RunResult r = RunFrugal("import-onnx " + ex.model + " --out " + prefix);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("Check failed"), std::string::npos) << r.output;

  const ConfigFile back = LoadConfig(prefix + ".prototxt", {});
  const Graph g = BuildGraph(back);
  int fused = 0;
  for (const Node& n : g.nodes())
    fused += !n.is_variable() && n.op->name() == "batch_norm" && n.attrs.count("act_type");
  EXPECT_EQ(fused, 2);

  const ConfigFile cfg = ParseConfig(kResNet, ex.config, {});
  std::mt19937 rng(5);
  const Tensor x = Uniform(Shape{4, 3, 8, 8}, -1, 1, &rng);
  std::map<std::string, Tensor> vars = {{"data", x}, {"label", Tensor::Empty(Shape{4})}};
  for (const auto* part : {&ex.state.params, &ex.state.aux}) vars.insert(part->begin(), part->end());
  const std::vector<Tensor> want = RunForward(BuildGraph(cfg), vars);
  const CheckpointState ck = LoadCheckpoint(prefix + ".frugal");
  // The parameters come back under the trained config's names (bn+relu
  // pairs included), so the config itself reads the imported checkpoint.
  auto names = [](const std::map<std::string, Tensor>& m) {
    std::set<std::string> out;
    for (const auto& [name, t] : m) out.insert(name);
    return out;
  };
  EXPECT_EQ(names(ck.params), names(ex.state.params));
  EXPECT_EQ(names(ck.aux), names(ex.state.aux));
  std::map<std::string, Tensor> weights = ck.params;
  weights.insert(ck.aux.begin(), ck.aux.end());
  weights[back.net.data().data_name()] = x;
  const std::vector<Tensor> got = RunForward(g, weights);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got[0].shape(), want[0].shape());
  for (int64_t i = 0; i < want[0].size(); ++i) ASSERT_NEAR(got[0].f()[i], want[0].f()[i], 1e-5) << i;
}

// What import-onnx writes is what every command reads: the weights as a
// checkpoint (PREFIX.frugal; a PREFIX.params of its own format was read by
// none), which `frugal test --checkpoint` evaluates to the trained model's
// metrics and `frugal train --weights` loads whole, once the config has data
// sources and a loss head, as a user adds them.
TEST(OnnxExport, ImportOnnxCommandWritesACheckpointTestAndTrainRead) {
  Exported ex("resnet", kResNet);
  ASSERT_EQ(ex.Export().exit_code, 0);
  const std::string prefix = ex.dir.File("imported");
  RunResult r = RunFrugal("import-onnx " + ex.model + " --out " + prefix + " --batch 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(prefix + ".frugal (10 params, 4 aux, "), std::string::npos) << r.output;

  const std::string sources =
      "data {\n  train { synthetic { num_samples: 8 } }\n  val { synthetic { num_samples: 8 } }\n";
  std::string config = ReadTextFile(prefix + ".prototxt");
  const std::string softmax = "op: \"softmax\" input: \"fc\" attr { key: \"axis\" value: \"1\" }";
  ASSERT_NE(config.find(softmax), std::string::npos) << config;
  config.replace(config.find(softmax), softmax.size(), "op: \"softmax_cross_entropy\" input: \"fc\" input: \"label\"");
  config.replace(config.find("data {\n"), 7, sources);
  ex.dir.Write("imported.prototxt", config);
  std::string trained = kResNet;
  trained.replace(trained.find("data {"), 6, sources);
  const std::string trained_config = ex.dir.Write("trained.prototxt", trained);

  // The same metrics as the trained config with its checkpoint.
  auto metrics = [](const RunResult& r) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.output, m, std::regex("accuracy=[^\n]*"))) << r.output;
    return m.size() ? m.str(0) : "";
  };
  r = RunFrugal("test --config " + prefix + ".prototxt --checkpoint " + prefix + ".frugal");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  RunResult want = RunFrugal("test --config " + trained_config + " --checkpoint " + ex.checkpoint);
  ASSERT_EQ(want.exit_code, 0) << want.output;
  EXPECT_EQ(metrics(r), metrics(want));
  EXPECT_NE(metrics(r), "");

  r = RunFrugal("train --config " + prefix + ".prototxt --weights " + prefix + ".frugal --max-iters 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("14 matched, 0 missing, 0 wrong shape, 0 unused"), std::string::npos) << r.output;
}

TEST(OnnxExport, TheTestConfigsUseEveryMappedOp) {
  std::set<std::string> used;
  for (const auto& [text, defines] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {kMlp, {}}, {kResNet, {}}, {kOthers, {}}, {CharLm(), kSmallLstm}, {Gpt(), kSmallGpt}}) {
    const Graph g = BuildGraph(ParseConfig(text, "net.prototxt", defines));  // held: nodes() refers into it
    for (const Node& n : g.nodes())
      if (!n.is_variable()) used.insert(n.op->name());
  }
  for (const std::string& op : OnnxExportOps()) EXPECT_TRUE(used.count(op)) << op << " is exported but not tested";
}

TEST(OnnxExport, InferenceGraphDropsDropoutAndKeepsMovingStatistics) {
  Exported ex("resnet", kResNet);
  ASSERT_EQ(ex.Export().exit_code, 0);
  const onnx::ModelProto m = ReadOnnxModel(ex.model);
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : m.graph().initializer()) inits[t.name()] = &t;
  int bns = 0;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != "BatchNormalization") continue;
    ++bns;
    ASSERT_EQ(n.input_size(), 5);
    const std::string& bn = n.name();  // a Relu after it too: the Relu has the relu's name
    EXPECT_EQ(n.input(3), bn + "_moving_mean");
    EXPECT_EQ(n.input(4), bn + "_moving_var");
    for (const std::string& name : {bn + "_moving_mean", bn + "_moving_var"}) {  // the checkpoint's bits
      const Tensor& want = ex.state.aux.at(name);
      const onnx::TensorProto& t = *inits.at(name);
      ASSERT_EQ(t.raw_data().size(), want.size() * sizeof(float));
      EXPECT_EQ(std::memcmp(t.raw_data().data(), want.f(), t.raw_data().size()), 0) << name;
    }
  }
  EXPECT_EQ(bns, 2);
  EXPECT_EQ(m.opset_import(0).version(), 17);
  ASSERT_EQ(m.graph().output_size(), 1);
  EXPECT_EQ(m.graph().output(0).name(), "prob");

  Exported mlp("mlp", kMlp);
  ASSERT_EQ(mlp.Export().exit_code, 0);
  int after_dropout = 0;
  const onnx::ModelProto mm = ReadOnnxModel(mlp.model);
  for (const auto& n : mm.graph().node()) {
    EXPECT_NE(n.op_type(), "Dropout");
    after_dropout += n.op_type() == "Gemm" && n.input(0) == "relu1";  // fc2 reads what dropout read
  }
  EXPECT_EQ(after_dropout, 1);
}

// The label's split only feeds the loss heads: neither it nor the label is
// in the model. Every run's lstm names both outputs it gives (y, cs:
// "<node>:1"), and the data's split all its parts.
TEST(OnnxExport, CharLstmLeavesOutTheLabelAndNamesEveryOutput) {
  Exported ex("char_lm", CharLm(), kSmallLstm);
  RunResult r = ex.Export();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const onnx::ModelProto m = ReadOnnxModel(ex.model);
  ASSERT_EQ(m.graph().input_size(), 1);
  EXPECT_EQ(m.graph().input(0).name(), "data");
  ASSERT_EQ(m.graph().output_size(), 2);
  EXPECT_EQ(m.graph().output(1).name(), "chunks/1/prob");
  std::set<std::string> made;
  for (const auto& n : m.graph().node()) {
    made.insert(n.output().begin(), n.output().end());
    EXPECT_EQ(n.name().rfind("targets", 0), std::string::npos) << n.name();
    for (const std::string& in : n.input()) EXPECT_NE(in, "label") << n.name();
  }
  for (const char* v : {"tokens", "tokens:1", "chunks/0/layers/1/rnn", "chunks/0/layers/1/rnn:1"})
    EXPECT_TRUE(made.count(v)) << v;
  EXPECT_FALSE(made.count("chunks/0/layers/1/rnn:2"));  // the gates, for the backward pass only
}

// The MLP builds at any batch size: its batch axis is dynamic, and the model
// the same whatever --batch it is exported at; the ResNet's Flatten-free
// classifier too.
TEST(OnnxExport, TheBatchAxisIsDynamicAndBfloat16ExportsFloat32) {
  Exported ex("mlp", kMlp);
  const std::string args = "export-onnx --config " + ex.config + " --checkpoint " + ex.checkpoint + " --out ";
  ASSERT_EQ(RunFrugal(args + ex.model).exit_code, 0);
  const std::string bf16 = ex.dir.File("bf16.onnx"), batch3 = ex.dir.File("batch3.onnx");
  RunResult r = RunFrugal(args + bf16 + " --dtype bf16");  // the activations' type in training only
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadOnnxModel(bf16).SerializeAsString(), ReadOnnxModel(ex.model).SerializeAsString());
  r = RunFrugal(args + batch3 + " --batch 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const onnx::ModelProto m = ReadOnnxModel(batch3);
  EXPECT_EQ(m.SerializeAsString(), ReadOnnxModel(ex.model).SerializeAsString());
  ASSERT_EQ(m.graph().input_size(), 1);
  const auto& dims = m.graph().input(0).type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 4);
  EXPECT_EQ(dims[0].dim_param(), "batch");
  EXPECT_EQ(dims[1].dim_value(), 1);
  EXPECT_EQ(m.graph().output(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  std::string axis;
  for (const auto& p : m.metadata_props())
    if (p.key() == "frugal.batch_axis") axis = p.value();
  EXPECT_EQ(axis, "dynamic");
}

// ONNX's own checker, with shape inference (full_check), on a file: Debian's
// python3-onnx, which is for Debian's python3 (not another on the PATH).
RunResult OnnxCheck(const std::string& path) {
  return RunShell(
      "/usr/bin/python3 -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), "
      "full_check=True)' " +
      path);
}

TEST(OnnxExport, OnnxCheckerAcceptsTheExportedModels) {
  // python3-onnx is a dependency (tools/install_deps.sh): missing, this fails.
  RunResult r = RunShell("/usr/bin/python3 -c 'import onnx'");
  ASSERT_EQ(r.exit_code, 0) << "python3-onnx is missing: run tools/install_deps.sh (apt-get install python3-onnx)\n"
                            << r.output;
  const std::vector<std::pair<std::string, std::string>> configs = {
      {"mlp", kMlp}, {"resnet", kResNet}, {"others", kOthers}, {"char_lm", CharLm()}};
  for (const auto& [name, text] : configs) {
    Exported ex(name, text, name == "char_lm" ? kSmallLstm : std::vector<std::string>{});
    ASSERT_EQ(ex.Export().exit_code, 0);
    r = OnnxCheck(ex.model);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.output;
  }
  // The checker is not a rubber stamp: an attribute of the wrong type fails it.
  Exported ex("mlp", kMlp);
  ASSERT_EQ(ex.Export().exit_code, 0);
  onnx::ModelProto m = ReadOnnxModel(ex.model);
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Gemm") n.mutable_attribute(0)->set_type(onnx::AttributeProto::FLOAT);
  WriteOnnxModel(m, ex.model);
  r = OnnxCheck(ex.model);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("type field and data field mismatch in attribute transB"), std::string::npos) << r.output;
}

TEST(OnnxExport, ErrorsNameTheNodeOrTheFile) {
  const std::string sin = R"cfg(version: 1
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "3" } }
node { name: "g"  op: "sin" input: "fc" }
data { batch_size: 2 sample_shape: [4] }
)cfg";
  Exported ex("sin", sin);
  RunResult r = ex.Export();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("frugal: error: " + ex.config +
                          ":3:1: node 'g' (sin): op 'sin' has no ONNX mapping; "
                          "export supports: abs, activation, add,"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(change the node, or add a rule in src/interchange/onnx/exporter.cc)"), std::string::npos)
      << r.output;

  r = RunFrugal("export-onnx --config " + ex.config + " --checkpoint " + ex.dir.File("nope.frugal") + " --out " +
                ex.model);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("frugal: error: checkpoint " + ex.dir.File("nope.frugal") + ": cannot open"),
            std::string::npos)
      << r.output;

  Exported mlp("mlp", kMlp);  // a checkpoint of another config
  r = RunFrugal("export-onnx --config " + ex.config + " --checkpoint " + mlp.checkpoint + " --out " + ex.model);
  EXPECT_NE(
      r.output.find(
          "its parameters do not match the model's: 2 missing (the first: fc_bias), 5 not in the model (the first: "
          "fc1_bias)"),
      std::string::npos)
      << r.output;
  r = RunFrugal("export-onnx --config " + ex.config + " --out " + ex.model);
  EXPECT_NE(r.output.find("export-onnx needs --checkpoint FILE"), std::string::npos) << r.output;
  r = RunFrugal("export-onnx --config " + ex.config + " --checkpoint " + ex.checkpoint);
  EXPECT_NE(r.output.find("export-onnx needs --out FILE"), std::string::npos) << r.output;
  r = RunFrugal("export-onnx --config " + mlp.config + " --checkpoint " + mlp.checkpoint + " --out " +
                ex.dir.File("no/such/dir/m.onnx"));
  EXPECT_NE(r.output.find("no/such/dir/m.onnx: cannot write (No such file or directory"), std::string::npos)
      << r.output;
}

// The graph of config nodes on data of this sample shape, shapes inferred.
Graph Built(const std::string& nodes, const std::string& sample) {
  const std::string text = "version: 1\n" + nodes + "\ndata { batch_size: 2 sample_shape: " + sample + " }\n";
  const ConfigFile cfg = ParseConfig(text, "net.prototxt", {});
  Graph g = BuildGraph(cfg);
  InferShapes(&g, InputShapes(cfg, g));
  return g;
}

// Zeros for every parameter and aux variable.
std::map<std::string, Tensor> GraphValues(const Graph& g) {
  std::map<std::string, Tensor> values;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).var == VarKind::kParam || g.node(i).var == VarKind::kAux)
      values[g.node(i).name] = Tensor::Empty(g.shape(Entry{i, 0}));
  return values;
}

TEST(OnnxExport, ConfigurationsOnnxCannotExpressAreErrors) {
  Graph g = Built(R"cfg(node { name: "p" op: "pooling" input: "data" attr { key: "kernel" value: "(2,2)" }
                        attr { key: "pooling_convention" value: "full" } })cfg",
                  "[1, 5, 5]");
  ExpectError([&] { ExportOnnx(g, GraphValues(g), "net"); },
              {"net.prototxt:2:1: node 'p' (pooling): pooling_convention full is not exported"});
  g = Built(R"cfg(node { name: "bn" op: "batch_norm" input: "data" }
               node { name: "m" op: "relu" input: "bn:1" })cfg",
            "[3]");
  ExpectError([&] { ExportOnnx(g, GraphValues(g), "net"); },
              {"node 'm' (relu): reads output 1 of 'bn', which the ONNX export does not make"});
  ExpectError([&] { ExportOnnx(g, {}, "net"); }, {"node 'bn' (batch_norm): no value for its input 'bn_beta'"});
  g = Built(R"cfg(node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "8" } }
               node { name: "cell" op: "lstm_cell" input: "fc" input: "fc" input: "data" }
               node { name: "gates" op: "relu" input: "cell:2" })cfg",
            "[2]");
  ExpectError([&] { ExportOnnx(g, GraphValues(g), "net"); },
              {"node 'gates' (relu): reads output 2 of 'cell', which the ONNX export does not make "
               "(it makes an op's visible outputs: 2 of lstm_cell)"});
}

}  // namespace
}  // namespace frugal::test
