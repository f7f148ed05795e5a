// frugal viz: the forward graph as Graphviz dot, under the config's memory
// strategy: nodes whose results the backward pass recomputes are dashed and
// grey, kept ones solid; parameters are small ellipses.
//   frugal viz --config X [--memory sqrt] > net.dot && dot -Tsvg net.dot > net.svg
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "frugal/op.h"
#include "frugal/train.h"

namespace frugal::cli {

namespace {
// A dot string; lines of a label are joined with dot's "\n".
std::string Quote(const std::vector<std::string>& lines) {
  std::string out = "\"";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\\n";
    for (char c : lines[i]) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  }
  return out + "\"";
}
}  // namespace

int Viz() {
  ConfigFile cfg = LoadConfigFromFlags();
  const MemoryStrategy strategy = ConfigStrategy(cfg);
  Model m = BuildModel(cfg, strategy);
  const Graph& g = m.train;
  std::set<int> recomputed;
  for (const Node& n : g.nodes())
    if (n.mirror_of >= 0) recomputed.insert(n.mirror_of);
  std::printf("digraph %s {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n",
              Quote({cfg.net.name().empty() ? "net" : cfg.net.name()}).c_str());
  std::printf("  label=%s;\n",
              Quote({Fmt(strategy.Name(), ": ", recomputed.size(), " nodes recomputed (dashed grey), +",
                         static_cast<int>(100 * m.train_plan.extra_flops_ratio() + 0.5), "% FLOPs")})
                  .c_str());
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) {
      const char* style = n.var == VarKind::kInput ? "shape=box, style=bold" : "shape=ellipse, fontsize=8";
      std::printf("  n%d [label=%s, %s];\n", i, Quote({n.name}).c_str(), style);
      continue;
    }
    const bool dropped = recomputed.count(i) > 0;
    std::printf("  n%d [label=%s, shape=box%s];\n", i,
                Quote({n.Label(), n.op->name() + " " + g.shape({i, 0}).ToString()}).c_str(),
                dropped ? ", style=\"dashed,filled\", fillcolor=lightgrey" : "");
    for (const Entry& e : n.inputs) std::printf("  n%d -> n%d;\n", e.node, i);
  }
  std::printf("}\n");
  return 0;
}

}  // namespace frugal::cli
