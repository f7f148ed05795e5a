// Config loading: variables, defines, and errors that name file, line and node.
#include <gtest/gtest.h>

#include "frugal/config.h"
#include "frugal/op.h"
#include "frugal/passes/shapes.h"
#include "config/expr.h"

namespace frugal {
namespace {

std::string ErrorOf(const std::string& text, const std::vector<std::string>& defines = {}) {
  try {
    ConfigFile cfg = ParseConfig(text, "net.prototxt", defines);
    BuildGraph(cfg);
  } catch (const Error& e) { return e.what(); }
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
      "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hiden\" value: \"3\" "
      "} }\n");
  EXPECT_NE(e.find("attribute 'num_hidden' is required (an integer); the node gives 'num_hiden'"), std::string::npos)
      << e;
  e = ErrorOf(
      "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: \"3\" "
      "}"
      " attr { key: \"no_bais\" value: \"1\" } }\n");
  EXPECT_NE(e.find("unknown attribute 'no_bais' (known: 'num_hidden', 'no_bias', 'flatten')"), std::string::npos) << e;
}

TEST(Config, BadAttributeValue) {
  std::string e = ErrorOf(
      "version: 1\nnode { name: \"fc\" op: \"fully_connected\" input: \"data\" attr { key: \"num_hidden\" value: "
      "\"ten\" } }\n");
  EXPECT_NE(e.find("node 'fc' (fully_connected): attribute 'num_hidden' must be an integer, got 'ten'"),
            std::string::npos)
      << e;
}

TEST(Config, MissingInputIsNamed) {
  std::string e = ErrorOf("version: 1\nnode { name: \"r\" op: \"relu\" input: \"fc9\" }\n");
  EXPECT_NE(e.find("input 'fc9' is not a node defined above"), std::string::npos) << e;
}

TEST(Config, DuplicateNodeName) {
  std::string e = ErrorOf(
      "version: 1\nnode { name: \"r\" op: \"relu\" input: \"data\" }\nnode { name: \"r\" op: \"relu\" input: \"r\" "
      "}\n");
  EXPECT_NE(e.find("net.prototxt:3:1: node 'r'"), std::string::npos) << e;
}

TEST(Config, UnknownVariableAndDefine) {
  std::string e = ErrorOf("version: 1\nname: \"${nope}\"\n");
  EXPECT_NE(e.find("net.prototxt:2:8: unknown variable 'nope'"), std::string::npos) << e;
  e = ErrorOf(kGood, {"hiden=3"});
  EXPECT_NE(e.find("declares no variable 'hiden' (declared: hidden)"), std::string::npos) << e;
}

// A require fails with its file, line and message (variables substituted)
// unless its `that` is a nonzero integer; one that holds changes nothing.
TEST(Config, RequireNamesItsLineAndMessage) {
  const std::string text =
      std::string(kGood) +
      "variable { name: \"heads\" value: \"3\" }\n"
      "require { that: \"$(${hidden} % ${heads} == 0)\" message: \"heads (${heads}) must divide ${hidden}\" }\n";
  EXPECT_EQ(ErrorOf(text, {"heads=4"}), "no error");
  EXPECT_EQ(ErrorOf(text), "net.prototxt:7: heads (3) must divide 8");
  EXPECT_EQ(ErrorOf(std::string(kGood) + "require { that: \"yes\" }\n"),
            "net.prototxt:6: require's that is 'yes', not an integer (write a $(...) expression of the variables)");
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

namespace frugal {
namespace {

const char* kBlocks = R"cfg(version: 1
variable { name: "depth" value: "8" }
variable { name: "units" value: "$((${depth} - 2) / 2)" }
block {
  name: "res"
  node { name: "fc" op: "fully_connected" input: "@{in}" attr { key: "num_hidden" value: "@{width}" } }
  node { name: "act" op: "relu" input: "fc" }
  node { name: "sum" op: "add_n" input: "act" input: "@{in}" }
  output: "sum"
}
block {
  name: "pair"
  node { name: "a" block: "res" input: "@{in}" arg { key: "width" value: "$(2 * @{w})" } }
  node { name: "b" block: "res" input: "a" arg { key: "width" value: "$(2 * @{w})" } }
}
node { name: "stem" op: "fully_connected" input: "data" attr { key: "num_hidden" value: "6" } }
node { name: "body" block: "res" repeat: ${units} input: "stem" arg { key: "width" value: "6" } }
node { name: "two" block: "pair" input: "body" arg { key: "w" value: "3" } }
node { name: "head" op: "fully_connected" input: "two" attr { key: "num_hidden" value: "3" } }
node { name: "prob" op: "softmax_cross_entropy" input: "head" input: "label" }
)cfg";

TEST(ConfigBlocks, RepeatChainsCopiesAndNamesThem) {
  Graph g = BuildGraph(ParseConfig(kBlocks, "b.prototxt", {}));
  ASSERT_GE(g.FindNode("body/2/sum"), 0);
  EXPECT_LT(g.FindNode("body/3/sum"), 0) << "units = (8-2)/2 = 3 copies";
  // Copy 1 reads copy 0's output; the first copy reads the stem.
  const Node& fc1 = g.node(g.FindNode("body/1/fc"));
  EXPECT_EQ(g.node(fc1.inputs[0].node).name, "body/0/sum");
  EXPECT_EQ(g.node(g.node(g.FindNode("body/0/fc")).inputs[0].node).name, "stem");
  // Nested blocks, arguments and expressions.
  const Node& inner = g.node(g.FindNode("two/b/fc"));
  EXPECT_EQ(inner.attrs.at("num_hidden"), "6");
  EXPECT_EQ(g.node(inner.inputs[0].node).name, "two/a/sum");
  EXPECT_EQ(g.node(g.node(g.FindNode("head")).inputs[0].node).name, "two/b/sum");
  EXPECT_NE(inner.loc.ToString().find("(in two/b)"), std::string::npos) << inner.loc.ToString();
  // One copy of a repeat is numbered like any other (repeat: ${units} with units = 1).
  Graph one = BuildGraph(ParseConfig(kBlocks, "b.prototxt", {"depth=4"}));
  EXPECT_GE(one.FindNode("body/0/sum"), 0);
  EXPECT_LT(one.FindNode("body/sum"), 0);
}

TEST(ConfigBlocks, DefinesReachExpressions) {
  Graph g = BuildGraph(ParseConfig(kBlocks, "b.prototxt", {"depth=12"}));
  EXPECT_GE(g.FindNode("body/4/sum"), 0);
  EXPECT_LT(g.FindNode("body/5/sum"), 0);
}

TEST(ConfigBlocks, Errors) {
  EXPECT_NE(ErrorOf(std::string(kBlocks) + "node { name: \"x\" block: \"nope\" input: \"head\" }\n")
                .find("no block named 'nope' (blocks: res, pair)"),
            std::string::npos);
  std::string e = ErrorOf(
      "version: 1\nblock { name: \"r\" node { name: \"f\" op: \"relu\" input: \"@{inn}\" } }\n"
      "node { name: \"x\" block: \"r\" input: \"data\" }\n");
  EXPECT_NE(e.find("@{inn} is not an argument of this block"), std::string::npos) << e;
  e = ErrorOf("version: 1\nvariable { name: \"n\" value: \"$(4 / 0)\" }\nname: \"${n}\"\n");
  EXPECT_NE(e.find("net.prototxt:2: in $(4 / 0): division by zero"), std::string::npos) << e;
  e = ErrorOf(std::string(kBlocks) + "node { name: \"y\" block: \"res\" repeat: -1 input: \"head\" }\n");
  EXPECT_NE(e.find("repeat must be 0 or more, got -1"), std::string::npos) << e;
}

TEST(ConfigBlocks, ExpansionIsBoundedAndNamesItsCulprit) {
  // A repeat count gone wrong: refused before anything is copied.
  std::string e =
      ErrorOf(std::string(kBlocks) + "node { name: \"y\" block: \"res\" repeat: 1000000000 input: \"head\" }\n");
  EXPECT_NE(e.find("node 'y': repeat 1000000000 of block 'res' (3 nodes) would bring the network to 3000000018 "
                   "nodes, more than max_nodes 5000000; raise --max-nodes"),
            std::string::npos)
      << e;
  // Nested blocks of 1,000 repeats each: the copy that would pass the bound is named.
  e = ErrorOf(
      "version: 1\nmax_nodes: 5000\n"
      "block { name: \"in\" node { name: \"f\" op: \"relu\" input: \"@{in}\" } }\n"
      "block { name: \"mid\" node { name: \"b\" block: \"in\" repeat: 1000 input: \"@{in}\" } }\n"
      "node { name: \"top\" block: \"mid\" repeat: 1000 input: \"data\" }\n");
  EXPECT_NE(e.find("(in top/5): node 'top/5/b': repeat 1000 of block 'in' (1 nodes) would bring the network to "
                   "6000 nodes, more than max_nodes 5000"),
            std::string::npos)
      << e;
  // Nested repeats whose innermost block copies nothing: the network stays
  // small, the copies of block nodes are bounded.
  e = ErrorOf(
      "version: 1\nmax_nodes: 5000\n"
      "block { name: \"none\" node { name: \"z\" block: \"in\" repeat: 0 input: \"@{in}\" } }\n"
      "block { name: \"in\" node { name: \"f\" op: \"relu\" input: \"@{in}\" } }\n"
      "block { name: \"mid\" node { name: \"b\" block: \"none\" repeat: 1000 input: \"@{in}\" } }\n"
      "node { name: \"top\" block: \"mid\" repeat: 1000 input: \"data\" }\n");
  EXPECT_NE(e.find("(in top/4): node 'top/4/b': repeat 1000 of block 'none' brings the block nodes copied in "
                   "expanding the blocks to 6000, more than max_nodes 5000"),
            std::string::npos)
      << e;
  // Ten levels of variables that each expand tenfold: 10^10 characters.
  std::string text = "version: 1\nvariable { name: \"v0\" value: \"1\" }\n";
  for (int k = 1; k <= 10; ++k) {
    std::string ten;
    for (int j = 0; j < 10; ++j) ten += "${v" + std::to_string(k - 1) + "}";
    text += "variable { name: \"v" + std::to_string(k) + "\" value: \"" + ten + "\" }\n";
  }
  e = ErrorOf(text + "name: \"${v10}\"\n");
  EXPECT_NE(e.find("makes the text more than 67108864 characters"), std::string::npos) << e;
  // 20,000 chained variables (6 s once, quadratic): each resolved once, and
  // a cycle through them is still found.
  text = "version: 1\nvariable { name: \"c0\" value: \"7\" }\n";
  for (int k = 1; k < 20000; ++k)
    text += "variable { name: \"c" + std::to_string(k) + "\" value: \"${c" + std::to_string(k - 1) + "}\" }\n";
  EXPECT_EQ(ParseConfig(text + "name: \"n${c19999}\"\n", "net.prototxt", {}).net.name(), "n7");
  text.replace(text.find("value: \"7\""), 10, "value: \"${c19999}\"");
  e = ErrorOf(text);
  EXPECT_NE(e.find("refers to itself through other variables"), std::string::npos) << e;
  // Repeat without a block, a node named as a data input.
  e = ErrorOf("version: 1\nnode { name: \"r\" op: \"relu\" input: \"data\" repeat: 3 }\n");
  EXPECT_NE(e.find("node 'r' has repeat but no block"), std::string::npos) << e;
  e = ErrorOf("version: 1\nnode { name: \"label\" op: \"relu\" input: \"data\" }\n");
  EXPECT_NE(e.find("the name 'label' is the data input's"), std::string::npos) << e;
}

}  // namespace
}  // namespace frugal

namespace frugal {
namespace {

TEST(ConfigExpr, ArithmeticComparisonsAndChoice) {
  EXPECT_EQ(EvalExpr("(1001 - 2) / 3 - 30", "t"), 303);
  EXPECT_EQ(EvalExpr("-7 % 3 + 2 * 3", "t"), 5);
  EXPECT_EQ(EvalExpr("50 >= 200 ? 24 : 50 >= 152 ? 8 : 4", "t"), 4);
  EXPECT_EQ(EvalExpr("152 >= 200 ? 24 : 152 >= 152 ? 8 : 4", "t"), 8);
  EXPECT_EQ(EvalExpr("3 == 3", "t") + EvalExpr("3 != 3", "t") + EvalExpr("2 < 1", "t"), 1);
  EXPECT_THROW(EvalExpr("1 ? 2", "t"), Error);
  EXPECT_THROW(EvalExpr("(1 + 2", "t"), Error);
  EXPECT_EQ(ExpandExprs("u$(20 >= 164 ? 9 : 6) and $(2*3)", "t"), "u6 and 6");
  EXPECT_EQ(ExpandExprs("$($((20 - 2) / $(20 >= 164 ? 9 : 6)) - 1)", "t"), "2");
}

TEST(ConfigExpr, OverflowAndDepthAreErrorsNotWrongValues) {
  auto expect_error = [](const std::string& expr, const std::string& needle) {
    try {
      const int64_t v = EvalExpr(expr, "net.prototxt:3");
      ADD_FAILURE() << expr << " = " << v;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("net.prototxt:3: in $(", 0), 0u) << e.what();
    }
  };
  expect_error("4611686018427387904 * 4 + 4", "4611686018427387904 * 4 overflows");
  expect_error("9223372036854775807 + 1", "overflows");
  expect_error("-9223372036854775807 - 2", "overflows");
  expect_error("(-9223372036854775807 - 1) / -1", "/ -1 overflows");
  expect_error("(-9223372036854775807 - 1) % -1", "% -1 overflows");
  expect_error("-(-9223372036854775807 - 1)", "overflows");
  expect_error("99999999999999999999", "99999999999999999999 is more than a 64-bit integer holds");
  expect_error(std::string(20000, '(') + "1" + std::string(20000, ')'), "nested more than 200 deep");
  expect_error(std::string(20000, '-') + "1", "nested more than 200 deep");
  // The largest values themselves are fine.
  EXPECT_EQ(EvalExpr("9223372036854775807", "t"), INT64_MAX);
  EXPECT_EQ(EvalExpr("-9223372036854775807 - 1", "t"), INT64_MIN);
  EXPECT_EQ(EvalExpr(std::string(50, '(') + "7" + std::string(50, ')'), "t"), 7);
  std::string nested = "1";
  for (int i = 0; i < 300; ++i) nested = "$(" + nested + ")";
  EXPECT_THROW(ExpandExprs(nested, "t"), Error);
}

}  // namespace
}  // namespace frugal

