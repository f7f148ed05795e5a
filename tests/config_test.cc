// Config loading: variables, defines, and errors that name file, line and node.
#include <gtest/gtest.h>

#include "frugal/config.h"
#include "frugal/op.h"
#include "frugal/passes.h"

namespace frugal {
namespace {

std::string ErrorOf(const std::string& text, const std::vector<std::string>& defines = {}) {
  try {
    ConfigFile cfg = ParseConfig(text, "net.prototxt", defines);
    BuildGraph(cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

const char* kGood = R"(version: 1
variable { name: "hidden" value: "8" }
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "${hidden}" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { batch_size: 4 sample_shape: [3] }
)";

TEST(Config, VariablesAndDefines) {
  ConfigFile cfg = ParseConfig(kGood, "net.prototxt", {});
  EXPECT_EQ(cfg.values.at("hidden"), "8");
  EXPECT_EQ(cfg.net.node(0).attr().at("num_hidden"), "8");
  cfg = ParseConfig(kGood, "net.prototxt", {"hidden=16"});
  EXPECT_EQ(cfg.net.node(0).attr().at("num_hidden"), "16");
  EXPECT_EQ(cfg.node_locs[1].line, 4);
}

TEST(Config, BuildsParametersAndInputs) {
  Graph g = BuildGraph(ParseConfig(kGood, "net.prototxt", {}));
  ASSERT_GE(g.FindNode("fc_weight"), 0);
  EXPECT_EQ(g.node(g.FindNode("fc_weight")).var, VarKind::kParam);
  EXPECT_EQ(g.node(g.FindNode("fc_bias")).init, "zero");
  EXPECT_EQ(g.node(g.FindNode("data")).var, VarKind::kInput);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.node(g.outputs[0].node).name, "prob");
}

TEST(Config, SyntaxErrorNamesFileLineAndColumn) {
  std::string e = ErrorOf("version: 1\nnode { name: \"a\" op: relu }\n");
  EXPECT_NE(e.find("net.prototxt:2:"), std::string::npos) << e;
}

TEST(Config, UnknownFieldNamesLine) {
  std::string e = ErrorOf("version: 1\n\nnode { nmae: \"a\" }\n");
  EXPECT_NE(e.find("net.prototxt:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("nmae"), std::string::npos) << e;
}

TEST(Config, UnknownOpSuggestsTheNearestName) {
  std::string e = ErrorOf("version: 1\nnode { name: \"fc\" op: \"fully_conected\" input: \"data\" }\n");
  EXPECT_NE(e.find("net.prototxt:2:1: node 'fc'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'fully_connected'"), std::string::npos) << e;
}

TEST(Config, UnknownAttributeListsKnownOnes) {
  std::string e = ErrorOf(
      "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hiden\" value: \"3\" } }\n");
  EXPECT_NE(e.find("attribute 'num_hidden' is required (an integer); the node gives 'num_hiden'"), std::string::npos)
      << e;
  e = ErrorOf(
      "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"3\" }"
      " attr { key: \"no_bais\" value: \"1\" } }\n");
  EXPECT_NE(e.find("unknown attribute 'no_bais' (known: 'num_hidden', 'no_bias', 'flatten')"), std::string::npos) << e;
}

TEST(Config, BadAttributeValue) {
  std::string e = ErrorOf(
      "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"ten\" } }\n");
  EXPECT_NE(e.find("node 'fc' (fully_connected): attribute 'num_hidden' must be an integer, got 'ten'"),
            std::string::npos)
      << e;
}

TEST(Config, MissingInputIsNamed) {
  std::string e = ErrorOf("version: 1\nnode { name: \"r\" op: \"relu\" input: \"fc9\" }\n");
  EXPECT_NE(e.find("input 'fc9' is not a node defined above"), std::string::npos) << e;
}

TEST(Config, DuplicateNodeName) {
  std::string e = ErrorOf("version: 1\nnode { name: \"r\" op: \"relu\" input: \"data\" }\nnode { name: \"r\" op: \"relu\" input: \"r\" }\n");
  EXPECT_NE(e.find("net.prototxt:3:1: node 'r'"), std::string::npos) << e;
}

TEST(Config, UnknownVariableAndDefine) {
  std::string e = ErrorOf("version: 1\nname: \"${nope}\"\n");
  EXPECT_NE(e.find("net.prototxt:2:8: unknown variable 'nope'"), std::string::npos) << e;
  e = ErrorOf(kGood, {"hiden=3"});
  EXPECT_NE(e.find("declares no variable 'hiden' (declared: hidden)"), std::string::npos) << e;
}

TEST(Config, VersionIsRequired) {
  std::string e = ErrorOf("node { name: \"r\" op: \"relu\" input: \"data\" }\n");
  EXPECT_NE(e.find("version"), std::string::npos) << e;
}

TEST(Config, ShapeMismatchNamesNode) {
  std::string text = R"(version: 1
node { name: "fc" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "4" } }
node { name: "fc2" op: "fully_connected" input: "fc" input: "fc_weight" attr { key: "num_hidden" value: "4" } }
)";
  Graph g = BuildGraph(ParseConfig(text, "net.prototxt", {}));
  try {
    InferShapes(&g, {{"data", Shape{2, 3}}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("net.prototxt:3:1: node 'fc2' (fully_connected): weight has shape (4,3)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace frugal
