// Timeline: a memory plan's live bytes over the schedule
// (frugal/passes/memory_plan.h).
#include <algorithm>
#include <numeric>

#include "frugal/passes/memory_plan.h"

namespace frugal {

const char* MemoryTimeline::KindName(int k) {
  static const char* const kNames[] = {"forward activations", "recomputed", "gradients", "workspace"};
  return kNames[k];
}

MemoryTimeline Timeline(const Graph& g, const MemoryPlan& plan, int max_points, int peak_names) {
  MemoryTimeline t;
  t.num_steps = g.num_nodes();
  t.backward_step = g.num_forward();
  if (t.num_steps == 0) return t;
  auto kind = [&](const ArenaBlock& b) {
    if (b.entry < 0) return MemoryTimeline::kWorkspace;
    const Node& n = g.node(b.node);
    if (n.mirror_of >= 0) return MemoryTimeline::kRecomputed;
    return b.node < g.num_forward() ? MemoryTimeline::kForward : MemoryTimeline::kGradient;
  };
  // Live bytes per kind at every step, from each block's start and end.
  std::vector<std::array<int64_t, MemoryTimeline::kNumKinds>> delta(t.num_steps);
  for (const ArenaBlock& b : plan.blocks) {
    const int k = kind(b);
    delta[b.start][k] += b.size;
    if (b.end + 1 < t.num_steps) delta[b.end + 1][k] -= b.size;  // graph outputs live to the end
  }
  std::array<int64_t, MemoryTimeline::kNumKinds> live{};
  std::vector<std::array<int64_t, MemoryTimeline::kNumKinds>> at(t.num_steps);
  for (int s = 0; s < t.num_steps; ++s) {
    for (int k = 0; k < MemoryTimeline::kNumKinds; ++k) live[k] += delta[s][k];
    at[s] = live;
  }
  auto total = [](const std::array<int64_t, MemoryTimeline::kNumKinds>& a) {
    return std::accumulate(a.begin(), a.end(), int64_t{0});
  };
  // Points: the step with the most live bytes of each span.
  const int span = std::max(1, (t.num_steps + max_points - 1) / std::max(1, max_points));
  for (int s0 = 0; s0 < t.num_steps; s0 += span) {
    int best = s0;
    for (int s = s0; s < std::min(t.num_steps, s0 + span); ++s)
      if (total(at[s]) > total(at[best])) best = s;
    t.steps.push_back(best);
    t.bytes.push_back(at[best]);
    if (total(at[best]) > t.peak_bytes) t.peak_bytes = total(at[best]), t.peak_step = best;
  }
  for (int s = 0; s < t.num_steps; ++s) {
    if (g.node(s).mirror_of < 0) continue;
    if (!t.recomputing.empty() && t.recomputing.back().second == s - 1) {
      t.recomputing.back().second = s;
    } else {
      t.recomputing.push_back({s, s});
    }
  }
  // The largest blocks live at the peak, named by what opened them.
  std::vector<const ArenaBlock*> alive;
  for (const ArenaBlock& b : plan.blocks)
    if (b.start <= t.peak_step && t.peak_step <= b.end) alive.push_back(&b);
  std::stable_sort(alive.begin(), alive.end(),
                   [](const ArenaBlock* a, const ArenaBlock* b) { return a->size > b->size; });
  for (int i = 0; i < std::min<int>(peak_names, static_cast<int>(alive.size())); ++i) {
    const ArenaBlock& b = *alive[i];
    const Node& n = g.node(b.node);
    std::string name = b.entry < 0 ? n.name + " (workspace)" : n.name;
    if (b.entry >= 0 && g.NumOutputs(b.node) > 1) name += Fmt(":", b.entry - g.EntryId({b.node, 0}));
    t.peak_tensors.push_back({name, b.size});
  }
  return t;
}

}  // namespace frugal
