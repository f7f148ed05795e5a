#include "passes/optimum.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "frugal/config.h"
#include "frugal/passes/recompute.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "frugal/rng.h"

namespace frugal {
namespace test {
namespace {

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

KeepLevels DropLevels(const Graph& fwd, const std::vector<int>& candidates, uint64_t mask) {
  KeepLevels keep(fwd.num_nodes(), 0);
  for (size_t k = 0; k < candidates.size(); ++k)
    if (mask >> k & 1) keep[candidates[k]] = kDropped;
  return keep;
}

DropSetSearch OptimalDrops(const GapCase& c, int64_t budget, int64_t max_builds) {
  const std::vector<int> cand = DropCandidates(c.fwd);
  CHECK_LE(cand.size(), kExactCandidates) << c.name << ": more drop candidates than a mask holds";
  DropSetSearch r = CheapestFittingDrops(c.fwd, c.inputs, MemoryStrategy::kShare, {}, ApplyAnnotations(c.fwd, {}), cand,
                                         ShareReads(c), budget, INFINITY, max_builds - 1, max_builds);
  ++r.builds;  // share's
  if (r.plan) {
    CHECK_LE(std::abs(r.plan->plan.recompute_cost() - r.cost), 1e-9 * r.cost)
        << c.name << ": each dropped node is recomputed once";
  }
  return r;
}

double GapRow::gap() const {
  if (planner_cost == optimum.cost) return 0;
  return optimum.cost > 0 ? (planner_cost - optimum.cost) / optimum.cost : INFINITY;
}

GapRow MeasurePlanner(const GapCase& c, int64_t budget) {
  GapRow r;
  r.name = c.name;
  for (const Node& n : c.fwd.nodes()) r.nodes += !n.is_variable();
  r.candidates = static_cast<int>(DropCandidates(c.fwd).size());
  r.budget = budget;
  auto t0 = std::chrono::steady_clock::now();
  try {
    const TrainingPlan t = PlanTraining(c.fwd, c.inputs, {MemoryStrategy::kBudget, budget});
    r.planner_fits = true;
    r.planner_cost = t.plan.recompute_cost();
    r.planner_keep = t.keep;
  } catch (const Error&) { r.planner_fits = false; }
  r.planner_ms = Ms(t0);
  return r;
}

GapRow MeasureGap(const GapCase& c, int64_t budget, int64_t max_builds, int64_t max_programs) {
  GapRow r = MeasurePlanner(c, budget);
  const auto t0 = std::chrono::steady_clock::now();
  r.optimum = OptimalDrops(c, budget, max_builds);
  if (!r.optimum.exact && max_programs > 0) {
    DropSetSearch ilp = IlpOptimalDrops(c, budget, max_programs);
    r.programs = ilp.subsets;
    ilp.builds += r.optimum.builds;
    ilp.placed += r.optimum.placed;
    if (ilp.exact || ilp.cost > r.optimum.cost) r.optimum = std::move(ilp);
  }
  r.optimum_ms = Ms(t0);
  return r;
}

std::vector<int64_t> GapBudgets(const GapCase& c) {
  auto arena = [&](MemoryStrategy::Kind k) { return PlanTraining(c.fwd, c.inputs, k).plan.arena_bytes; };
  const int64_t share = arena(MemoryStrategy::kShare);
  const int64_t floor =
      std::min({share, arena(MemoryStrategy::kDropCheap), arena(MemoryStrategy::kSqrt), arena(MemoryStrategy::kLogn)});
  std::vector<int64_t> out;
  for (int q : {3, 2, 1}) out.push_back(floor + (share - floor) * q / 4);
  return out;
}

namespace {

std::string Fc(const std::string& name, const std::string& in, int hidden) {
  return "node { name: \"" + name + "\" op: \"fully_connected\" input: \"" + in +
         "\" attr { key: \"num_hidden\" value: \"" + std::to_string(hidden) + "\" } }\n";
}

std::string Unary(const std::string& name, const std::string& op, const std::string& in) {
  return "node { name: \"" + name + "\" op: \"" + op + "\" input: \"" + in + "\" }\n";
}

std::string Tanh(const std::string& name, const std::string& in) {
  return "node { name: \"" + name + "\" op: \"activation\" input: \"" + in +
         "\" attr { key: \"act_type\" value: \"tanh\" } }\n";
}

std::string Concat(const std::string& name, const std::vector<std::string>& in) {
  std::string text = "node { name: \"" + name + "\" op: \"concat\"";
  for (const std::string& x : in) text += " input: \"" + x + "\"";
  return text + " attr { key: \"num_args\" value: \"" + std::to_string(in.size()) + "\" } }\n";
}

// The classifier after `in`, the data and the solver.
std::string Head(const std::string& in) {
  return Fc("out", in, 10) + "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"out\" input: \"label\" }\n" +
         "data { batch_size: 32 sample_shape: [64] }\n";
}

GapCase FromConfig(const std::string& name, const ConfigFile& cfg) {
  GapCase c{name, BuildGraph(cfg), {}};
  const config::Data& data = cfg.net.data();
  std::vector<int64_t> dims{data.batch_size()};
  dims.insert(dims.end(), data.sample_shape().begin(), data.sample_shape().end());
  const Shape label(std::vector<int64_t>{data.batch_size()});
  for (const Node& n : c.fwd.nodes())
    if (n.var == VarKind::kInput) c.inputs.push_back({n.name, n.name == data.label_name() ? label : Shape(dims)});
  InferShapes(&c.fwd, c.inputs);
  return c;
}

int Width(Rng& rng) { return 16 * (1 + static_cast<int>(rng.Uniform() * 16)); }

// n nodes: fully_connected layers of random widths (16-256) and
// activations, then the classifier.
GapCase RandomChain(int n, uint64_t seed) {
  Rng rng(seed);
  std::string text = "version: 1\n", prev = "data";
  for (int i = 0; i + 2 < n; ++i) {
    const std::string name = "n" + std::to_string(i);
    const double u = rng.Uniform();
    text += u < 0.5 ? Fc(name, prev, Width(rng)) : u < 0.8 ? Unary(name, "relu", prev) : Tanh(name, prev);
    prev = name;
  }
  return FromConfig("chain" + std::to_string(n), ParseConfig(text + Head(prev), "chain", {}));
}

// n nodes: each body node reads one or two of the six before it
// (fully_connected, relu, concat), the ones nobody reads joined by a concat,
// then the classifier.
GapCase RandomDag(int n, uint64_t seed) {
  Rng rng(seed);
  std::string text = "version: 1\n" + Fc("n0", "data", Width(rng));
  std::vector<bool> read(n, false);
  auto pick = [&](int i) { return i - 1 - static_cast<int>(rng.Uniform() * std::min(i, 6)); };
  for (int i = 1; i + 3 < n; ++i) {
    const std::string name = "n" + std::to_string(i);
    const int a = pick(i), b = pick(i);
    const double u = rng.Uniform();
    read[a] = true;
    if (u < 0.3 && a != b) {
      read[b] = true;
      text += Concat(name, {"n" + std::to_string(a), "n" + std::to_string(b)});
    } else {
      text += u < 0.7 ? Fc(name, "n" + std::to_string(a), Width(rng)) : Unary(name, "relu", "n" + std::to_string(a));
    }
  }
  std::vector<std::string> last;
  for (int i = 0; i + 3 < n; ++i)
    if (!read[i]) last.push_back("n" + std::to_string(i));
  text += last.size() > 1 ? Concat("join", last) : Unary("join", "relu", last[0]);
  return FromConfig("dag" + std::to_string(n), ParseConfig(text + Head("join"), "dag", {}));
}

std::string Conv(const std::string& name, const std::string& in, int filters, int kernel) {
  const std::string k = std::to_string(kernel), p = std::to_string(kernel / 2);
  return "node { name: \"" + name + "\" op: \"convolution\" input: \"" + in + "\" attr { key: \"kernel\" value: \"(" +
         k + "," + k + ")\" } attr { key: \"pad\" value: \"(" + p + "," + p +
         ")\" } attr { key: \"num_filter\" value: \"" + std::to_string(filters) +
         "\" } attr { key: \"no_bias\" value: \"true\" } }\n";
}

std::string BnRelu(const std::string& name, const std::string& in) {
  return Unary(name + "_bn", "batch_norm", in) + Unary(name, "relu", name + "_bn");
}

// Global average pooling and the classifier, on 16x16 images of 16 channels.
std::string ImageHead(const std::string& in) {
  return "node { name: \"gap\" op: \"pooling\" input: \"" + in +
         "\" attr { key: \"pool_type\" value: \"avg\" } attr { key: \"global_pool\" value: \"true\" } }\n" +
         Unary("flat", "flatten", "gap") + Fc("out", "flat", 10) +
         "node { name: \"prob\" op: \"softmax_cross_entropy\" input: \"out\" input: \"label\" }\n" +
         "data { batch_size: 32 sample_shape: [16, 16, 16] }\n";
}

// A DenseNet-BC block of four layers (BN-ReLU-conv1x1(48), BN-ReLU-conv3x3(12),
// each reading the concatenation of all before it).
GapCase DenseBlock() {
  std::string text = "version: 1\n", prev = "data";
  for (int l = 0; l < 4; ++l) {
    const std::string p = "l" + std::to_string(l);
    text += BnRelu(p + "a", prev) + Conv(p + "c1", p + "a", 48, 1) + BnRelu(p + "b", p + "c1") +
            Conv(p + "c2", p + "b", 12, 3) + Concat(p, {prev, p + "c2"});
    prev = p;
  }
  return FromConfig("densenet_block", ParseConfig(text + ImageHead(prev), "dense", {}));
}

// An Inception-v1-style module: a stem, four branches (1x1; 1x1-3x3;
// 1x1-5x5; 3x3 max pool-1x1) concatenated.
GapCase Inception() {
  std::string text = "version: 1\n" + Conv("stem", "data", 32, 3) + BnRelu("stem_r", "stem");
  text += Conv("b1", "stem_r", 16, 1) + BnRelu("b1r", "b1");
  text += Conv("b2a", "stem_r", 16, 1) + BnRelu("b2ar", "b2a") + Conv("b2", "b2ar", 24, 3) + BnRelu("b2r", "b2");
  text += Conv("b3a", "stem_r", 8, 1) + BnRelu("b3ar", "b3a") + Conv("b3", "b3ar", 8, 5) + BnRelu("b3r", "b3");
  text +=
      "node { name: \"b4p\" op: \"pooling\" input: \"stem_r\" attr { key: \"pool_type\" value: \"max\" } "
      "attr { key: \"kernel\" value: \"(3,3)\" } attr { key: \"pad\" value: \"(1,1)\" } }\n";
  text += Conv("b4", "b4p", 8, 1) + BnRelu("b4r", "b4") + Concat("cat", {"b1r", "b2r", "b3r", "b4r"});
  return FromConfig("inception", ParseConfig(text + ImageHead("cat"), "inception", {}));
}

GapCase ModelCase(const std::string& name, const std::string& path, const std::vector<std::string>& defines) {
  return FromConfig(name, LoadConfig(std::string(FRUGAL_SOURCE_DIR) + "/" + path, defines));
}

}  // namespace

std::vector<GapCase> RandomGapCases(uint64_t first_seed, uint64_t last_seed) {
  std::vector<GapCase> out;
  for (bool dag : {false, true})
    for (int n : {20, 30, 40})
      for (uint64_t seed = first_seed; seed <= last_seed; ++seed) {
        out.push_back(dag ? RandomDag(n, seed) : RandomChain(n, seed));
        out.back().name += "/" + std::to_string(seed);
      }
  return out;
}

GapCase RandomGapCase(const std::string& name) {
  const uint64_t seed = std::stoull(name.substr(name.find('/') + 1));
  for (GapCase& c : RandomGapCases(seed, seed))
    if (c.name == name) return std::move(c);
  LOG(FATAL) << "no random case " << name;
}

BackwardReads ShareReads(const GapCase& c) {
  const KeepLevels base = ApplyAnnotations(c.fwd, {});
  return BackwardReadsOf(c.fwd, BuildTrainingPlan(c.fwd, c.inputs, MemoryStrategy::kShare, base, {}, true));
}

std::vector<GapCase> GapSuite(bool small) {
  std::vector<GapCase> out;
  out.push_back(RandomChain(10, 1));
  out.push_back(RandomDag(10, 3));
  out.push_back(ModelCase("lenet", "models/lenet/fashion_mnist.prototxt", {"batch=32"}));
  out.push_back(Inception());
  if (small) return out;
  for (int n : {20, 30, 40}) out.push_back(RandomChain(n, n));
  for (int n : {20, 30, 40}) out.push_back(RandomDag(n, n + 1));
  out.push_back(DenseBlock());
  out.push_back(ModelCase("resnet20", "models/resnet/resnet_cifar.prototxt", {"depth=20", "batch=32"}));
  return out;
}

std::string GapTableHeader() {
  return "| case | nodes | candidates | budget | optimal MFLOP | planner MFLOP | gap | planner ms | optimum ms "
         "| builds | placed | programs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
}

namespace {

// FLOPs in millions, three decimals.
std::string Mflop(double flops) { return Fmt(std::round(flops / 1e3) / 1e3); }

}  // namespace

std::string GapTableLine(const GapRow& r) {
  const DropSetSearch& o = r.optimum;
  std::string opt = !o.exact ? ">= " + Mflop(o.cost) : o.plan ? Mflop(o.cost) : std::string("none fits");
  std::string planner = r.planner_fits ? Mflop(r.planner_cost) : std::string("none fits");
  const bool comparable = r.planner_fits && (o.plan || !o.exact);
  std::string gap = comparable ? Fmt(o.exact ? "" : "<= ", std::round(r.gap() * 1000) / 10, "%") : std::string("-");
  return Fmt("| ", r.name, " | ", r.nodes, " | ", r.candidates, " | ", HumanBytes(r.budget), " | ", opt, " | ", planner,
             " | ", gap, " | ", std::llround(r.planner_ms), " | ", std::llround(r.optimum_ms), " | ", o.builds, " | ",
             o.placed, " | ", r.programs, " |");
}

std::string Dropped(const Graph& fwd, const KeepLevels& keep) {
  std::string out;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i] != 0)
      out += (out.empty() ? "" : " ") + fwd.node(static_cast<int>(i)).name +
             (keep[i] == kDropped ? "" : Fmt("@", keep[i]));
  return out;
}

}  // namespace test
}  // namespace frugal