namespace frugal {
namespace {

// A tiny recurrent net: the step block names the previous step by index,
// the weight is one variable shared by every step, the initial state is aux.
TEST(ConfigBlocks, RecurrenceWithSharedWeights) {
  const char* text = R"cfg(version: 1
node { name: "w" op: "variable" attr { key: "init" value: "xavier" } }
node { name: "steps/-1/h" op: "variable" attr { key: "kind" value: "aux" } attr { key: "shape" value: "(2,4)" } }
block {
  name: "step"
  node { name: "fc" op: "fully_connected" input: "steps/$(@{i} - 1)/h" input: "w"
         attr { key: "num_hidden" value: "4" } attr { key: "no_bias" value: "true" } }
  node { name: "h" op: "relu" input: "fc" }
}
node { name: "steps" block: "step" repeat: 3 input: "data" }
node { name: "prob" op: "softmax_cross_entropy" input: "steps" input: "label" }
)cfg";
  Graph g = BuildGraph(ParseConfig(text, "rnn.prototxt", {}));
  const Node& fc2 = g.node(g.FindNode("steps/2/fc"));
  EXPECT_EQ(g.node(fc2.inputs[0].node).name, "steps/1/h");
  EXPECT_EQ(g.node(fc2.inputs[1].node).name, "w");
  EXPECT_EQ(g.node(g.node(g.FindNode("steps/0/fc")).inputs[0].node).name, "steps/-1/h");
  EXPECT_EQ(g.node(g.FindNode("steps/-1/h")).var, VarKind::kAux);
  InferShapes(&g, {{"label", Shape{2}}});
  EXPECT_EQ(g.shape({g.FindNode("w"), 0}), (Shape{4, 4}));
  EXPECT_EQ(g.shape({g.FindNode("steps/2/h"), 0}), (Shape{2, 4}));
}

}  // namespace
}  // namespace frugal

namespace frugal {
namespace {

TEST(ConfigBlocks, WildcardInputsGatherEveryMatch) {
  const char* text = R"cfg(version: 1
block { name: "b" node { name: "h" op: "relu" input: "@{in}" } }
node { name: "s" block: "b" repeat: 3 input: "data" }
node { name: "all" op: "add_n" input: "s/*/h" attr { key: "num_args" value: "3" } }
node { name: "none" op: "relu" input: "s/*/x" }
)cfg";
  std::string e;
  try {
    BuildGraph(ParseConfig(text, "w.prototxt", {}));
  } catch (const Error& err) { e = err.what(); }
  EXPECT_NE(e.find("input pattern 's/*/x' matches no node above"), std::string::npos) << e;
  std::string ok = std::string(text).substr(0, std::string(text).find("node { name: \"none\""));
  Graph g = BuildGraph(ParseConfig(ok, "w.prototxt", {}));
  const Node& all = g.node(g.FindNode("all"));
  ASSERT_EQ(all.inputs.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(g.node(all.inputs[k].node).name, Fmt("s/", k, "/h"));
}

}  // namespace
}  // namespace frugal
