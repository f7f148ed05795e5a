// `frugal ops` and `frugal onnx-test` end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "frugal/op.h"
#include "onnx.pb.h"
#include "test_util.h"

namespace frugal::test {
namespace {

const std::string kNode = std::string(ONNX_TESTDATA_DIR) + "/node";

TEST(OpsCommand, ListsEveryOpWithItsDeclarations) {
  RunResult r = RunFrugal("ops");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const OpDef* op : OpRegistry::Get().All())
    EXPECT_NE(r.output.find("\n" + op->name() + "\n"), std::string::npos) << op->name() << "\n" << r.output;
  EXPECT_NE(r.output.find("inputs: x, weight(param,xavier), bias(param,zero)  outputs: y"), std::string::npos);
  EXPECT_NE(r.output.find("devices: cpu  in-place: x->y  recompute: cheap  random: no  gradient: _backward_relu"),
            std::string::npos)
      << r.output;
  // Backward ops come after every forward op.
  size_t backward = r.output.find("backward ops (made by the gradient pass");
  ASSERT_NE(backward, std::string::npos);
  EXPECT_GT(r.output.find("\n_backward_relu\n"), backward);
  EXPECT_LT(r.output.find("\nsoftmax_cross_entropy\n"), backward);
}

TEST(OpsCommand, JsonIsOneObjectPerOp) {
  RunResult r = RunFrugal("ops --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::string line;
  size_t n = 0;
  bool seen_backward = false;
  while (std::getline(in, line)) {
    ++n;
    EXPECT_TRUE(std::regex_match(line, std::regex("\\{\"name\":\"[a-z_]+\",\"backward\":(true|false),.*\\}"))) << line;
    bool backward = line.find("\"backward\":true") != std::string::npos;
    EXPECT_FALSE(seen_backward && !backward) << "forward op after a backward one: " << line;
    seen_backward = seen_backward || backward;
  }
  EXPECT_EQ(n, OpRegistry::Get().All().size());
  EXPECT_NE(r.output.find("{\"name\":\"relu\",\"backward\":false,"), std::string::npos);
  EXPECT_NE(r.output.find("\"inplace\":[[0,0]],\"mutates\":[],\"recompute\":\"cheap\",\"random\":false,\"loss\":false,"
                          "\"gradient\":\"_backward_relu\"}"),
            std::string::npos)
      << r.output;
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
