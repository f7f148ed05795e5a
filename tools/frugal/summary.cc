// frugal summary: a table of the forward graph under the config's memory
// strategy: output shape, parameters, forward FLOPs, and the bytes of each
// node's outputs kept from the forward pass for the backward pass (0 where
// the strategy recomputes them).
#include <cstdio>

#include "cli.h"
#include "frugal/op.h"
#include "frugal/train.h"

namespace frugal::cli {

int Summary() {
  ConfigFile cfg = LoadConfigFromFlags();
  const MemoryStrategy strategy = ConfigStrategy(cfg);
  Model m = BuildModel(cfg, strategy);
  const Graph& g = m.train;
  // kept[e]: forward entry e is read after the forward pass by a gradient node
  // (mirrors read what is kept, so their reads count too).
  std::vector<bool> kept(g.num_entries(), false);
  for (int i = g.num_forward(); i < g.num_nodes(); ++i)
    for (const Entry& e : g.node(i).inputs)
      if (e.node < g.num_forward()) kept[g.EntryId(e)] = true;
  std::printf("%-32s %-22s %-20s %12s %14s %12s\n", "node", "op", "output", "params", "forward FLOPs", "kept bytes");
  int64_t total_params = 0, total_kept = 0;
  double total_flops = 0;
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    int64_t params = 0, kept_bytes = 0;
    std::vector<Shape> in, out;
    for (const Entry& e : n.inputs) {
      in.push_back(g.shape(e));
      const Node& src = g.node(e.node);
      if (src.var == VarKind::kParam) params += g.shape(e).Size();
    }
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      out.push_back(g.shape({i, k}));
      if (kept[g.EntryId({i, k})]) kept_bytes += g.EntryBytes({i, k});
    }
    const double flops = n.op->Flops(n, in, out);
    total_params += params;
    total_kept += kept_bytes;
    total_flops += flops;
    std::printf("%-32s %-22s %-20s %12lld %14.4g %12s\n", n.Label().c_str(), n.op->name().c_str(),
                out[0].ToString().c_str(), static_cast<long long>(params), flops, HumanBytes(kept_bytes).c_str());
  }
  std::printf("total (%s, batch %lld): %lld parameters, %.4g forward FLOPs, %s kept for the backward pass; %s\n",
              strategy.Name().c_str(), static_cast<long long>(m.batch), static_cast<long long>(total_params),
              total_flops, HumanBytes(total_kept).c_str(), PlanSummary(m.train_plan, m.batch).c_str());
  return 0;
}

}  // namespace frugal::cli
