// The fit loop: bind the model, then per epoch push training batches (load,
// forward, backward, SGD per parameter, metrics) to the engine with a
// progress line every `display` batches, then evaluate on the validation
// data. See Train in frugal/train.h for how the pushes overlap.
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <exception>
#include <map>

#include "frugal/io.h"
#include "frugal/train.h"

namespace frugal {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

Dataset LoadSource(const config::DataSource& src, const std::string& what, const std::string& path) {
  FRUGAL_REQUIRE(src.has_idx(), path, ": data.", what, " has no source (write idx { images: ... labels: ... })");
  return LoadIdxDataset(src.idx().images(), src.idx().labels());
}

// Peak resident memory of this process (VmHWM), in bytes.
int64_t ProcessPeakBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "VmHWM:") { in >> kb; return kb * 1024; }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// Everything bound for one run: parameters, their gradients and momenta,
// input tensors, the executors, and the engine variables that order every
// access to them.
struct Session {
  Model model;
  std::unique_ptr<Engine> owned_engine;
  Engine* engine = nullptr;
  std::map<std::string, Tensor> params, grads, moms, aux;
  std::map<std::string, Var> param_vars, grad_vars, mom_vars;
  std::map<std::string, std::string> update_names;  // "sgd_update(fc1_weight)": names of pushed updates
  Tensor data, label;
  Var data_var = -1, label_var = -1;
  Var metrics_var = -1;  // the Metrics being filled by pushed functions
  std::unique_ptr<Executor> train, eval;
  std::vector<Var> vars;  // every engine variable made here

  Session(const ConfigFile& cfg, MemoryStrategy strategy, Engine* given) : model(BuildModel(cfg, strategy)) {
    const config::Solver& sc = cfg.net.solver();
    EngineOptions eo;
    eo.cpu_workers = sc.engine_workers();
    eo.kernel_threads = sc.engine_kernel_threads();
    if (!given) owned_engine = MakeEngine(sc.engine(), eo);
    engine = given ? given : owned_engine.get();
    Rng rng(sc.seed());
    Bindings b;
    for (int id : model.params) {
      const Node& n = model.train.node(id);
      Tensor w = Tensor::Empty(model.train.shape({id, 0}), DType::kFloat32, {}, MemKind::kParam);
      InitParam(n.init, n.name, &w, &rng);
      params[n.name] = b.vars[n.name] = w;
      param_vars[n.name] = b.var_vars[n.name] = NewVar();
      if (!model.train.grad_of[id].valid()) {
        LOG(WARNING) << "parameter " << n.name << " gets no gradient and will not be trained";
        continue;
      }
      grads[n.name] = b.grads[n.name] = Tensor::Empty(w.shape(), DType::kFloat32, {}, MemKind::kParam);
      grad_vars[n.name] = b.grad_vars[n.name] = NewVar();
      moms[n.name] = Tensor::Empty(w.shape(), DType::kFloat32, {}, MemKind::kParam);
      mom_vars[n.name] = NewVar();
      update_names[n.name] = "sgd_update(" + n.name + ")";
    }
    for (int id : model.aux) {
      const Node& n = model.train.node(id);
      Tensor a = Tensor::Empty(model.train.shape({id, 0}), DType::kFloat32, {}, MemKind::kParam);
      InitParam(n.init, n.name, &a, &rng);
      aux[n.name] = b.vars[n.name] = a;
      b.var_vars[n.name] = NewVar();
    }
    const config::Data& dc = cfg.net.data();
    data = b.vars[dc.data_name()] = Tensor::Empty(model.data_shape, DType::kFloat32, {}, MemKind::kInput);
    label = b.vars[dc.label_name()] = Tensor::Empty(model.label_shape, DType::kFloat32, {}, MemKind::kInput);
    data_var = b.var_vars[dc.data_name()] = NewVar();
    label_var = b.var_vars[dc.label_name()] = NewVar();
    metrics_var = NewVar();
    train = std::make_unique<Executor>(model.train, model.train_plan, b, engine);
    eval = std::make_unique<Executor>(model.eval, model.eval_plan, b, engine);
  }

  ~Session() {
    train.reset();  // the executors wait for the engine
    eval.reset();
    for (Var v : vars) engine->DeleteVar(v);
  }

  Var NewVar() {
    vars.push_back(engine->NewVar());
    return vars.back();
  }

