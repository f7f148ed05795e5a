#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "frugal/op.h"
#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "frugal/train.h"
#include "train/update_graph.h"

namespace frugal {

namespace {
// s priced by the config's cost table, loaded, where it names one and s has
// none.
MemoryStrategy WithCosts(const ConfigFile& cfg, MemoryStrategy s) {
  if (!s.costs && !cfg.net.memory().costs().empty())
    s.costs = std::make_shared<const CostTable>(CostTable::Load(cfg.net.memory().costs()));
  return s;
}

// PlanTraining; under limit=SIZE (with `rest`, the rest of the process as
// ResolveLimit counted it), a plan whose process fits the limit, or the
// limit's error: the smallest limit that fits, by part, and the largest
// part.
TrainingPlan PlanWithin(const ConfigFile& cfg, const Graph& fwd,
                        const std::vector<std::pair<std::string, Shape>>& inputs, const MemoryStrategy& s, Device dev,
                        const ProcessBytes& rest, const std::function<int(const Graph&)>& workers) {
  if (!s.limit()) return PlanTraining(fwd, inputs, s, dev, workers);
  // A plan that recomputes has more nodes than share's, whose runtime
  // allowance the budget left room for: the budget is lowered by the excess
  // and the graph planned again (its nodes grow with the recomputation, so
  // a round or two settle it; after kRounds, the smallest plan is taken).
  constexpr int kRounds = 8;
  MemoryStrategy within = s;
  for (int round = 0;; ++round) {
    try {
      TrainingPlan t = PlanTraining(fwd, inputs, within, dev, workers);
      const int64_t over = RuntimeBytes(t.graph) - rest.runtime - (within.budget_bytes - t.plan.arena_bytes);
      if (over <= 0) return t;
      within.budget_bytes = round < kRounds ? std::max<int64_t>(1, within.budget_bytes - over) : 1;
    } catch (const BudgetError& e) {
      within.budget_bytes = e.need_bytes;  // the smallest plan, to count its nodes
      TrainingPlan smallest = PlanTraining(fwd, inputs, within, dev, workers);
      const ProcessBytes need{rest.resident, rest.tensors + smallest.plan.arena_bytes, RuntimeBytes(smallest.graph)};
      // Fewer nodes than the plans the rounds tried can make it fit.
      if (need.total() <= s.limit_bytes) return smallest;
      const std::pair<const char*, int64_t> parts[] = {
          {"the resident process (code, libraries, the data in memory)", need.resident},
          {"the tensors outside the training arena (parameters, gradients, optimizer state, inputs)", rest.tensors},
          {"the smallest training arena", smallest.plan.arena_bytes},
          {"the runtime's allowance", need.runtime}};
      const auto largest = *std::max_element(std::begin(parts), std::end(parts),
                                             [](const auto& a, const auto& b) { return a.second < b.second; });
      // The answer rounded up to whole MiB, kVariation more for the
      // resident set's variation between processes (up to 2 MiB on the
      // models/ configs: the MLP's, and ResNet-50's whose image decoding
      // threads start as its memory is planned).
      constexpr int64_t kVariation = 4;
      constexpr int64_t kMiB = int64_t{1} << 20;
      throw Error(Fmt(cfg.path, ": ", s.Name(), " cannot be met: the smallest limit that fits is ", need.ToString(),
                      " (of which the smallest training arena ", HumanBytes(smallest.plan.arena_bytes),
                      "); the largest part is ", largest.first, ", ", HumanBytes(largest.second),
                      "; use --memory-limit ", (need.total() + kMiB - 1) / kMiB + kVariation,
                      "MiB or more, or a smaller batch"));
    }
  }
}
}  // namespace

void RequireLoss(const ConfigFile& cfg, const Graph& fwd) {
  for (const Node& n : fwd.nodes())
    if (n.op && n.op->is_loss()) return;
  FRUGAL_REQUIRE(false, cfg.path, ": the net has no loss op to train (end it with one, e.g. node { op: ",
                 "\"softmax_cross_entropy\" input: \"<the last node>\" input: \"", cfg.net.data().label_name(),
                 "\" })");
}

DataShapes DataShapesOf(const ConfigFile& cfg) {
  const config::Data& data = cfg.net.data();
  FRUGAL_REQUIRE(data.sample_shape_size() > 0, cfg.path,
                 ": data.sample_shape is not set (e.g. sample_shape: [1, 28, 28])");
  FRUGAL_REQUIRE(data.batch_size() > 0, cfg.path, ": data.batch_size must be positive, got ", data.batch_size());
  for (const auto* dims : {&data.sample_shape(), &data.label_shape()})
    for (int64_t d : *dims)
      FRUGAL_REQUIRE(d > 0, cfg.path, ": data.", dims == &data.sample_shape() ? "sample_shape" : "label_shape",
                     " has a dimension of ", d, "; every dimension must be positive");
  int64_t elements = data.batch_size();
  for (int64_t d : data.sample_shape()) {
    const bool overflow = __builtin_mul_overflow(elements, d, &elements);
    FRUGAL_REQUIRE(!overflow && elements < (int64_t{1} << 57), cfg.path, ": a batch of ", data.batch_size(),
                   " samples of data.sample_shape ",
                   Shape(std::vector<int64_t>(data.sample_shape().begin(), data.sample_shape().end())),
                   " is more than 2^57 values; check the shape and the batch size");
  }
  DataShapes s;
  s.batch = data.batch_size();
  std::vector<int64_t> dims{s.batch};
  dims.insert(dims.end(), data.sample_shape().begin(), data.sample_shape().end());
  s.data = Shape(dims);
  std::vector<int64_t> label_dims{s.batch};
  label_dims.insert(label_dims.end(), data.label_shape().begin(), data.label_shape().end());
  s.label = Shape(label_dims);
  return s;
}

std::string ProcessBytes::ToString() const {
  return Fmt(HumanBytes(total()), " = resident ", HumanBytes(resident), " (code, libraries, data) + tensors ",
             HumanBytes(tensors), " + runtime ", HumanBytes(runtime));
}

Model BuildModel(const ConfigFile& cfg, const MemoryStrategy& given, Device dev, OptimizerShard shard) {
  const int64_t resident = ProcessResidentBytes();
  std::string note;
  ProcessBytes rest;
  MemoryStrategy strategy = ResolveAutoBudget(cfg, WithCosts(cfg, given), dev, &note, shard);
  strategy = ResolveLimit(cfg, strategy, dev, resident, &rest, &note, shard);
  if (!note.empty()) LOG(INFO) << note;
  Model m;
  m.shard = shard;
  const DataShapes shapes = DataShapesOf(cfg);
  m.batch = shapes.batch;
  m.data_shape = shapes.data;
  m.label_shape = shapes.label;
  const config::Data& data = cfg.net.data();

  Graph fwd = BuildGraph(cfg);
  RequireLoss(cfg, fwd);
  std::vector<std::pair<std::string, Shape>> inputs;
  for (const Node& n : fwd.nodes()) {
    if (n.var != VarKind::kInput) continue;
    inputs.push_back({n.name, n.name == data.label_name() ? m.label_shape : m.data_shape});
  }
  m.eval = std::move(fwd);
  InferShapes(&m.eval, inputs);
  const auto workers = [&](const Graph& train) { return CpuWorkersFor(cfg.net.solver(), train); };
  TrainingPlan t = PlanWithin(cfg, m.eval, inputs, strategy, dev, rest, workers);
  m.train = std::move(t.graph);
  m.train_plan = std::move(t.plan);
  for (int i = 0; i < m.train.num_forward(); ++i) {
    if (m.train.node(i).var == VarKind::kParam) m.params.push_back(i);
    if (m.train.node(i).var == VarKind::kAux) m.aux.push_back(i);
  }
  if (dev.type == DeviceType::kCPU) ChooseLayouts(&m.eval);
  // Evaluation keeps nothing for a backward pass: sharing alone is enough.
  m.eval_plan = PlanMemory(m.eval, strategy.shares() ? MemoryStrategy::kShare : strategy);
  BuildUpdateGraphs(cfg.net.solver(), cfg.path, &m);
  m.process = {resident, PlannedFootprint(m), RuntimeBytes(m.train)};
  return m;
}

const Slice* Model::OwnSlice(const std::string& name) const {
  for (const Slice& s : slices.at(name))
    if (s.owner == shard.rank) return &s;
  return nullptr;
}

int64_t PlannedFootprint(const Model& m) {
  const MemoryPlan& t = m.train_plan;
  return t.arena_bytes + m.eval_plan.arena_bytes + m.update_plan.arena_bytes + m.accumulate_plan.arena_bytes +
         t.param_bytes + t.param_grad_bytes + m.update_plan.state_bytes + m.accumulate_plan.state_bytes +
         t.input_bytes + m.eval_plan.input_bytes;
}

std::string ModelPlanJson(const Model& m, const MemoryStrategy& s, int ranks) {
  std::string json = PlanToJson(m.train_plan, m.batch);
  json.pop_back();
  // The optimizer's state (and the iter_size sums) live beside the
  // parameters, outside the arena: the update graphs' kState variables.
  json += Fmt(",\"optimizer\":\"", m.optimizer, "\",\"optimizer_state_bytes\":", m.update_plan.state_bytes,
              ",\"grad_sum_bytes\":", m.accumulate_plan.state_bytes,
              ",\"update_arena_bytes\":", m.update_plan.arena_bytes + m.accumulate_plan.arena_bytes,
              ",\"tensor_bytes\":", PlannedFootprint(m), ",\"ranks\":", ranks, ",\"shard\":\"",
              m.shard.ranks > 1 ? "optimizer" : "", "\"");
  if (s.limit())  // the process as planned, the data counted
    json += Fmt(",\"process\":{\"resident_bytes\":", m.process.resident, ",\"tensor_bytes\":", m.process.tensors,
                ",\"runtime_bytes\":", m.process.runtime, ",\"total_bytes\":", m.process.total(),
                ",\"limit_bytes\":", s.limit_bytes, "}");
  return json + "}";
}

BatchFit FitBatch(const std::function<ConfigFile(int64_t batch)>& config_at, int64_t start, const MemoryStrategy& s,
                  int64_t bytes, int64_t resident) {
  const auto t0 = std::chrono::steady_clock::now();
  BatchFit fit;
  std::map<int64_t, ProcessBytes> process;  // per batch planned; tensors -1: planning failed
  auto fits = [&](int64_t b) {
    auto [it, fresh] = process.emplace(b, ProcessBytes{resident, -1, 0});
    if (fresh) {
      ++fit.plans;
      try {
        it->second = BuildModel(config_at(b), s).process;
        it->second.resident = resident;
      } catch (const Error&) {
        // Too large to plan (a tensor over kMaxTensorBytes, say): does not
        // fit. A config that fails at every batch fails at batch 1 below.
        if (b == 1) throw;
      }
    }
    return it->second.tensors >= 0 && it->second.total() <= bytes;
  };
  constexpr int64_t kMaxBatch = int64_t{1} << 30;  // --batch's range
  int64_t lo = 0, hi = 0;                          // the largest known to fit, the smallest known not to
  const int64_t b = std::clamp<int64_t>(start, 1, kMaxBatch);
  if (fits(b)) {
    for (lo = b; lo < kMaxBatch && fits(std::min(2 * lo, kMaxBatch));) lo = std::min(2 * lo, kMaxBatch);
    hi = lo < kMaxBatch ? std::min(2 * lo, kMaxBatch) : kMaxBatch + 1;
  } else {
    for (hi = b; hi > 1 && !fits(hi / 2);) hi /= 2;
    lo = hi > 1 ? hi / 2 : 0;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  fit.batch = lo;
  fit.process = process.at(std::max<int64_t>(lo, 1));  // batch 1 was planned when none fits
  fit.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return fit;
}

int64_t RuntimeBytes(const Graph& train) {
  constexpr int64_t kProcess = int64_t{40} << 20, kPerNode = 2560;
  return kProcess + kPerNode * train.num_nodes();
}

MemoryStrategy ResolveLimit(const ConfigFile& cfg, const MemoryStrategy& s, Device dev, int64_t resident,
                            ProcessBytes* rest, std::string* note, OptimizerShard shard) {
  if (!s.limit()) return s;
  FRUGAL_REQUIRE(dev.type == DeviceType::kCPU, cfg.path, ": ", s.Name(),
                 " bounds the process's resident memory, which holds the arena on the CPU only; on ", dev.ToString(),
                 " use --memory budget=auto (what the device has free) or budget=SIZE");
  const Model share = BuildModel(cfg, MemoryStrategy::kShare, dev, shard);
  *rest = {resident, PlannedFootprint(share) - share.train_plan.arena_bytes, RuntimeBytes(share.train)};
  MemoryStrategy resolved = s;
  // A limit the rest of the process already fills leaves the arena one
  // byte: the planner then says what the smallest arena is (PlanWithin).
  resolved.budget_bytes = std::max<int64_t>(1, s.limit_bytes - rest->total());
  *note = Fmt(s.Name(), ": ", HumanBytes(resolved.budget_bytes),
              " for the training arena; the rest of the process: ", rest->ToString(),
              " (tensors: parameters, gradients, optimizer state, inputs, the other arenas)");
  return resolved;
}

MemoryStrategy ConfigStrategy(const ConfigFile& cfg) {
  return WithCosts(cfg, ParseMemoryStrategy(cfg.net.memory().strategy()));
}

MemoryStrategy ResolveAutoBudget(const ConfigFile& cfg, const MemoryStrategy& s, Device dev, std::string* note,
                                 OptimizerShard shard) {
  if (!s.auto_budget()) return s;
  const int64_t free = AvailableBytes(dev);
  const int64_t margin = std::max<int64_t>(free / 10, int64_t{256} << 20);
  const Model share = BuildModel(cfg, MemoryStrategy::kShare, {}, shard);
  const int64_t outside = PlannedFootprint(share) - share.train_plan.arena_bytes;
  const int64_t budget = free - margin - outside;
  FRUGAL_REQUIRE(budget > 0, cfg.path, ": --memory budget=auto: ", dev.ToString(), " has ", HumanBytes(free),
                 " available; less a margin of ", HumanBytes(margin), " and ", HumanBytes(outside),
                 " for parameters, gradients, optimizer state, inputs and the evaluation arena, nothing is left for "
                 "the training arena; use a smaller batch or free memory");
  *note = Fmt("budget=auto: ", HumanBytes(budget), " for the training arena (", dev.ToString(), " has ",
              HumanBytes(free), " available, less a margin of ", HumanBytes(margin), " and ", HumanBytes(outside),
              " for parameters, gradients, optimizer state, inputs and the evaluation arena)");
  MemoryStrategy resolved(MemoryStrategy::kBudget, budget);
  resolved.costs = s.costs;
  return resolved;
}

std::string GraphTotals(const Graph& g) {
  int64_t ops = 0, params = 0;
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    ops += !n.is_variable();
    if (n.var == VarKind::kParam) params += g.shape({i, 0}).Size();
  }
  return Fmt(ops, " ops, ", params, " parameter values");
}

std::string GraphSummary(const Graph& g) {
  std::ostringstream os;
  os << std::left << std::setw(32) << "node" << std::setw(24) << "op" << std::setw(20) << "output shape"
     << "inputs\n";
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.var == VarKind::kParam || n.var == VarKind::kAux) continue;
    std::string ins;
    for (const Entry& e : n.inputs) ins += (ins.empty() ? "" : ", ") + g.node(e.node).Label();
    os << std::setw(32) << n.Label() << std::setw(24) << (n.op ? n.op->name() : "(input)") << std::setw(20)
       << g.shape({i, 0}).ToString() << ins << "\n";
  }
  os << GraphTotals(g);
  return os.str();
}

std::string PlanSummary(const MemoryPlan& p, int64_t batch) {
  std::string recompute = p.num_recomputed == 0
                              ? ""
                              : Fmt(", ", p.num_recomputed, " nodes recomputed (+",
                                    static_cast<int>(std::lround(100 * p.extra_flops_ratio())), "% FLOPs)");
  return Fmt("memory plan (", p.strategy.Name(), ", batch ", batch, "): arena ", HumanBytes(p.arena_bytes),
             " (lower bound ", HumanBytes(p.lower_bound_bytes), ", without sharing ", HumanBytes(p.no_sharing_bytes),
             "), parameters ", HumanBytes(p.param_bytes), ", gradients ", HumanBytes(p.param_grad_bytes), ", inputs ",
             HumanBytes(p.input_bytes), recompute);
}

}  // namespace frugal
