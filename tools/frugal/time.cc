// frugal time: per-op forward and backward time and whole-step time of a
// config's training graph on synthetic data (Caffe's `caffe time`).
//   frugal time --config tools/bench/conv3x3.prototxt [--iters 20] [--warmup 3]
// The data input is treated as a parameter, so every layer also computes
// the gradient of its input, as it would inside a deeper net. A step is one
// forward and backward pass (no optimizer update).
// With --gpus N the graph runs on that GPU: the step time and the device
// memory (planned arena, allocated, peak) are printed; per-op times are not
// (kernels run asynchronously on the GPU's stream). The step time is the
// median of --iters steps timed one by one, printed with the fastest and
// slowest.
// Per-op times are each op's fastest of the --iters profiled steps.
// --save-costs FILE writes the per-op times as a cost table (CostTable,
// frugal/passes/costs.h) for the planner, with the time a cold byte of the
// arena costs, fitted on the same ops run under a second plan; with a cost
// table given (--costs), the plan's predicted step time is printed beside
// the measured one.
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/parallel.h"
#include "ops/cpu/kernel_names.h"
#include "ops/cpu/vec.h"
#include "backend/device.h"
#include "cli.h"
#include "frugal/executor.h"
#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/schedule.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "frugal/train.h"

DEFINE_int32(iters, 20, "time: timed iterations (after the warm-up)");
DEFINE_int32(warmup, 3, "time: untimed iterations first");
DEFINE_bool(data_grad, false, "time: compute the gradient of the data input too (training does not: off by default)");
DEFINE_int64(token_data, 0,
             "time: data are whole numbers in [0, N) (token ids) instead of [-1, 1); 0: the smallest bound of the "
             "graph's index inputs (an embedding's input_dim) where it has one");
DEFINE_string(save_costs, "",
              "time: write the measured per-op times as a cost table FILE (for --costs: plans priced in time); "
              "runs the ops again under a second plan to fit the time a cold byte costs");

namespace frugal::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Timed {
  Graph g;
  MemoryPlan plan;
  std::map<std::string, Tensor> vars, grads;
};

// The training graph of cfg for dev with synthetic inputs: data uniform in
// [-1, 1], or token ids (--token-data, or where an embedding reads them),
// labels 0 (a class index for any number of classes).
void Build(const ConfigFile& cfg, Device dev, Timed* t) {
  const config::Data& dc = cfg.net.data();
  FRUGAL_REQUIRE(dc.sample_shape_size() > 0, cfg.path, ": data.sample_shape is not set");
  const int64_t batch = dc.batch_size();
  std::vector<int64_t> dims{batch};
  dims.insert(dims.end(), dc.sample_shape().begin(), dc.sample_shape().end());
  std::vector<int64_t> label_dims{batch};
  label_dims.insert(label_dims.end(), dc.label_shape().begin(), dc.label_shape().end());
  Graph fwd = BuildGraph(cfg);
  RequireLoss(cfg, fwd);
  std::vector<std::pair<std::string, Shape>> inputs;
  for (int i = 0; i < fwd.num_nodes(); ++i) {
    Node& n = fwd.mutable_node(i);
    if (n.var != VarKind::kInput) continue;
    const bool is_label = n.name == dc.label_name();
    inputs.push_back({n.name, is_label ? Shape(label_dims) : Shape(dims)});
    if (!is_label && FLAGS_data_grad) n.var = VarKind::kParam;
  }
  InferShapes(&fwd, inputs);
  const auto workers = [&](const Graph& train) { return CpuWorkersFor(cfg.net.solver(), train); };
  TrainingPlan plan = PlanTraining(fwd, inputs, ConfigStrategy(cfg), dev, workers);
  t->g = std::move(plan.graph);
  t->plan = std::move(plan.plan);
  const Graph& g = t->g;
  // A graph with an op that reads indices (an embedding) reads token ids:
  // random floats are not rows of it.
  int64_t tokens = FLAGS_token_data;
  for (int i = 0; i < g.num_forward() && FLAGS_token_data == 0; ++i) {
    const Node& n = g.node(i);
    const int64_t bound = n.is_variable() ? 0 : n.op->IndexBound(n.params);
    if (bound > 0) tokens = tokens == 0 ? bound : std::min(tokens, bound);
  }
  if (tokens > 0 && FLAGS_token_data == 0)
    std::printf("data: token ids in [0, %lld) (what the graph's index inputs take; --token-data N sets N)\n",
                static_cast<long long>(tokens));
  Rng rng(cfg.net.solver().seed());
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (!n.is_variable()) continue;
    Tensor v = Tensor::Empty(g.shape({i, 0}));
    if (n.var == VarKind::kInput && n.name == dc.label_name()) {
      v.Fill(0.f);
    } else if (n.init.empty()) {
      for (int64_t k = 0; k < v.size(); ++k) {
        v.f()[k] = tokens > 0 ? static_cast<float>(rng.Next() % tokens) : static_cast<float>(2 * rng.Uniform() - 1);
      }
    } else {
      InitParam(n.init, n.name, &v, &rng);
    }
    t->vars[n.name] = v;
    if (g.grad_of[i].valid()) t->grads[n.name] = Tensor::Empty(v.shape());
  }
}