  // On the I/O thread: the next batch of `it` into data and label, and its
  // number of real rows into *num_valid (read by the metrics of that batch).
  // With begin_epoch >= 0, starts that epoch first.
  void PushLoad(BatchIter* it, int64_t begin_epoch, int64_t* num_valid) {
    PushOptions o;
    o.kind = FnKind::kIO;
    o.name = "load_batch";
    engine->Push(
        [this, it, begin_epoch, num_valid] {
          if (begin_epoch >= 0) it->BeginEpoch(begin_epoch);
          CHECK(it->Next(data.f(), label.f(), num_valid)) << "a batch was loaded past the end of the epoch";
        },
        {}, {data_var, label_var}, o);
  }

  // One update per parameter, each waiting only for its own gradient.
  void PushUpdates(const SgdOptions& sgd) {
    for (const auto& [name, g] : grads) {
      PushOptions o;
      o.name = update_names[name].c_str();
      Tensor w = params[name], m = moms[name], gt = g;
      engine->Push([sgd, w, gt, m]() mutable { SgdUpdate(sgd, &w, gt, &m); }, {grad_vars[name]},
                   {param_vars[name], mom_vars[name]}, o);
    }
  }

  // Adds the batch's predictions (output 0 of exec) to every metric in ms.
  void PushMetrics(const Executor& exec, std::vector<Metrics*> ms, const int64_t* num_valid,
                   int64_t* samples = nullptr) {
    PushOptions o;
    o.name = "metrics";
    Tensor prob = exec.output(0), y = label;
    engine->Push(
        [ms, prob, y, num_valid, samples] {
          for (Metrics* m : ms) m->Update(prob, y, *num_valid);
          if (samples) *samples += *num_valid;
        },
        {exec.output_var(0), label_var}, {metrics_var}, o);
  }
};

// Waits for the engine when the scope is left by an exception, so that no
// pushed function outlives the locals it points to.
class DrainOnUnwind {
 public:
  explicit DrainOnUnwind(Engine* e) : engine_(e), exceptions_(std::uncaught_exceptions()) {}
  ~DrainOnUnwind() {
    if (std::uncaught_exceptions() > exceptions_) WaitAllNoThrow(engine_);
  }

 private:
  Engine* engine_;
  int exceptions_;
};

void CheckSampleShape(const Dataset& ds, const Model& m, const std::string& path) {
  Shape want(std::vector<int64_t>(m.data_shape.dims().begin() + 1, m.data_shape.dims().end()));
  FRUGAL_REQUIRE(ds.sample_shape == want, path, ": data.sample_shape is ", want, " but the data has samples of ",
                 ds.sample_shape);
}

Metrics Evaluate(Session* s, const Dataset& ds, int64_t batch) {
  BatchIter it(ds, batch, /*shuffle=*/false, 0);
  Metrics m;
  int64_t valid = 0;
  DrainOnUnwind drain(s->engine);
  for (int64_t b = 0; b < it.batches_per_epoch(); ++b) {
    s->PushLoad(&it, -1, &valid);
    s->eval->Push(/*is_train=*/false, 0, 0);
    s->PushMetrics(*s->eval, {&m}, &valid);
  }
  s->engine->WaitAll();
  return m;
}

}  // namespace

