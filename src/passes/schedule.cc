// What the engine orders a plan's ops by (EngineAccesses, which the executor
// declares), the step that ordering predicts on a number of workers
// (ScheduledStepMs, which a cost table's prediction uses), and the arena
// bytes each op finds cold (ColdBytes, which prices it there).
//
// A plan that reuses more of its arena also orders more: the op that first
// writes a block waits for the last readers of every block whose bytes it
// takes over. Two ops of an LSTM's layers that could run at once do not when
// the second's output takes the first's input's bytes; a recomputing plan,
// whose arena is small, reuses most and so serialises most (docs/memory.md,
// "Priced in time"). A sum of op times cannot see that; a schedule does.
#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <queue>

#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/schedule.h"

namespace frugal {
namespace {

// A value for each byte of the arena, kept as breakpoints: the bytes from
// one key to the next have the key's value.
template <typename T>
class ByteMap {
 public:
  explicit ByteMap(T initial) { map_[0] = initial; }
  // Sets [begin, end) to `value`, first calling visit(bytes, old value) for
  // each run of those bytes that had one value.
  template <typename Visit>
  void Set(int64_t begin, int64_t end, T value, Visit&& visit) {
    if (begin >= end) return;
    Split(begin);
    Split(end);
    auto it = map_.find(begin);
    while (it->first < end) {
      visit(std::next(it)->first - it->first, it->second);
      it = map_.erase(it);
    }
    map_.emplace_hint(it, begin, value);
  }

 private:
  void Split(int64_t x) {
    auto it = std::prev(map_.upper_bound(x));
    if (it->first != x) map_.emplace_hint(std::next(it), x, it->second);
  }
  std::map<int64_t, T> map_;
};

void AddOnce(std::vector<int>* v, int x) {
  if (std::find(v->begin(), v->end(), x) == v->end()) v->push_back(x);
}

}  // namespace

std::vector<OpAccess> EngineAccesses(const Graph& g, const MemoryPlan& plan) {
  CHECK(!plan.blocks.empty() || plan.num_blocks == 0) << "EngineAccesses needs a placed plan, not an estimate";
  const int num_entries = g.num_entries(), num_blocks = plan.num_blocks;
  auto resource = [&](int e) { return plan.entry_offset[e] >= 0 ? num_entries + plan.entry_block[e] : e; };

  // Blocks open in node order (a block's opener, its ArenaBlock::node, is
  // its first writer). The first pass leaves the owners at the end of a
  // step, where the next step starts; the second records, per block, the
  // earlier holders of its bytes (the previous step's, for the first ones).
  std::vector<std::vector<int>> reuse(num_blocks);
  ByteMap<int> owners(-1);  // the block that last held each byte (-1: none yet)
  for (int pass = 0; pass < 2; ++pass)
    for (int b = 0; b < num_blocks; ++b) {
      const ArenaBlock& blk = plan.blocks[b];
      reuse[b].clear();
      owners.Set(blk.offset, blk.offset + blk.size, b, [&](int64_t, int owner) {
        if (owner >= 0 && owner != b) AddOnce(&reuse[b], owner);
      });
    }
  std::vector<std::vector<int>> reuse_of_node(g.num_nodes());
  for (int b = 0; b < num_blocks; ++b)
    for (int c : reuse[b]) AddOnce(&reuse_of_node[plan.blocks[b].node], num_entries + c);
  std::vector<int> workspace_block(g.num_nodes(), -1);
  for (int b = 0; b < num_blocks; ++b)
    if (plan.blocks[b].entry < 0) workspace_block[plan.blocks[b].node] = b;

  std::vector<OpAccess> ops;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    OpAccess a{i, {}, {}};
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const bool written = n.mirror_of < 0 && n.op->mutates(static_cast<int>(k));  // a recomputation writes nothing
      AddOnce(written ? &a.writes : &a.reads, resource(g.EntryId(n.inputs[k])));
    }
    for (int k = 0; k < g.NumOutputs(i); ++k) AddOnce(&a.writes, resource(g.EntryId({i, k})));
    if (workspace_block[i] >= 0) AddOnce(&a.writes, num_entries + workspace_block[i]);
    for (int r : reuse_of_node[i]) AddOnce(&a.writes, r);
    // A resource both read and written counts as written.
    auto written = [&](int r) { return std::find(a.writes.begin(), a.writes.end(), r) != a.writes.end(); };
    a.reads.erase(std::remove_if(a.reads.begin(), a.reads.end(), written), a.reads.end());
    ops.push_back(std::move(a));
  }
  return ops;
}

