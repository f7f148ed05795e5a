// The GPT of models/gpt/gpt.prototxt, in small, through ONNX: `frugal train`
// a few steps, `export-onnx` (attention, gelu and the linear_cross_entropy
// head as standard opset-17 ops, a dynamic batch axis, the text pipeline in
// the metadata), `import-onnx` (the compositions back into frugal's own ops)
// and `frugal test` of both with the same metrics, at the export's batch
// size and another; the ONNX ops imported one by one compute what frugal's
// forward pass does.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "frugal/checkpoint.h"
#include "frugal/config.h"
#include "frugal/io.h"
#include "frugal/onnx.h"
#include "frugal/op.h"
#include "onnx.pb.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// A corpus of 11 characters (12 with <unk>), repeated with variations.
std::string Corpus(int lines) {
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "as", "tame", "cats", "do"};
  std::string s;
  for (int i = 0; i < lines; ++i) {
    for (int w = 0; w < 5; ++w) s += std::string(words[(i * 7 + w * 3) % 10]) + (w < 4 ? " " : ".\n");
  }
  return s;
}

// The characters of text in order of first appearance: id k + 1 is char k
// (id 0 is <unk>), as frugal's text source numbers them.
std::string FirstAppearances(const std::string& text) {
  std::string chars;
  for (char c : text)
    if (chars.find(c) == std::string::npos) chars += c;
  return chars;
}

// The GPT at 1 layer of 16 features, 2 heads, 8 positions, batch 4, over the corpus.
struct TinyGpt {
  TempDir dir;
  std::string train, val, checkpoints, model;
  std::vector<std::string> defines;
  TinyGpt() {
    train = dir.Write("train.txt", Corpus(40));
    val = dir.Write("valid.txt", Corpus(9));
    checkpoints = dir.File("ck");
    model = dir.File("gpt.onnx");
    defines = {"layers=1", "heads=2", "d_model=16", "seq_len=8", "batch=4", "vocab=16", "train=" + train, "val=" + val};
  }
  std::string Defines() const {
    std::string s;
    for (const std::string& d : defines) s += " --define " + d;
    return s;
  }
};

// "test-accuracy=... (N samples)" of a `frugal test` run.
std::string Metrics(const RunResult& r) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, std::regex("test-accuracy=[^\n]*"))) << r.output;
  return m.size() ? m.str(0) : "";
}

// Trains the tiny GPT 3 steps and exports its checkpoint.
void TrainAndExport(const TinyGpt& gpt) {
  RunResult r = RunFrugal("train --config models/gpt/gpt.prototxt" + gpt.Defines() +
                          " --max-iters 3 --checkpoint-dir " + gpt.checkpoints);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunFrugal("export-onnx --checkpoint " + gpt.checkpoints + " --out " + gpt.model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("note:"), std::string::npos) << r.output;  // nothing left out
}

// The imported config as a user completes it for `frugal test`: the
// validation text and, in place of the classifier and its softmax, the
// linear_cross_entropy head over the same weights (head_weight, head_bias:
// a model frugal exported keeps its parameters' names).
std::string Completed(std::string config, const TinyGpt& gpt) {
  const std::regex fc("node \\{ name: \"head_logits\" op: \"fully_connected\" input: \"ln_f\"[^\n]*\n");
  const std::regex softmax("node \\{ name: \"head\" op: \"softmax\"[^\n]*\n");
  EXPECT_TRUE(std::regex_search(config, fc)) << config;
  EXPECT_TRUE(std::regex_search(config, softmax)) << config;
  config = std::regex_replace(config, softmax, "");
  config = std::regex_replace(
      config, fc,
      "node { name: \"targets\" op: \"reshape\" input: \"label\" attr { key: \"shape\" value: \"(-1)\" } }\n"
      "node { name: \"head_logits\" op: \"linear_cross_entropy\" input: \"ln_f\" input: \"targets\""
      " input: \"head_weight\" input: \"head_bias\" attr { key: \"num_hidden\" value: \"16\" } }\n");
  config = std::regex_replace(config, std::regex("output: \"head\"\n"), "output: \"head_logits\"\n");
  const size_t data = config.find("data {\n");
  EXPECT_NE(data, std::string::npos) << config;
  config.replace(data, 7,
                 "solver { metric: \"accuracy\" metric: \"cross_entropy\" metric: \"perplexity\" }\n"
                 "data {\n  val { text { path: \"" +
                     gpt.val + "\" vocab_path: \"" + gpt.train + "\" seq_len: 8 bptt: false } }\n  label_shape: [8]\n");
  return config;
}

