#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "frugal/op.h"
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
}  // namespace

void RequireLoss(const ConfigFile& cfg, const Graph& fwd) {
  for (const Node& n : fwd.nodes())
    if (n.op && n.op->is_loss()) return;
  FRUGAL_REQUIRE(false, cfg.path, ": the net has no loss op to train (end it with one, e.g. node { op: ",
                 "\"softmax_cross_entropy\" input: \"<the last node>\" input: \"", cfg.net.data().label_name(),
                 "\" })");
}

Model BuildModel(const ConfigFile& cfg, const MemoryStrategy& given, Device dev) {
  std::string note;
  const MemoryStrategy strategy = ResolveAutoBudget(cfg, WithCosts(cfg, given), dev, &note);
  if (!note.empty()) LOG(INFO) << note;
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
  Model m;
  m.batch = data.batch_size();
  std::vector<int64_t> dims{m.batch};
  dims.insert(dims.end(), data.sample_shape().begin(), data.sample_shape().end());
  m.data_shape = Shape(dims);
  std::vector<int64_t> label_dims{m.batch};
  label_dims.insert(label_dims.end(), data.label_shape().begin(), data.label_shape().end());
  m.label_shape = Shape(label_dims);

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
  TrainingPlan t = PlanTraining(m.eval, inputs, strategy, dev, workers);
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
  return m;
}

int64_t PlannedFootprint(const Model& m) {
  const MemoryPlan& t = m.train_plan;
  return t.arena_bytes + m.eval_plan.arena_bytes + m.update_plan.arena_bytes + m.accumulate_plan.arena_bytes +
         t.param_bytes + t.param_grad_bytes + m.update_plan.state_bytes + m.accumulate_plan.state_bytes + t.input_bytes;
}

BatchFit FitBatch(const std::function<ConfigFile(int64_t batch)>& config_at, int64_t start, const MemoryStrategy& s,
                  int64_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  BatchFit fit;
  std::map<int64_t, int64_t> footprint;  // per batch planned; -1: planning failed
  auto fits = [&](int64_t b) {
    auto [it, fresh] = footprint.emplace(b, -1);
    if (fresh) {
      ++fit.plans;
      try {
        it->second = PlannedFootprint(BuildModel(config_at(b), s));
      } catch (const Error&) {
        // Too large to plan (a tensor over kMaxTensorBytes, say): does not
        // fit. A config that fails at every batch fails at batch 1 below.
        if (b == 1) throw;
      }
    }
    return it->second >= 0 && it->second <= bytes;
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
  fit.footprint = footprint.at(std::max<int64_t>(lo, 1));  // batch 1 was planned when none fits
  fit.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return fit;
}

MemoryStrategy ConfigStrategy(const ConfigFile& cfg) {
  return WithCosts(cfg, ParseMemoryStrategy(cfg.net.memory().strategy()));
}

MemoryStrategy ResolveAutoBudget(const ConfigFile& cfg, const MemoryStrategy& s, Device dev, std::string* note) {
  if (!s.auto_budget()) return s;
  const int64_t free = AvailableBytes(dev);
  const int64_t margin = std::max<int64_t>(free / 10, int64_t{256} << 20);
  const Model share = BuildModel(cfg, MemoryStrategy::kShare);
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

std::string GraphSummary(const Graph& g) {
  std::ostringstream os;
  int64_t n_params = 0;
  os << std::left << std::setw(24) << "node" << std::setw(24) << "op" << std::setw(20) << "output shape"
     << "inputs\n";
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.var == VarKind::kParam) n_params += g.shape({i, 0}).Size();
    if (n.var == VarKind::kParam || n.var == VarKind::kAux) continue;
    std::string ins;
    for (const Entry& e : n.inputs) ins += (ins.empty() ? "" : ", ") + g.node(e.node).name;
    os << std::setw(24) << n.name << std::setw(24) << (n.op ? n.op->name() : "(input)") << std::setw(20)
       << g.shape({i, 0}).ToString() << ins << "\n";
  }
  os << g.num_forward() << " nodes, " << n_params << " parameter values";
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