std::vector<double> ColdBytes(const Graph& g, const MemoryPlan& plan, int64_t cache_bytes) {
  CHECK_EQ(plan.entry_offset.size(), static_cast<size_t>(g.num_entries()))
      << "ColdBytes needs a placed plan, not an estimate";
  ByteMap<double> touched(-1e300);  // when each byte was last touched, on a clock of bytes touched
  std::vector<double> cold(g.num_nodes(), 0);
  std::vector<std::pair<int64_t, int64_t>> ranges;  // the op's arena bytes
  double clock = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < g.num_nodes(); ++i) {
      const Node& n = g.node(i);
      if (n.is_variable()) continue;
      ranges.clear();
      double bytes = 0;
      auto access = [&](int e) {
        bytes += static_cast<double>(g.EntryBytes(e));
        if (plan.entry_offset[e] >= 0) ranges.push_back({plan.entry_offset[e], plan.entry_offset[e] + g.EntryBytes(e)});
      };
      for (const Entry& e : n.inputs) access(g.EntryId(e));
      for (int k = 0; k < g.NumOutputs(i); ++k) access(g.EntryId({i, k}));
      if (plan.workspace_offset[i] >= 0) {
        ranges.push_back({plan.workspace_offset[i], plan.workspace_offset[i] + plan.workspace_bytes[i]});
        bytes += static_cast<double>(plan.workspace_bytes[i]);
      }
      // An entry read twice, or an output in its input's bytes: each byte once.
      std::sort(ranges.begin(), ranges.end());
      size_t merged = 0;
      for (size_t r = 0; r < ranges.size(); ++r)
        if (merged > 0 && ranges[r].first <= ranges[merged - 1].second)
          ranges[merged - 1].second = std::max(ranges[merged - 1].second, ranges[r].second);
        else
          ranges[merged++] = ranges[r];
      ranges.resize(merged);
      const double since = clock - static_cast<double>(cache_bytes);
      clock += bytes;
      double c = 0;
      for (const auto& [begin, end] : ranges)
        touched.Set(begin, end, clock, [&](int64_t run, double last) { c += last < since ? run : 0; });
      if (pass == 1) cold[i] = c;
    }
  return cold;
}

double GraphParallelism(const Graph& g) {
  std::vector<double> finish(g.num_nodes(), 0);
  double total = 0, longest = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    double start = 0;
    for (const Entry& e : n.inputs) start = std::max(start, finish[e.node]);
    double elements = 0;
    for (int k = 0; k < g.NumOutputs(i); ++k) elements += g.shape({i, k}).Size();
    const double cost = std::max(NodeFlops(g, i), elements);
    finish[i] = start + cost;
    total += cost;
    longest = std::max(longest, finish[i]);
  }
  return longest > 0 ? total / longest : 1;
}

double MeanOpFlops(const Graph& g) {
  double flops = 0;
  int ops = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).is_variable()) continue;
    flops += NodeFlops(g, i);
    ++ops;
  }
  return ops > 0 ? flops / ops : 0;
}

bool TwoWorkersByDefault(const Graph& train) {
  return GraphParallelism(train) >= kParallelismForTwoWorkers || MeanOpFlops(train) < kSmallKernelFlops;
}

double ScheduledStepMs(const Graph& g, const MemoryPlan& plan, const std::vector<double>& node_ms, int workers) {
  CHECK_EQ(static_cast<int>(node_ms.size()), g.num_nodes());
  CHECK_GE(workers, 1);
  const std::vector<OpAccess> ops = EngineAccesses(g, plan);
  const int num_ops = static_cast<int>(ops.size());

  // The engine's dependencies: a read waits for the resource's last
  // writer, a write for it and for every read since.
  std::vector<std::vector<int>> next(num_ops);
  std::vector<int> waits(num_ops, 0);
  std::vector<int> last_writer(g.num_entries() + plan.num_blocks, -1);
  std::vector<std::vector<int>> readers(last_writer.size());
  auto after = [&](int before, int op) {
    if (before < 0 || (!next[before].empty() && next[before].back() == op)) return;
    next[before].push_back(op);
    ++waits[op];
  };
  for (int j = 0; j < num_ops; ++j) {
    for (int r : ops[j].reads) after(last_writer[r], j);
    for (int r : ops[j].writes) {
      after(last_writer[r], j);
      for (int reader : readers[r]) after(reader, j);
    }
    for (int r : ops[j].reads) readers[r].push_back(j);
    for (int r : ops[j].writes) {
      last_writer[r] = j;
      readers[r].clear();
    }
  }

  // List scheduling as the engine's pool does it: a free worker takes the
  // ready op pushed first.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  using Running = std::pair<double, int>;  // finish time, op
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
  for (int j = 0; j < num_ops; ++j)
    if (waits[j] == 0) ready.push(j);
  double now = 0;
  while (!ready.empty() || !running.empty()) {
    while (!ready.empty() && static_cast<int>(running.size()) < workers) {
      const int j = ready.top();
      ready.pop();
      running.push({now + node_ms[ops[j].node], j});
    }
    const auto [finish, j] = running.top();
    running.pop();
    now = finish;
    for (int k : next[j])
      if (--waits[k] == 0) ready.push(k);
  }
  return now;
}

}  // namespace frugal