double Train(const ConfigFile& cfg, const TrainOptions& opts) {
  const config::Solver& sc = cfg.net.solver();
  const config::Data& dc = cfg.net.data();
  MemoryStrategy strategy = ParseMemoryStrategy(cfg.net.memory().strategy());
  Session s(cfg, strategy, opts.engine);
  LOG(INFO) << "config " << cfg.path << ", engine " << s.engine->Describe() << ", device cpu(0), memory strategy "
            << MemoryStrategyName(strategy);
  LOG(INFO) << "graph:\n" << GraphSummary(s.model.eval);
  LOG(INFO) << PlanSummary(s.model.train_plan, s.model.batch);

  Dataset train_set = LoadSource(dc.train(), "train", cfg.path);
  CheckSampleShape(train_set, s.model, cfg.path);
  Dataset val_set;
  if (dc.has_val()) {
    val_set = LoadSource(dc.val(), "val", cfg.path);
    CheckSampleShape(val_set, s.model, cfg.path);
  }
  LOG(INFO) << "data: " << train_set.num_samples << " training samples, " << val_set.num_samples
            << " validation samples, batch " << s.model.batch;

  const SgdOptions sgd{sc.lr(), sc.momentum(), sc.weight_decay()};
  BatchIter it(train_set, s.model.batch, dc.shuffle(), sc.seed());
  std::ofstream json;
  if (!opts.log_json.empty()) {
    json.open(opts.log_json);
    FRUGAL_REQUIRE(json, opts.log_json, ": cannot write the JSON log");
  }
  const int display = std::max(1, sc.display());
  int64_t iter = 0;
  double last_acc = 0;
  bool done = false;
  // Filled by pushed functions: valid under data/label, the rest under s.metrics_var.
  Metrics epoch_m, window_m;
  int64_t valid = 0, window_samples = 0;
  DrainOnUnwind drain(s.engine);
  for (int epoch = 0; epoch < sc.epochs() && !done; ++epoch) {
    auto t_epoch = Clock::now(), t_window = Clock::now();
    epoch_m.Reset();
    window_m.Reset();
    window_samples = 0;
    int64_t batch_no = 0, logged = 0;
    // The metrics of batches [0, batch_no) are in; prints the window if it is full.
    auto log_window = [&] {
      if (batch_no == logged || batch_no % display != 0) return;
      LOG(INFO) << Fmt("Epoch[", epoch, "] Batch [", batch_no - display, "-", batch_no, "]  Speed: ") << std::fixed
                << std::setprecision(2) << window_samples / Seconds(t_window) << " samples/sec  "
                << window_m.ToString();
      window_m.Reset();
      window_samples = 0;
      t_window = Clock::now();
      logged = batch_no;
    };
    const int64_t batches = it.batches_per_epoch();
    s.PushLoad(&it, epoch, &valid);
    for (int64_t b = 0; b < batches; ++b) {
      s.train->Push(/*is_train=*/true, iter, sc.seed());
      s.PushUpdates(sgd);
      // Batch b-1's metrics: the loop stays at most one batch ahead.
      s.engine->WaitForVar(s.metrics_var);
      log_window();
      s.PushMetrics(*s.train, {&epoch_m, &window_m}, &valid, &window_samples);
      ++batch_no;
      ++iter;
      if (sc.max_iters() > 0 && iter >= sc.max_iters()) { done = true; break; }
      if (b + 1 < batches) s.PushLoad(&it, -1, &valid);
    }
    s.engine->WaitAll();
    log_window();
    double secs = Seconds(t_epoch);
    double speed = epoch_m.count() / secs;
    LOG(INFO) << "Epoch[" << epoch << "] " << epoch_m.ToString("Train-");
    LOG(INFO) << "Epoch[" << epoch << "] Time cost=" << std::setprecision(3) << secs;
    last_acc = epoch_m.accuracy();
    Metrics val_m;
    if (val_set.num_samples > 0) {
      val_m = Evaluate(&s, val_set, s.model.batch);
      LOG(INFO) << "Epoch[" << epoch << "] " << val_m.ToString("Validation-");
      last_acc = val_m.accuracy();
    }
    if (json.is_open()) {
      json << "{\"epoch\":" << epoch << ",\"iterations\":" << iter << ",\"train_accuracy\":" << epoch_m.accuracy()
           << ",\"train_cross_entropy\":" << epoch_m.cross_entropy();
      if (val_m.count() > 0)
        json << ",\"val_accuracy\":" << val_m.accuracy() << ",\"val_cross_entropy\":" << val_m.cross_entropy();
      json << ",\"samples_per_s\":" << speed << ",\"time_s\":" << secs
           << ",\"arena_bytes\":" << s.train->arena_bytes() + s.eval->arena_bytes()
           << ",\"peak_bytes\":" << MemoryAccounting::Get().Peak(Device{})
           << ",\"process_peak_bytes\":" << ProcessPeakBytes() << "}\n";
      json.flush();
    }
  }
  const int64_t planned = s.model.train_plan.arena_bytes + s.model.eval_plan.arena_bytes;
  const int64_t measured = MemoryAccounting::Get().Current(Device{}, MemKind::kArena);
  LOG(INFO) << "memory: arenas allocated " << HumanBytes(measured) << " (planned " << HumanBytes(planned)
            << ": train " << HumanBytes(s.model.train_plan.arena_bytes) << " + eval "
            << HumanBytes(s.model.eval_plan.arena_bytes) << "), peak of all tensors "
            << HumanBytes(MemoryAccounting::Get().Peak(Device{})) << ", process peak "
            << HumanBytes(ProcessPeakBytes());
  if (opts.final_params) {
    for (const auto& [name, w] : s.params) (*opts.final_params)[name].assign(w.f(), w.f() + w.size());
  }
  return last_acc;
}

}  // namespace frugal
