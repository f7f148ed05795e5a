// CostTable: measured op times keyed by op, attributes and input shapes,
// and the planner's price of recomputing a node (frugal/passes/costs.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/schedule.h"

namespace frugal {

std::string CostTable::Key(const Graph& g, int i) {
  const Node& n = g.node(i);
  std::string key = n.op->name();
  for (const auto& [name, value] : n.attrs) key += " " + name + "=" + value;
  for (const Entry& e : n.inputs) key += " " + g.shape(e).ToString() + DTypeName(g.dtype(e));
  return key;
}

void CostTable::Add(const std::string& key, double forward_ms, double backward_ms, double forward_cold,
                    double backward_cold) {
  Cost& c = costs_[key];
  auto average = [&](double* mean, double x) { *mean = (*mean * c.count + x) / (c.count + 1); };
  average(&c.forward_ms, forward_ms);
  average(&c.backward_ms, backward_ms);
  average(&c.forward_cold, forward_cold);
  average(&c.backward_cold, backward_cold);
  ++c.count;
}

CostTable::Cost CostTable::Of(const Graph& g, int i) const {
  if (g.node(i).is_variable()) return {};
  auto it = costs_.find(Key(g, i));
  if (it != costs_.end()) return it->second;
  const double forward_ms = NodeFlops(g, i) * ms_per_flop;
  return {forward_ms, forward_ms * backward_ratio, 0, 0, 0};
}

std::vector<double> CostTable::NodeMs(const Graph& g, const MemoryPlan* placed) const {
  // Each node's time, and its cold bytes when measured (-1: not measured).
  std::vector<double> ms(g.num_nodes(), 0), measured_cold(g.num_nodes(), -1);
  std::vector<Cost> forward(g.num_forward());
  std::vector<int> gradient_nodes(g.num_forward(), 0);
  double sum_elements = 0;
  auto elements = [&](int i) {
    double x = 0;
    for (int k = 0; k < g.NumOutputs(i); ++k) x += static_cast<double>(g.shape({i, k}).Size());
    return x;
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    if (i < g.num_forward()) {
      forward[i] = Of(g, i);
    } else if (n.fwd >= 0) {
      ++gradient_nodes[n.fwd];
    } else if (n.mirror_of < 0) {
      sum_elements += elements(i);
    }
  }
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    if (i < g.num_forward() || n.mirror_of >= 0) {
      const Cost& c = forward[i < g.num_forward() ? i : n.mirror_of];
      ms[i] = c.forward_ms;
      if (c.count > 0) measured_cold[i] = c.forward_cold;
    } else if (n.fwd >= 0) {
      const Cost& c = forward[n.fwd];
      ms[i] = c.backward_ms / gradient_nodes[n.fwd];
      if (c.count > 0) measured_cold[i] = c.backward_cold / gradient_nodes[n.fwd];
    } else {
      const double share = elements(i) / sum_elements;
      ms[i] = sums_ms * share;
      measured_cold[i] = sums_cold * share;
    }
  }
  if (placed && ms_per_cold_byte > 0) {
    const std::vector<double> cold = ColdBytes(g, *placed, cache_bytes);
    for (int i = 0; i < g.num_nodes(); ++i)
      if (measured_cold[i] >= 0) ms[i] = std::max(0.0, ms[i] + ms_per_cold_byte * (cold[i] - measured_cold[i]));
  }
  return ms;
}

double CostTable::StepMs(const Graph& g, const MemoryPlan& placed) const {
  return ScheduledStepMs(g, placed, NodeMs(g, &placed), workers) * wall_per_schedule_ms;
}

void CostTable::Save(const std::string& path) const {
  std::ostringstream out;
  {
    out << "# frugal cost table: forward_ms backward_ms forward_cold backward_cold count key (op attrs "
           "input-shapes)\n";
    out << Fmt("ms_per_flop ", ms_per_flop, "\nbackward_ratio ", backward_ratio, "\nsums_ms ", sums_ms, "\nsums_cold ",
               sums_cold, "\ncache_bytes ", cache_bytes, "\nms_per_cold_byte ", ms_per_cold_byte, "\nworkers ", workers,
               "\nwall_per_schedule_ms ", wall_per_schedule_ms, "\n");
    for (const auto& [key, c] : costs_)
      out << Fmt(c.forward_ms, " ", c.backward_ms, " ", c.forward_cold, " ", c.backward_cold, " ", c.count, " ", key,
                 "\n");
  }
  WriteFileAtomic(path, out.str());
}

CostTable CostTable::Load(const std::string& path) {
  std::istringstream in(ReadFileBytes(path, "cost table", "write one with `frugal time --save-costs FILE`"));
  CostTable t;
  std::string line;
  bool have_rate = false;
  for (int ln = 1; std::getline(in, line); ++ln) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string first;
    s >> first;
    const auto bad = [&](const char* what) {
      return Error(Fmt(path, ":", ln, ": ", what, " in '", line, "'; write the table again with `frugal time ",
                       "--save-costs FILE`"));
    };
    if (first == "workers") {
      if (!(s >> t.workers) || t.workers < 1) throw bad("a missing or non-positive worker count");
      continue;
    }
    if (first == "cache_bytes") {
      if (!(s >> t.cache_bytes) || t.cache_bytes < 0) throw bad("a missing or negative cache size");
      continue;
    }
    double* field = first == "ms_per_flop"            ? &t.ms_per_flop
                    : first == "backward_ratio"       ? &t.backward_ratio
                    : first == "sums_ms"              ? &t.sums_ms
                    : first == "sums_cold"            ? &t.sums_cold
                    : first == "ms_per_cold_byte"     ? &t.ms_per_cold_byte
                    : first == "wall_per_schedule_ms" ? &t.wall_per_schedule_ms
                                                      : nullptr;
    // NaN compares false: every time must be a number at least 0.
    const auto time = [](double v) { return std::isfinite(v) && v >= 0; };
    if (field) {
      if (!(s >> *field) || !time(*field)) throw bad("a missing, negative or non-finite value");
      have_rate = have_rate || field == &t.ms_per_flop;
      continue;
    }
    Cost c;
    std::string key;
    try {
      c.forward_ms = std::stod(first);
    } catch (const std::exception&) {
      throw bad(
          "an unknown line (not a number, ms_per_flop, backward_ratio, sums_ms, sums_cold, cache_bytes, "
          "ms_per_cold_byte, workers or wall_per_schedule_ms)");
    }
    if (!(s >> c.backward_ms >> c.forward_cold >> c.backward_cold >> c.count) || !time(c.forward_ms) ||
        !time(c.backward_ms) || !time(c.forward_cold) || !time(c.backward_cold) || c.count < 1)
      throw bad(
          "an entry without finite forward_ms >= 0, backward_ms >= 0, forward_cold >= 0, backward_cold >= 0 and "
          "count >= 1");
    std::getline(s >> std::ws, key);
    if (key.empty()) throw bad("an entry without its key");
    if (!t.costs_.emplace(key, c).second) throw bad("a key listed twice");
  }
  FRUGAL_REQUIRE(have_rate, path, ": no ms_per_flop line (is this a cost table from `frugal time --save-costs`?)");
  return t;
}

double RecomputeCost(const Graph& g, int i, const CostTable* costs) {
  return costs ? costs->Of(g, i).forward_ms : NodeFlops(g, i);
}

}  // namespace frugal