TEST(OnnxGpt, TrainedGptImportsBackWithTheSameTestMetricsAtAnyBatch) {
  TinyGpt gpt;
  ASSERT_NO_FATAL_FAILURE(TrainAndExport(gpt));
  // Imported at batch 2, not the export's 4: the batch axis is dynamic.
  const std::string prefix = gpt.dir.File("imported");
  RunResult r = RunFrugal("import-onnx " + gpt.model + " --out " + prefix + " --batch 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("input (2,8)"), std::string::npos) << r.output;
  const std::string config = ReadTextFile(prefix + ".prototxt");
  for (const char* op : {"op: \"attention\"", "op: \"gelu\"", "op: \"layer_norm\"", "op: \"embedding\""})
    EXPECT_NE(config.find(op), std::string::npos) << op << " in\n" << config;
  EXPECT_EQ(config.find("op: \"batch_dot\""), std::string::npos) << config;
  gpt.dir.Write("imported.prototxt", Completed(config, gpt));

  const std::string imported = "test --config " + prefix + ".prototxt --checkpoint " + prefix + ".frugal";
  const std::string trained = "test --checkpoint " + gpt.checkpoints;
  for (const std::string batch : {"", " --batch 4", " --batch 3"}) {
    r = RunFrugal(imported + batch);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const RunResult want = RunFrugal(trained + (batch.empty() ? " --batch 2" : batch));
    ASSERT_EQ(want.exit_code, 0) << want.output;
    EXPECT_EQ(Metrics(r), Metrics(want)) << "batch:" << batch;
    EXPECT_NE(Metrics(r), "");
  }
}

TEST(OnnxGpt, ExportHasADynamicBatchAxisStandardOpsAndTheTextPipeline) {
  TinyGpt gpt;
  ASSERT_NO_FATAL_FAILURE(TrainAndExport(gpt));
  const onnx::ModelProto m = ReadOnnxModel(gpt.model);
  const onnx::GraphProto& g = m.graph();
  ASSERT_EQ(g.input_size(), 1);
  const auto& in = g.input(0).type().tensor_type().shape();
  ASSERT_EQ(in.dim_size(), 2);
  EXPECT_EQ(in.dim(0).dim_param(), "batch");
  EXPECT_EQ(in.dim(1).dim_value(), 8);
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_EQ(g.output(0).name(), "head");
  const auto& out = g.output(0).type().tensor_type().shape();  // the probabilities, a row per position
  ASSERT_EQ(out.dim_size(), 2);
  EXPECT_EQ(out.dim(0).dim_param(), "batch*8");
  EXPECT_EQ(out.dim(1).dim_value(), 16);

  std::set<std::string> ops;
  for (const auto& n : g.node()) ops.insert(n.op_type());
  for (const char* op : {"MatMul", "Softmax", "Erf", "Gather", "LayerNormalization", "Gemm", "Reshape"})
    EXPECT_TRUE(ops.count(op)) << op;
  EXPECT_FALSE(ops.count("Attention") || ops.count("Gelu"));  // opset 23 and 20
  EXPECT_EQ(m.opset_import(0).version(), 17);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : g.initializer())
    if (t.data_type() == onnx::TensorProto::INT64)
      shapes[t.name()].assign(t.int64_data().begin(), t.int64_data().end());
  const std::vector<int64_t> qkv = {-1, 8, 3, 2, 8}, rows = {-1, 16};
  EXPECT_EQ(shapes.at("blocks/0/qkv_heads:shape"), qkv);
  EXPECT_EQ(shapes.at("blocks/0/attn_rows:shape"), rows);
  EXPECT_EQ(shapes.at("embed_rows:shape"), rows);

  std::map<std::string, std::string> meta;
  for (const auto& p : m.metadata_props()) meta[p.key()] = p.value();
  EXPECT_EQ(meta["frugal.batch_axis"], "dynamic");
  EXPECT_EQ(meta["frugal.data.input"], "data");
  EXPECT_EQ(meta["frugal.data.source"], "text");
  EXPECT_EQ(meta["frugal.data.text.level"], "char");
  std::string vocabulary = "[null";  // <unk>, then the bytes of train.txt in order of first appearance
  for (char c : FirstAppearances(ReadTextFile(gpt.train))) vocabulary += "," + std::to_string(c);
  EXPECT_EQ(meta["frugal.data.text.vocabulary"], vocabulary + "]");
  // ONNX's checker with shape inference (Debian's python3-onnx).
  const RunResult check = RunShell(
      "/usr/bin/python3 -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' " +
      gpt.model);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// frugal's importer reading the ONNX ops one by one (MatMul, Mul, Add of
// the -inf mask, Softmax, Div, Erf, ...), as another runtime does, computes
// the probabilities of the import that fuses them back into attention and
// gelu; and those give the loss the trained graph's linear_cross_entropy
// computes for each position.
TEST(OnnxGpt, TheStandardOpsComputeWhatFrugalsForwardPassDoes) {
  TinyGpt gpt;
  ASSERT_NO_FATAL_FAILURE(TrainAndExport(gpt));
  OnnxImportOptions opts;
  opts.batch = 3;
  const OnnxImport fused = ImportOnnxFile(gpt.model, opts);
  opts.fuse = false;
  const OnnxImport ops = ImportOnnxFile(gpt.model, opts);
  ASSERT_TRUE(fused.unsupported.empty()) << DescribeUnsupported(fused.unsupported);
  ASSERT_TRUE(ops.unsupported.empty()) << DescribeUnsupported(ops.unsupported);
  std::map<std::string, int> fused_ops, one_by_one;
  for (const Node& n : fused.graph.nodes()) fused_ops[n.is_variable() ? "" : n.op->name()]++;
  for (const Node& n : ops.graph.nodes()) one_by_one[n.is_variable() ? "" : n.op->name()]++;
  EXPECT_EQ(fused_ops["attention"], 1);
  EXPECT_EQ(fused_ops["gelu"], 1);
  EXPECT_EQ(one_by_one["attention"] + one_by_one["gelu"], 0);
  EXPECT_EQ(one_by_one["erf"], 1);

  // Three rows of 8 tokens and their next characters, from the validation text.
  const std::string text = ReadTextFile(gpt.val);
  const std::string vocab = FirstAppearances(ReadTextFile(gpt.train));
  Tensor x = Tensor::Empty(Shape{3, 8}), label = Tensor::Empty(Shape{3, 8});
  for (int64_t i = 0; i < 24; ++i) {
    x.f()[i] = static_cast<float>(vocab.find(text[i + i / 8]) + 1);
    label.f()[i] = static_cast<float>(vocab.find(text[i + i / 8 + 1]) + 1);
  }
  auto run = [&](const OnnxImport& imp) {
    std::map<std::string, Tensor> vars = imp.values;
    vars[imp.graph.node(imp.inputs[0].node).name] = x;
    return RunForward(imp.graph, vars).at(0);
  };
  const Tensor p = run(fused), q = run(ops);
  ASSERT_EQ(p.shape(), (Shape{24, 16}));
  ASSERT_EQ(q.shape(), p.shape());
  for (int64_t i = 0; i < p.size(); ++i) ASSERT_NEAR(q.f()[i], p.f()[i], 1e-6) << i;

  const CheckpointState ck = LoadCheckpoint(ResolveCheckpoint(gpt.checkpoints));
  const ConfigFile cfg = ParseConfig(ck.config_text, "gpt.prototxt", {});
  std::map<std::string, Tensor> vars = ck.params;
  vars["data"] = x;
  vars["label"] = label;
  const Tensor score = RunForward(BuildGraph(cfg), vars).at(0);  // (24, 2): loss and rank
  ASSERT_EQ(score.shape(), (Shape{24, 2}));
  for (int64_t i = 0; i < 24; ++i) {
    const float* row = p.f() + i * 16;
    const int64_t t = static_cast<int64_t>(label.f()[i]);
    EXPECT_NEAR(-std::log(row[t]), score.f()[2 * i], 1e-5) << i;
  }
}

// A reshape whose shape holds the batch size keeps it fixed, and the
// model's metadata and the command's note say which node.
TEST(OnnxGpt, AShapeHoldingTheBatchKeepsItFixed) {
  TempDir dir;
  const std::string text = R"cfg(version: 1
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "6" } }
node { name: "r"  op: "reshape" input: "fc" attr { key: "shape" value: "(4,3,2)" } }
data { batch_size: 4 sample_shape: [5] }
)cfg";
  const std::string config = dir.Write("fixed.prototxt", text);
  CheckpointState c;
  c.config_text = text;
  c.params["fc_weight"] = Tensor::Empty(Shape{6, 5});
  c.params["fc_bias"] = Tensor::Empty(Shape{6});
  SaveCheckpoint(dir.File("fixed.frugal"), c);
  RunResult r = RunFrugal("export-onnx --config " + config + " --checkpoint " + dir.File("fixed.frugal") + " --out " +
                          dir.File("fixed.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: the batch size is fixed at 4: " + config + ":3:1: node 'r' (reshape)"),
            std::string::npos)
      << r.output;
  const onnx::ModelProto m = ReadOnnxModel(dir.File("fixed.onnx"));
  EXPECT_EQ(m.graph().input(0).type().tensor_type().shape().dim(0).dim_value(), 4);
  std::string axis;
  for (const auto& p : m.metadata_props())
    if (p.key() == "frugal.batch_axis") axis = p.value();
  EXPECT_EQ(axis.rfind("fixed at 4: " + config + ":3:1: node 'r' (reshape)", 0), 0u) << axis;
}

}  // namespace
}  // namespace frugal::test