// Moves the bound tensors to dev (inputs and parameters copied, gradients fresh).
void ToDevice(Timed* t, Device dev) {
  for (auto& [name, v] : t->vars) {
    Tensor d = Tensor::Empty(v.shape(), v.dtype(), dev, MemKind::kParam);
    d.CopyFrom(v);
    v = d;
  }
  for (auto& [name, g] : t->grads) g = Tensor::Empty(g.shape(), g.dtype(), dev, MemKind::kParam);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Whole steps timed one by one: the median stands for the step (a step
// slowed by another process on a shared machine moves an average, not the
// median); the fastest and slowest show the spread.
struct StepTimes {
  std::vector<double> ms;  // sorted
  double median() const { return ms[ms.size() / 2]; }
  std::string Describe() const {
    char s[128];
    std::snprintf(s, sizeof s, "median of %zu after %d warm-up; fastest %.3f ms, slowest %.3f ms", ms.size(),
                  FLAGS_warmup, ms.front(), ms.back());
    return s;
  }
};

StepTimes TimeSteps(Executor& exec, uint64_t seed) {
  StepTimes t;
  for (int i = 0; i < FLAGS_iters; ++i) {
    const auto t0 = Clock::now();
    exec.Run(true, FLAGS_warmup + i, seed);
    t.ms.push_back(Ms(Clock::now() - t0));
  }
  std::sort(t.ms.begin(), t.ms.end());
  return t;
}

// An executor of t's plan on `engine`, after --warmup steps.
std::unique_ptr<Executor> WarmExecutor(Timed* t, Device dev, Engine* engine, uint64_t seed) {
  Bindings b{t->vars, t->grads};
  b.device = dev;
  auto exec = std::make_unique<Executor>(t->g, t->plan, b, engine);
  for (int i = 0; i < FLAGS_warmup; ++i) exec->Run(true, i, seed);
  return exec;
}

// Each op's fastest time (ms) over --iters profiled steps: like the step's
// fastest, the time least slowed by other processes (a mean takes in every
// stall); with `kernels`, the library kernels each node ran.
std::vector<double> FastestOpMs(Executor& exec, int num_nodes, int64_t first_step, uint64_t seed,
                                std::vector<std::string>* kernels = nullptr) {
  std::vector<double> ms(num_nodes, std::numeric_limits<double>::infinity());
  for (int it = 0; it < FLAGS_iters; ++it) {
    exec.SetProfiling(true);  // from 0
    exec.Run(true, first_step + it, seed);
    for (int i = 0; i < num_nodes; ++i) ms[i] = std::min(ms[i], exec.node_seconds()[i] * 1e3);
  }
  if (kernels) *kernels = exec.node_kernels();
  exec.SetProfiling(false);
  return ms;
}

// The time a cold byte of the arena costs over a cached one (ms): the ops
// of t, timed (op_ms) with their cold bytes (ColdBytes: cold), run again
// under a second plan whose bytes lie elsewhere (sqrt, or share where t's
// plan recomputes; named in *second); the least-squares slope of the
// change in an op's time against the change in its cold bytes, over the
// ops both run (by name; recomputations apart), at least 0.
double FitMsPerColdByte(const ConfigFile& cfg, Device dev, const Timed& t, const std::vector<double>& op_ms,
                        const std::vector<double>& cold, int64_t cache, std::string* second) {
  ConfigFile other_cfg = cfg;
  *second = t.plan.strategy.recomputes() ? "share" : "sqrt";
  other_cfg.net.mutable_memory()->set_strategy(*second);
  Timed other;
  Build(other_cfg, dev, &other);
  std::unique_ptr<Engine> engine = MakeEngineFor(other_cfg.net.solver(), other.g);
  const uint64_t seed = cfg.net.solver().seed();
  const std::unique_ptr<Executor> exec = WarmExecutor(&other, dev, engine.get(), seed);
  const std::vector<double> other_ms = FastestOpMs(*exec, other.g.num_nodes(), FLAGS_warmup, seed);
  const std::vector<double> other_cold = ColdBytes(other.g, other.plan, cache);
  std::map<std::string, int> by_name;
  for (int i = 0; i < other.g.num_nodes(); ++i)
    if (!other.g.node(i).is_variable() && other.g.node(i).mirror_of < 0) by_name[other.g.node(i).name] = i;
  double time_by_cold = 0, cold_squared = 0;
  for (int i = 0; i < t.g.num_nodes(); ++i) {
    const Node& n = t.g.node(i);
    auto it = by_name.find(n.name);
    if (n.is_variable() || n.mirror_of >= 0 || it == by_name.end()) continue;
    const double d_cold = other_cold[it->second] - cold[i];
    time_by_cold += (other_ms[it->second] - op_ms[i]) * d_cold;
    cold_squared += d_cold * d_cold;
  }
  return cold_squared > 0 ? std::max(0.0, time_by_cold / cold_squared) : 0;
}

// The GPU summary: step time, and device memory beside the plan.
int ReportGpu(const ConfigFile& cfg, const Timed& t, Device dev, const StepTimes& steps, int64_t arena_allocated) {
  const MemoryAccounting& acc = MemoryAccounting::Get();
  const int batch = cfg.net.data().batch_size();
  std::printf("step on %s (forward + backward, batch %d): %.3f ms, %.1f samples/s (%s)\n", dev.ToString().c_str(),
              batch, steps.median(), batch * 1e3 / steps.median(), steps.Describe().c_str());
  std::printf(
      "device memory (%s): arena planned %s, allocated %s; parameters, inputs and gradients %s; "
      "peak of frugal's allocations %s; pool holds %s; device in use %s (with the CUDA context and "
      "cuDNN/cuBLAS); %d nodes recomputed (+%.1f%% FLOPs)\n",
      t.plan.strategy.Name().c_str(), HumanBytes(t.plan.arena_bytes).c_str(), HumanBytes(arena_allocated).c_str(),
      HumanBytes(acc.Current(dev, MemKind::kParam)).c_str(), HumanBytes(acc.Peak(dev)).c_str(),
      HumanBytes(backend::PoolReservedBytes(dev.id)).c_str(), HumanBytes(backend::DeviceUsedBytes(dev.id)).c_str(),
      t.plan.num_recomputed, 100 * t.plan.extra_flops_ratio());
  return 0;
}

}  // namespace

int Time() {
  ConfigFile cfg = LoadConfigFromFlags();
  const Device dev = DeviceFromFlags();
  Timed t;
  Build(cfg, dev, &t);
  if (dev.type == DeviceType::kCUDA) ToDevice(&t, dev);
  std::unique_ptr<Engine> engine = MakeEngineFor(cfg.net.solver(), t.g);
  const char* omp_wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("engine: %s (graph parallelism %.2f); kernels: %s; dtype: %s; OMP_WAIT_POLICY=%s\n",
              engine->Describe().c_str(), GraphParallelism(t.g), cpu::Vec().isa, cfg.net.dtype().c_str(),
              omp_wait ? omp_wait : "(unset)");
  const uint64_t seed = cfg.net.solver().seed();
  std::unique_ptr<Executor> exec = WarmExecutor(&t, dev, engine.get(), seed);

  // Whole steps, without per-op timing.
  const StepTimes steps = TimeSteps(*exec, seed);
  const double step_ms = steps.median();

  const int64_t arena_allocated = MemoryAccounting::Get().Current(dev, MemKind::kArena);
  if (dev.type == DeviceType::kCUDA) return ReportGpu(cfg, t, dev, steps, arena_allocated);

  // Per-op times (and for --save-costs the arena bytes each op finds
  // cold). Backward nodes and recomputations count for the forward node they
  // differentiate or recompute.
  const Graph& g = t.g;
  std::vector<std::string> node_kernels;
  const std::vector<double> op_ms = FastestOpMs(*exec, g.num_nodes(), FLAGS_warmup + FLAGS_iters, seed, &node_kernels);
  exec.reset();  // its arena freed before a second plan's (--save-costs) takes one
  const bool save = !FLAGS_save_costs.empty();
  const int64_t cache = cpu::LastLevelCacheBytes();
  const std::vector<double> cold = save ? ColdBytes(g, t.plan, cache) : std::vector<double>(g.num_nodes(), 0);
  std::vector<double> fwd(g.num_nodes(), 0), bwd(g.num_nodes(), 0), rec(g.num_nodes(), 0);
  std::vector<double> fwd_cold(g.num_nodes(), 0), bwd_cold(g.num_nodes(), 0);
  std::vector<double> fwd_flops(g.num_nodes(), 0), bwd_flops(g.num_nodes(), 0);  // the backward's with recomputation
  std::vector<std::string> kernels(g.num_nodes());  // of a forward node, its gradient nodes and mirrors
  double other = 0, other_cold = 0, all_flops = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const double ms = op_ms[i];
    const Node& n = g.node(i);
    const int of = i < g.num_forward() ? i : n.fwd >= 0 ? n.fwd : n.mirror_of;
    if (of >= 0) {  // each name once, as the kernels noted them
      const cpu::KernelNames names(&kernels[of]);
      std::istringstream words(node_kernels[i]);
      for (std::string w; words >> w;) cpu::NoteKernel(w.c_str());
    }
    const double flops = NodeFlops(g, i);
    all_flops += flops;
    if (i < g.num_forward()) {
      fwd[i] += ms;
      fwd_cold[i] += cold[i];
      fwd_flops[i] += flops;
    } else if (n.fwd >= 0) {
      bwd[n.fwd] += ms;
      bwd_cold[n.fwd] += cold[i];
      bwd_flops[n.fwd] += flops;
    } else if (n.mirror_of >= 0) {
      rec[n.mirror_of] += ms;
      bwd_flops[n.mirror_of] += flops;
    } else {
      other += ms;  // gradient sums (add_n)
      other_cold += cold[i];
    }
  }
  // GFLOP/s: the op's FLOPs (NodeFlops: its forward's; its gradient nodes'
  // and mirrors' for backward) over its time; blank where it counts none.
  auto gflops = [](double flops, double ms) {
    char s[16] = "";
    if (flops > 0 && ms > 0) std::snprintf(s, sizeof s, "%.1f", flops / ms * 1e-6);
    return std::string(s);
  };
  std::printf("%-20s %-24s %-20s %12s %12s %10s %10s  %s\n", "node", "op", "output", "forward ms", "backward ms",
              "fwd GF/s", "bwd GF/s", "kernels");
  double sum_f = 0, sum_b = 0, flops = 0;
  std::vector<std::string> reference;  // nodes that ran a reference kernel
  CostTable costs;
  for (int i = 0; i < g.num_forward(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    std::istringstream names(kernels[i]);
    bool slow = false;
    for (std::string k; !slow && names >> k;) slow = cpu::IsReference(k);
    if (slow) reference.push_back(n.name);
    std::printf("%-20s %-24s %-20s %12.3f %12.3f %10s %10s  %s%s\n", n.name.c_str(), n.op->name().c_str(),
                g.shape({i, 0}).ToString().c_str(), fwd[i], bwd[i] + rec[i], gflops(fwd_flops[i], fwd[i]).c_str(),
                gflops(bwd_flops[i], bwd[i] + rec[i]).c_str(), kernels[i].empty() ? "-" : kernels[i].c_str(),
                slow ? "  (REFERENCE)" : "");
    sum_f += fwd[i];
    sum_b += bwd[i] + rec[i];
    flops += fwd_flops[i];
    costs.Add(CostTable::Key(g, i), fwd[i], bwd[i], fwd_cold[i], bwd_cold[i]);
  }
  if (other > 0) std::printf("%-20s %-24s %-20s %12s %12.3f\n", "(gradient sums)", "add_n", "", "", other);
  std::printf("sum of ops: forward %.3f ms, backward %.3f ms (recomputation included)\n", sum_f, sum_b + other);
  std::printf(
      "GF/s: an op's FLOPs as it counts them over its time; a gradient op counts all it can compute, also an "
      "output no node reads (the first layer's data gradient)\n");
  std::printf(
      "kernels: the library kernels each op ran (oneDNN's implementation, dnnl_sgemm, frugal's vec:ISA; - for "
      "frugal's plain loops); %zu op%s ran a reference (scalar) implementation%s%s\n",
      reference.size(), reference.size() == 1 ? "" : "s", reference.empty() ? "" : ": ",
      [&] {
        std::string s;
        for (const std::string& r : reference) s += (s.empty() ? "" : ", ") + r;
        return s;
      }()
          .c_str());
  const int cores = cpu::NumCores();
  const double peak = cpu::PeakGflops(cores);  // measured after the timed steps, so as not to disturb them
  std::printf("step (forward + backward, batch %d): %.3f ms, %.1f samples/s (%s); %.1f GFLOP/s (%.3f GFLOP a step)\n",
              cfg.net.data().batch_size(), step_ms, cfg.net.data().batch_size() * 1e3 / step_ms,
              steps.Describe().c_str(), all_flops / step_ms * 1e-6, all_flops * 1e-9);
  std::printf("arithmetic peak measured here: %.1f GFLOP/s on %d threads (%s multiply-adds); the step %.0f%% of it\n",
              peak, cores, cpu::Vec().isa, 100 * all_flops / step_ms * 1e-6 / peak);
  // Predictions are in the units of the fastest step (the table's
  // wall_per_schedule_ms is), which other processes and a hypervisor's stolen
  // time slow the least.
  if (t.plan.priced()) {
    const double predicted = t.plan.step_ms, fastest = steps.ms.front();
    std::printf(
        "predicted by the cost table %s: step %.3f ms (recomputation %.3f ms), measured %.3f ms fastest "
        "(%+.1f%%)\n",
        cfg.net.memory().costs().c_str(), predicted, t.plan.extra_ms, fastest, 100 * (predicted - fastest) / fastest);
  }
  std::printf(
      "memory (%s): arena planned %s, allocated %s; %d nodes recomputed (+%.1f%% FLOPs); process peak %s; "
      "data gradient %s\n",
      t.plan.strategy.Name().c_str(), HumanBytes(t.plan.arena_bytes).c_str(), HumanBytes(arena_allocated).c_str(),
      t.plan.num_recomputed, 100 * t.plan.extra_flops_ratio(), HumanBytes(ProcessPeakBytes()).c_str(),
      FLAGS_data_grad ? "on" : "off");
  if (save) {
    double bwd_only = 0;
    for (int i = 0; i < g.num_forward(); ++i) bwd_only += bwd[i];
    costs.ms_per_flop = flops > 0 ? sum_f / flops : 0;
    costs.backward_ratio = sum_f > 0 ? bwd_only / sum_f : 2;
    costs.sums_ms = other;
    costs.sums_cold = other_cold;
    costs.cache_bytes = cache;
    std::string second;
    costs.ms_per_cold_byte = FitMsPerColdByte(cfg, dev, t, op_ms, cold, cache, &second);
    std::printf("locality: %.2f ps per cold byte of the arena (cache %s), fitted on the ops run under %s too\n",
                costs.ms_per_cold_byte * 1e9, HumanBytes(cache).c_str(), second.c_str());
    costs.workers = cfg.net.solver().engine() == "threaded"
                        ? ChooseEngineSplit(cfg.net.solver(), g, cpu::NumCores()).cpu_workers
                        : 1;
    costs.wall_per_schedule_ms = steps.ms.front() / ScheduledStepMs(g, t.plan, costs.NodeMs(g, &t.plan), costs.workers);
    costs.Save(FLAGS_save_costs);
    std::printf("cost table: %s (%zu entries from %d op nodes)\n", FLAGS_save_costs.c_str(), costs.costs().size(),
                static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().begin() + g.num_forward(),
                                               [](const Node& n) { return !n.is_variable(); })));
  }
  return 0;
}

}  // namespace frugal::cli
