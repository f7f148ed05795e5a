// frugal predict: the .npy reader and writer, Predictor against the forward
// pass and `frugal test`'s metrics, the CLI on .npy, images and text, the
// generation's sampling, the one-line errors, and an imported ONNX model.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "frugal/checkpoint.h"
#include "frugal/io.h"
#include "frugal/onnx.h"
#include "frugal/predict.h"
#include "frugal/train.h"
#include "io/imgcodecs.h"
#include "test_util.h"

namespace frugal::test {
namespace {

namespace fs = std::filesystem;

// The one "frugal: error:" line of a failed run (no crash, no CHECK).
std::string PredictErrorLine(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, std::regex("frugal: error: [^\n]*"))) << r.output;
  EXPECT_EQ(r.output.find("Check failed"), std::string::npos) << r.output;
  return m.size() ? m.str(0) : "";
}

void ExpectAllClose(const std::vector<float>& want, const std::vector<float>& got, double tol,
                    const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t k = 0; k < want.size(); ++k)
    ASSERT_NEAR(got[k], want[k], tol * std::max(1.0, std::abs(double(want[k])))) << what << " at " << k;
}

TEST(Npy, WritesWhatItReads) {
  TempDir dir;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{}, {5}, {2, 3}, {2, 1, 4, 4}}) {
    std::vector<float> v(Shape(shape).Size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = 0.5f * k - 1;
    WriteNpy(dir.File("a.npy"), shape, v.data());
    const NpyArray a = ReadNpy(dir.File("a.npy"));
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.descr, "<f4");
    EXPECT_TRUE(a.is_float);
    EXPECT_EQ(a.f, v);
    EXPECT_EQ(fs::file_size(dir.File("a.npy")) % 64, v.size() * 4 % 64) << "the header ends on a multiple of 64";
  }
}

// A .npy with this header text and data bytes, as numpy writes it.
std::string WriteNpyText(const TempDir& dir, const std::string& name, const std::string& header,
                         const std::string& data) {
  std::string h = header;
  h.append(63 - (10 + h.size()) % 64, ' ');
  h += '\n';
  std::string b = std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h + data;
  return dir.Write(name, b);
}

