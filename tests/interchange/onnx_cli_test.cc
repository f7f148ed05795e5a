// `frugal ops` and `frugal onnx-test` end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include "frugal/onnx.h"
#include "frugal/op.h"
#include "onnx.pb.h"
#include "test_util.h"

namespace frugal::test {
namespace {

const std::string kNode = std::string(ONNX_TESTDATA_DIR) + "/node";

// What `frugal ops` should say about an op, from its declarations.
std::string Gradient(const OpDef& op) {
  return !op.has_gradient() ? "none" : op.backward_op().empty() ? "ops" : op.backward_op();
}

// The block of text `frugal ops` prints for one op.
std::string Block(const std::string& out, const std::string& name) {
  size_t at = out.find("\n" + name + "\n");
  if (at == std::string::npos) return "";
  size_t end = out.find("\n", out.find("\n    devices:", at) + 1);
  return out.substr(at + 1, end - at - 1);
}

TEST(OpsCommand, ListsEveryOpWithItsDeclarations) {
  RunResult r = RunFrugal("ops");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t backward = r.output.find("backward ops (made by the gradient pass");
  ASSERT_NE(backward, std::string::npos);
  for (const OpDef* op : OpRegistry::Get().All()) {
    std::string b = Block(r.output, op->name());
    ASSERT_NE(b, "") << op->name() << " is not listed:\n" << r.output;
    EXPECT_NE(b.find(Fmt("recompute: ", CostName(op->cost()), "  random: ")), std::string::npos) << b;
    EXPECT_NE(b.find("gradient: " + Gradient(*op)), std::string::npos) << b;
    EXPECT_NE(b.find(op->cpu_kernel() ? "devices: cpu" : "devices: none"), std::string::npos) << b;
    std::string first_input = op->inputs().empty() ? "" : "inputs: " + op->inputs()[0].name;
    EXPECT_NE(b.find(first_input), std::string::npos) << b;
    // Backward ops come after every forward op.
    EXPECT_EQ(r.output.find("\n" + op->name() + "\n") > backward, op->name()[0] == '_') << op->name();
  }
  // What fully_connected and relu declare today, as a reader sees it.
  EXPECT_NE(Block(r.output, "fully_connected").find("weight(param,xavier)"), std::string::npos);
  EXPECT_NE(Block(r.output, "relu").find("in-place: x->y"), std::string::npos) << Block(r.output, "relu");
}

TEST(OpsCommand, JsonIsOneObjectPerOp) {
  RunResult r = RunFrugal("ops --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::string line;
  std::vector<std::string> lines;
  bool seen_backward = false;
  while (std::getline(in, line)) {
    lines.push_back(line);
    EXPECT_TRUE(std::regex_match(line, std::regex("\\{\"name\":\"[a-z0-9_]+\",\"backward\":(true|false),.*\\}")))
        << line;
    bool backward = line.find("\"backward\":true") != std::string::npos;
    EXPECT_FALSE(seen_backward && !backward) << "forward op after a backward one: " << line;
    seen_backward = seen_backward || backward;
  }
  EXPECT_EQ(lines.size(), OpRegistry::Get().All().size());
  for (const OpDef* op : OpRegistry::Get().All()) {
    auto it = std::find_if(lines.begin(), lines.end(),
                           [&](const std::string& l) { return l.rfind("{\"name\":\"" + op->name() + "\",", 0) == 0; });
    ASSERT_NE(it, lines.end()) << op->name();
    std::string inplace;
    for (const auto& [i, o] : op->inplace()) inplace += Fmt(inplace.empty() ? "" : ",", "[", i, ",", o, "]");
    EXPECT_NE(it->find(Fmt("\"inplace\":[", inplace, "],")), std::string::npos) << *it;
    EXPECT_NE(it->find(Fmt("\"recompute\":\"", CostName(op->cost()),
                           "\",\"random\":", op->randomness() == Randomness::kCounterRng ? "true" : "false")),
              std::string::npos)
        << *it;
    EXPECT_NE(it->find("\"gradient\":\"" + Gradient(*op) + "\"}"), std::string::npos) << *it;
  }
}

// The last line of the output.
std::string LastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') + 1);
}

TEST(OnnxTestCommand, CountsAndExitStatus) {
  // test_relu runs; test_cast_FLOAT_to_DOUBLE is not float32.
  RunResult r = RunFrugal("onnx-test " + kNode + "/test_relu " + kNode + "/test_cast_FLOAT_to_DOUBLE");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(LastLine(r.output), "1 passed, 0 failed, 1 unsupported") << r.output;
  r = RunFrugal("onnx-test --list-unsupported " + kNode + "/test_cast_FLOAT_to_DOUBLE");
  EXPECT_NE(r.output.find("UNSUPPORTED test_cast_FLOAT_to_DOUBLE: "), std::string::npos) << r.output;
  // Inputs fed at run time: the relu kernel computes; Reshape needs its shape at import.
  const std::string reshape = kNode + "/test_reshape_reduced_dims";
  r = RunFrugal("onnx-test " + kNode + "/test_relu " + reshape);
  EXPECT_EQ(LastLine(r.output), "2 passed, 0 failed, 0 unsupported") << r.output;
  r = RunFrugal("onnx-test --inputs-at-run-time --list-unsupported " + kNode + "/test_relu " + reshape);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("UNSUPPORTED test_reshape_reduced_dims: Reshape 'reshaped': input 1 (shape) must be known at "
                          "import"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(LastLine(r.output), "1 passed, 0 failed, 1 unsupported") << r.output;
}

// --expect-passed: a listed test that is unsupported (or absent) is named
// and fails the run, its line ending the output.
TEST(OnnxTestCommand, AListedTestThatNoLongerPassesFails) {
  TempDir dir;
  const std::string list = dir.File("passing.txt");
  std::ofstream(list) << "# what passes\ntest_relu\n";
  const std::string two = kNode + "/test_relu " + kNode + "/test_cast_FLOAT_to_DOUBLE";
  RunResult r = RunFrugal("onnx-test --expect-passed " + list + " " + two);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(LastLine(r.output), "1 passed, 0 failed, 1 unsupported") << r.output;
  std::ofstream(list, std::ios::app) << "test_cast_FLOAT_to_DOUBLE  # as if it had passed once\ntest_gone\n";
  r = RunFrugal("onnx-test --expect-passed " + list + " " + two);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("NO LONGER PASSES test_cast_FLOAT_to_DOUBLE: unsupported: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("NO LONGER PASSES test_gone: not found among the tests run"), std::string::npos) << r.output;
  EXPECT_EQ(LastLine(r.output), "2 tests of " + list + " no longer pass") << r.output;
}

// The oracle is pinned: test_relu's true output perturbed by 1% (ten times
// ONNX's rtol) or one value made NaN fails; the output as it is, and one
// within 1e-4, passes.
TEST(OnnxTestCommand, TheOracleFailsAOnePercentErrorAndANaN) {
  onnx::TensorProto truth;
  {
    std::ifstream in(kNode + "/test_relu/test_data_set_0/output_0.pb", std::ios::binary);
    ASSERT_TRUE(truth.ParseFromIstream(&in));
  }
  const OnnxTensor y = DecodeOnnxTensor(truth, "output_0.pb");
  ASSERT_GT(std::count_if(y.f.begin(), y.f.end(), [](float v) { return v > 0; }), 0);
  TempDir dir;
  auto run = [&](const std::string& name, const std::function<float(int, float)>& change) {
    const std::string t = dir.File(name);
    std::filesystem::create_directories(t + "/test_data_set_0");
    std::filesystem::copy_file(kNode + "/test_relu/model.onnx", t + "/model.onnx");
    std::filesystem::copy_file(kNode + "/test_relu/test_data_set_0/input_0.pb", t + "/test_data_set_0/input_0.pb");
    onnx::TensorProto e = truth;
    e.clear_raw_data();
    e.clear_float_data();
    for (size_t k = 0; k < y.f.size(); ++k) e.add_float_data(change(static_cast<int>(k), y.f[k]));
    std::ofstream out(t + "/test_data_set_0/output_0.pb", std::ios::binary);
    e.SerializeToOstream(&out);
    out.close();
    return RunFrugal("onnx-test " + t);
  };
  RunResult r = run("same", [](int, float v) { return v; });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run("close", [](int, float v) { return v * 1.0001f; });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run("one_percent", [](int, float v) { return v * 1.01f; });
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(LastLine(r.output), "0 passed, 1 failed, 0 unsupported") << r.output;
  r = run("nan", [&](int k, float v) {
    const int first =
        static_cast<int>(std::find_if(y.f.begin(), y.f.end(), [](float x) { return x > 0; }) - y.f.begin());
    return k == first ? std::nanf("") : v;
  });
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL nan: output 0 'y': 1 of "), std::string::npos) << r.output;
}

TEST(OnnxTestCommand, AWrongExpectedOutputFails) {
  TempDir dir;
  const std::string t = dir.File("tests/test_relu_wrong");
  std::filesystem::create_directories(t + "/test_data_set_0");
  std::filesystem::copy_file(kNode + "/test_relu/model.onnx", t + "/model.onnx");
  std::filesystem::copy_file(kNode + "/test_relu/test_data_set_0/input_0.pb", t + "/test_data_set_0/input_0.pb");
  onnx::TensorProto y;
  {
    std::ifstream in(kNode + "/test_relu/test_data_set_0/output_0.pb", std::ios::binary);
    ASSERT_TRUE(y.ParseFromIstream(&in));
  }
  y.clear_raw_data();
  for (int k = 0; k < 60; ++k) y.add_float_data(k == 7 ? -1.f : 0.f);  // relu never gives -1
  {
    std::ofstream out(t + "/test_data_set_0/output_0.pb", std::ios::binary);
    y.SerializeToOstream(&out);
  }
  // Given as a folder of tests.
  RunResult r = RunFrugal("onnx-test " + dir.File("tests"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL test_relu_wrong: output 0 'y': "), std::string::npos) << r.output;
  EXPECT_EQ(LastLine(r.output), "0 passed, 1 failed, 0 unsupported") << r.output;

  r = RunFrugal("onnx-test");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("frugal: error: onnx-test needs test folders"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace frugal::test