TEST(Npy, ReadsIntegersAndRefusesWhatItCannotRead) {
  TempDir dir;
  std::string i8;
  for (int64_t v : {3, -2, 7})
    for (int k = 0; k < 8; ++k) i8 += char((uint64_t(v) >> (8 * k)) & 0xff);
  const NpyArray a =
      ReadNpy(WriteNpyText(dir, "i.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i8));
  EXPECT_FALSE(a.is_float);
  EXPECT_EQ(a.i, (std::vector<int64_t>{3, -2, 7}));
  const NpyArray u = ReadNpy(WriteNpyText(dir, "u.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2), }",
                                          std::string("\xff\x01", 2)));
  EXPECT_EQ(u.i, (std::vector<int64_t>{255, 1}));

  const std::string f8 =
      WriteNpyText(dir, "f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0'));
  ExpectError([&] { ReadNpy(f8); }, {f8, "float64", "astype(numpy.float32)"});
  const std::string fo =
      WriteNpyText(dir, "fo.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0'));
  ExpectError([&] { ReadNpy(fo); }, {fo, "Fortran order", "ascontiguousarray"});
  const std::string cut = WriteNpyText(dir, "cut.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                       std::string(12, '\0'));
  ExpectError([&] { ReadNpy(cut); }, {cut, "(2,2)", "needs 16 data bytes but the file holds 12"});
  const std::string big =
      WriteNpyText(dir, "big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
  ExpectError([&] { ReadNpy(big); }, {big, "big-endian"});
  ExpectError([&] { ReadNpy(dir.Write("no.npy", "hello")); }, {"no.npy", "not a .npy file"});
  ExpectError([&] { ReadNpy(dir.File("missing.npy")); }, {"missing.npy", "cannot open"});
}

// ------------------------------------------------------------ an image classifier

// Class c lights up pixel row c of a 4x4 image (values 0 to 255).
void PredictToyImage(int i, uint8_t* image, uint8_t* label) {
  *label = static_cast<uint8_t>(i % 4);
  for (int p = 0; p < 16; ++p)
    image[p] = static_cast<uint8_t>(p / 4 == *label ? 200 + (i * 7 + p) % 50 : (i * 13 + p) % 60);
}

void WritePredictToyIdx(const TempDir& dir, const std::string& prefix, int n) {
  std::vector<uint8_t> images(n * 16), labels(n);
  for (int i = 0; i < n; ++i) PredictToyImage(i, &images[i * 16], &labels[i]);
  WriteIdx(dir.File(prefix + "-images"), {static_cast<uint32_t>(n), 4, 4}, images);
  WriteIdx(dir.File(prefix + "-labels"), {static_cast<uint32_t>(n)}, labels);
}

// An MLP on the toy images, trained a few updates: its checkpoint.
std::string TrainToyMlp(const TempDir& dir) {
  WritePredictToyIdx(dir, "train", 64);
  WritePredictToyIdx(dir, "val", 21);
  const std::string cfg = dir.Write(
      "toy.prototxt",
      "version: 1\n"
      "node { name: \"fc1\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"16\" } }\n"
      "node { name: \"relu1\" op: \"relu\" input: \"fc1\" }\n"
      "node { name: \"fc2\" op: \"fully_connected\" input: \"relu1\" attr { key: \"num_hidden\" value: \"4\" } }\n"
      "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"fc2\" input: \"label\" }\n" +
          ToyDataSection(dir, "8") + "solver { lr: 0.1 epochs: 2 metric: \"accuracy\" metric: \"cross_entropy\" }\n");
  const RunResult r = RunFrugal("train --config " + cfg + " --checkpoint-dir " + dir.File("ck") + " --progress=false");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return Ckpt(dir.File("ck"), 16);
}

// The val images as the IDX reader scales them, (n, 1, 4, 4), and labels.
std::vector<float> PredictToyVal(int n, std::vector<int>* labels = nullptr) {
  std::vector<float> x(n * 16);
  for (int i = 0; i < n; ++i) {
    uint8_t image[16], label;
    PredictToyImage(i, image, &label);
    for (int p = 0; p < 16; ++p) x[i * 16 + p] = image[p] * (1.0f / 255.0f);
    if (labels) labels->push_back(label);
  }
  return x;
}

TEST(Predict, MatchesTheForwardPassAndFrugalTestOnAPartialBatch) {
  TempDir dir;
  const std::string ck = TrainToyMlp(dir);
  const ConfigFile cfg = CheckpointConfig(ck);
  Predictor p(cfg, ck);
  ASSERT_EQ(p.batch(), 8);
  ASSERT_EQ(p.output_shapes(), (std::vector<Shape>{Shape{4}}));
  // 21 samples: two batches and a third of 5 (3 rows of padding).
  std::vector<int> labels;
  const std::vector<float> x = PredictToyVal(21, &labels);
  const std::vector<float> got = p.Run(x.data(), 21)[0];

  // The forward graph run directly at batch 21, with the checkpoint's values.
  const CheckpointState c = LoadCheckpoint(ck);
  std::map<std::string, Tensor> vars = c.params;
  vars["data"] = Tensor::Empty(Shape{21, 1, 4, 4});
  std::copy(x.begin(), x.end(), vars["data"].f());
  vars["label"] = Tensor::Empty(Shape{21});
  vars["label"].Fill(0);
  const Tensor want = RunForward(BuildGraph(cfg), vars)[0];
  ExpectAllClose(std::vector<float>(want.f(), want.f() + want.size()), got, 1e-5, "probabilities");

  // frugal test's accuracy and cross-entropy on the same 21 val samples.
  double right = 0, loss = 0;
  for (int i = 0; i < 21; ++i) {
    const float* row = got.data() + i * 4;
    right += std::max_element(row, row + 4) - row == labels[i];
    loss -= std::log(row[labels[i]]);
    EXPECT_NEAR(row[0] + row[1] + row[2] + row[3], 1.0, 1e-5);
  }
  const MetricSet m = frugal::Test(cfg, ck);
  EXPECT_EQ(m.count(), 21);
  EXPECT_NEAR(m.Get("accuracy"), right / 21, 1e-9);
  EXPECT_NEAR(m.Get("cross_entropy"), loss / 21, 1e-5);
}

TEST(PredictCli, NpyInImagesInTopKAndErrors) {
  TempDir dir;
  const std::string ck = TrainToyMlp(dir);
  const std::vector<float> x = PredictToyVal(11);
  WriteNpy(dir.File("x.npy"), {11, 1, 4, 4}, x.data());
  RunResult r = RunFrugal("predict --checkpoint " + ck + " --input " + dir.File("x.npy") + " --out " +
                          dir.File("y.npy") + " --top-k 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 batch(es) of 8 (the last filled up with 5 rows of zeros, their outputs dropped)"),
            std::string::npos)
      << r.output;
  const NpyArray y = ReadNpy(dir.File("y.npy"));
  ASSERT_EQ(y.shape, (std::vector<int64_t>{11, 4}));
  const ConfigFile cfg = CheckpointConfig(ck);
  Predictor p(cfg, ck);
  ExpectAllClose(p.Run(x.data(), 11)[0], y.f, 1e-6, "the CLI's y.npy");
  // --top-k 2: per sample its two most probable classes, the first the argmax.
  for (int i = 0; i < 11; ++i) {
    const float* row = y.f.data() + i * 4;
    const int best = static_cast<int>(std::max_element(row, row + 4) - row);
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(r.output, m, std::regex(Fmt("\nsample ", i, ": ([0-3]) ([0-9.]+)  ([0-3]) ([0-9.]+)\n"))))
        << r.output;
    EXPECT_EQ(std::stoi(m[1]), best);
    EXPECT_NEAR(std::stod(m[2]), row[best], 1e-4);
    EXPECT_GE(std::stod(m[2]), std::stod(m[4]));
  }

  // The same samples as PNG files: read as the IDX reader scales its pixels.
  fs::create_directory(dir.File("png"));
  for (int i = 0; i < 11; ++i) {
    uint8_t image[16], label;
    PredictToyImage(i, image, &label);
    std::vector<uint8_t> png;
    ASSERT_TRUE(imgcodecs::Encode(".png", cv::Mat(4, 4, CV_8U, image), {}, &png));
    std::ofstream(dir.File(Fmt("png/", char('a' + i), ".png")), std::ios::binary)
        .write(reinterpret_cast<const char*>(png.data()), png.size());
  }
  r = RunFrugal("predict --checkpoint " + ck + " --input " + dir.File("png") + " --out " + dir.File("yi.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadNpy(dir.File("yi.npy")).f, y.f);

  // Bad inputs: one line naming the file and the values.
  const std::string base = "predict --checkpoint " + ck + " --out " + dir.File("z.npy") + " --input ";
  WriteNpy(dir.File("wrong.npy"), {3, 16}, x.data());
  std::string e = PredictErrorLine(RunFrugal(base + dir.File("wrong.npy")));
  EXPECT_NE(e.find(dir.File("wrong.npy") + ": shape (3,16) but the model takes (N, 1, 4, 4)"), std::string::npos) << e;
  e = PredictErrorLine(
      RunFrugal(base + WriteNpyText(dir, "f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
                                    std::string(8, '\0'))));
  EXPECT_NE(e.find("f8.npy: the array is float64 ('<f8')"), std::string::npos) << e;
  e = PredictErrorLine(
      RunFrugal(base + WriteNpyText(dir, "i.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 4, 4), }",
                                    std::string(16, '\1'))));
  EXPECT_NE(e.find("i.npy: integer array ('|u1') but the model's data are float32 values"), std::string::npos) << e;
  e = PredictErrorLine(RunFrugal(base + dir.File("nothing.npy")));
  EXPECT_NE(e.find(dir.File("nothing.npy") + ": no such file"), std::string::npos) << e;
  dir.Write("png/broken.png", "not an image");
  e = PredictErrorLine(RunFrugal(base + dir.File("png")));
  EXPECT_NE(e.find(dir.File("png/broken.png") + ": cannot decode the image (12 bytes)"), std::string::npos) << e;
  fs::remove(dir.File("png/broken.png"));
  std::vector<uint8_t> big;
  ASSERT_TRUE(imgcodecs::Encode(".png", cv::Mat(5, 6, CV_8U, cv::Scalar(7)), {}, &big));
  std::ofstream(dir.File("png/big.png"), std::ios::binary).write(reinterpret_cast<const char*>(big.data()), big.size());
  e = PredictErrorLine(RunFrugal(base + dir.File("png")));
  EXPECT_NE(e.find(dir.File("png/big.png") + ": the image is 5x6 (height x width) but the model takes 4x4"),
            std::string::npos)
      << e;
  // A file that is no list of images (a config given by mistake): its first line named as what it is not.
  e = PredictErrorLine(RunFrugal(base + dir.Write("notes.txt", "# a config\nnode { }\n")));
  EXPECT_NE(e.find(dir.File("notes.txt") + ":1: '# a config' is not an image path (.png, .jpg, .jpeg or .bmp)"),
            std::string::npos)
      << e;
  e = PredictErrorLine(RunFrugal("predict --checkpoint " + ck + " --prompt hi --generate 3"));
  EXPECT_NE(e.find("--generate needs a language model"), std::string::npos) << e;
}

// ------------------------------------------------------------ language models

const char kText[] = "the cat sat on the mat. a cat ate the rat. ";

// models/<model> trained a few updates on a tiny corpus: its checkpoint.
std::string TrainTinyLm(const TempDir& dir, const std::string& model, const std::string& defines) {
  std::string text;
  for (int k = 0; k < 40; ++k) text += kText;
  const std::string corpus = dir.Write("corpus.txt", text);
  const RunResult r = RunFrugal("train --config " + std::string(FRUGAL_SOURCE_DIR) + "/models/" + model + " " +
                                defines + " --define vocab=16 --define train=" + corpus + " --define val=" + corpus +
                                " --max-iters 6 --checkpoint-dir " + dir.File("ck") + " --progress=false");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return Ckpt(dir.File("ck"), 6);
}

const char kGpt[] = "--define layers=1 --define d_model=16 --define heads=2 --define seq_len=16 --define batch=4";

// The GPT's probabilities (linear_cross_entropy's prediction) score the val
// windows as `frugal test` does with the head's own loss.
TEST(Predict, GptProbabilitiesGiveFrugalTestsCrossEntropy) {
  TempDir dir;
  const std::string ck = TrainTinyLm(dir, "gpt/gpt.prototxt", kGpt);
  const ConfigFile cfg = CheckpointConfig(ck);
  Predictor p(cfg, ck);
  ASSERT_EQ(p.output_shapes(), (std::vector<Shape>{Shape{16, 16}}));
  const std::string corpus = ReadTextFile(dir.File("corpus.txt"));
  const std::vector<int64_t> ids = Tokenize(corpus, BuildVocabulary(corpus, TextLevel::kChar));
  const int64_t t = 16, n = (static_cast<int64_t>(ids.size()) - 1) / t;  // the text reader's sequences
  const std::vector<float> x(ids.begin(), ids.begin() + n * t);
  const std::vector<float> y = p.Run(x.data(), n)[0];
  double loss = 0;
  for (int64_t i = 0; i < n * t; ++i) loss -= std::log(y[i * 16 + ids[i + 1]]);
  const MetricSet m = frugal::Test(cfg, ck);
  EXPECT_EQ(m.count(), n * t);
  EXPECT_NEAR(m.Get("cross_entropy"), loss / (n * t), 1e-4 * loss / (n * t));
}

// Generation's text after the prompt, run through the CLI.
std::string GeneratedText(const std::string& ck, const std::string& flags) {
  const RunResult r = RunFrugal("predict --checkpoint " + ck + " --prompt 'the ' --generate 30 " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("the ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("\n\n30 tokens in "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" tokens/s "), std::string::npos) << r.output;
  return r.output.substr(4, 30);
}

void ExpectDeterministicGeneration(const std::string& ck) {
  const std::string a = GeneratedText(ck, "--seed 1 --temperature 0.8 --top-k 5");
  EXPECT_EQ(a, GeneratedText(ck, "--seed 1 --temperature 0.8 --top-k 5"));
  EXPECT_NE(a, GeneratedText(ck, "--seed 2 --temperature 0.8 --top-k 5"));
  const std::set<char> vocab(std::begin(kText), std::end(kText) - 1);
  for (char c : a) EXPECT_TRUE(vocab.count(c)) << "'" << c << "' is not in the vocabulary: " << a;
  // Temperature 0: the most probable token, whatever the seed.
  EXPECT_EQ(GeneratedText(ck, "--seed 1 --temperature 0"), GeneratedText(ck, "--seed 2 --temperature 0"));
}

TEST(PredictCli, GptGenerationIsDeterministicForASeed) {
  TempDir dir;
  const std::string ck = TrainTinyLm(dir, "gpt/gpt.prototxt", kGpt);
  ExpectDeterministicGeneration(ck);
  std::string e = PredictErrorLine(RunFrugal("predict --checkpoint " + ck + " --prompt 'the Zebra' --generate 3"));
  EXPECT_NE(e.find("--prompt: character 'Z' (byte 90) at position 4 is not in the vocabulary of"), std::string::npos)
      << e;
  // A text file: windows of seq_len, the outputs (windows, seq_len, vocab).
  RunResult r = RunFrugal("predict --checkpoint " + ck + " --input " + dir.File("corpus.txt") + " --out " +
                          dir.File("y.npy") + " --top-k 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadNpy(dir.File("y.npy")).shape, (std::vector<int64_t>{107, 16, 16}));
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\nsample 106: \\S+ [0-9.]+  \\S+ [0-9.]+  \\S+ [0-9.]+\n")))
      << r.output;
  // Token ids as integers; one out of the vocabulary is named.
  std::string ids;
  for (int k = 0; k < 16; ++k)
    for (int b = 0; b < 8; ++b) ids += char(b == 0 ? (k == 3 ? 99 : k % 12) : 0);
  const std::string npy =
      WriteNpyText(dir, "ids.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 16), }", ids);
  e = PredictErrorLine(RunFrugal("predict --checkpoint " + ck + " --input " + npy + " --out " + dir.File("z.npy")));
  EXPECT_NE(e.find("ids.npy: token id 99 at flat index 3 is outside the vocabulary (0 to 12"), std::string::npos) << e;
}

// The char LSTM's heads, one per run of 4 steps: their rows in order are the 8 positions.
TEST(PredictCli, LstmGenerationReadsItsPerRunOutputs) {
  TempDir dir;
  const std::string ck =
      TrainTinyLm(dir, "lstm/char_lm.prototxt",
                  "--define layers=1 --define hidden=16 --define seq_len=8 --define chunk=4 --define batch=4");
  ExpectDeterministicGeneration(ck);
  const RunResult r =
      RunFrugal("predict --checkpoint " + ck + " --input " + dir.File("corpus.txt") + " --out " + dir.File("y.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(
                "note: the graph's 2 outputs (chunks/0/prob to chunks/1/prob), 4 rows each, laid end to end on axis 1"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(ReadNpy(dir.File("y.npy")).shape, (std::vector<int64_t>{215, 8, 16}));
}

TEST(TokenSampler, TopKTemperatureAndAllowed) {
  const float p[4] = {0.1f, 0.4f, 0.3f, 0.2f};
  TokenSampler s(7);
  std::vector<int> seen(4);
  for (int k = 0; k < 400; ++k) ++seen[s.Sample(p, 4, {1.0, 2})];
  EXPECT_EQ(seen[0] + seen[3], 0) << "top-k 2 draws only classes 1 and 2";
  EXPECT_GT(seen[1], seen[2]);
  EXPECT_EQ(s.Sample(p, 4, {0.0, 0}), 1);
  EXPECT_EQ(s.Sample(p, 4, {0.0, 0}, {true, false, true, true}), 2);
  ExpectError([&] { s.Sample(p, 4, {1.0, 0}, {false, false, false, false}); }, {"no class"});
}

// ------------------------------------------------------------ an imported ONNX model

TEST(PredictCli, ImportedOnnxModelGivesItsTestOutput) {
  const std::string test = std::string(ONNX_TESTDATA_DIR) + "/pytorch-converted/test_Conv2d";
  TempDir dir;
  RunResult r = RunFrugal("import-onnx " + test + "/model.onnx --out " + dir.File("m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const OnnxTensor in = ReadOnnxTensorFile(test + "/test_data_set_0/input_0.pb");
  const OnnxTensor out = ReadOnnxTensorFile(test + "/test_data_set_0/output_0.pb");
  WriteNpy(dir.File("x.npy"), in.dims, in.f.data());
  r = RunFrugal("predict --config " + dir.File("m.prototxt") + " --checkpoint " + dir.File("m.frugal") + " --input " +
                dir.File("x.npy") + " --out " + dir.File("y.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const NpyArray y = ReadNpy(dir.File("y.npy"));
  EXPECT_EQ(y.shape, out.dims);
  EXPECT_LT(RelErr(out.f, y.f), 1e-4);
  for (size_t k = 0; k < out.f.size(); ++k)
    ASSERT_NEAR(y.f[k], out.f[k], 1e-4 * std::abs(out.f[k]) + 1e-6) << "element " << k;
}

}  // namespace
}  // namespace frugal::test
