// The fit loop: bind the model, then per epoch push training batches (load,
// forward, backward, gradient combination, one optimizer update per
// parameter, metrics) to the engine with a progress line every `display`
// batches; validate every val_interval updates or epoch; checkpoint as the
// solver asks. See Train in frugal/train.h for how the pushes overlap.
#include <glog/logging.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <exception>
#include <fstream>
#include <iomanip>
#include <map>
#include <utility>

#include "backend/device.h"
#include "frugal/checkpoint.h"
#include "frugal/io.h"
#include "frugal/progress.h"
#include "frugal/tensorboard.h"
#include "frugal/train.h"

namespace frugal {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Set by SIGINT / SIGTERM; the loop checkpoints and stops after the step.
std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop = true; }

// The iterator of data.train or data.val, reading batches of the model's size.
std::unique_ptr<DataIter> LoadSource(const ConfigFile& cfg, const config::DataSource& src, const std::string& what,
                                     const Model& m, bool shuffle, Shard shard = {}) {
  DataIterOptions o;
  o.shard = shard;
  o.batch_size = m.batch;
  o.shuffle = shuffle;
  o.seed = cfg.net.solver().seed();
  o.sample_shape = Shape(std::vector<int64_t>(m.data_shape.dims().begin() + 1, m.data_shape.dims().end()));
  o.where = cfg.path + ": data." + what;
  std::unique_ptr<DataIter> it = MakeDataIter(src, o);
  Shape want(std::vector<int64_t>(m.data_shape.dims().begin() + 1, m.data_shape.dims().end()));
  FRUGAL_REQUIRE(it->sample_shape() == want, cfg.path, ": data.sample_shape is ", want,
                 " but the data has samples of ", it->sample_shape());
  Shape label(std::vector<int64_t>(m.label_shape.dims().begin() + 1, m.label_shape.dims().end()));
  FRUGAL_REQUIRE(it->label_shape() == label, cfg.path, ": data.label_shape is ", label,
                 " but the data has labels of ", it->label_shape(), " (set data.label_shape)");
  return it;
}

// Everything bound for one run: parameters, gradients (and their sums over
// iter_size batches), optimizer state, input tensors, the executors, and the
// engine variables that order every access to them.
struct Session {
  Model model;
  std::unique_ptr<Engine> owned_engine;
  Engine* engine = nullptr;
  std::unique_ptr<Optimizer> opt;
  Rng rng;
  std::map<std::string, Tensor> params, grads, sums, aux;
  std::map<std::string, OptState> states;
  std::map<std::string, ParamMult> mults;
  std::map<std::string, Var> param_vars, grad_vars;
  std::map<std::string, std::string> update_names;  // "update(fc1_weight)"
  Device dev;  // where the model runs
  Tensor data, label;  // the batch, on dev
  Var data_var = -1, label_var = -1;
  Var metrics_var = -1;  // the metrics being filled by pushed functions
  // On a GPU: the batch is loaded into pinned host tensors (host_var), then
  // copied on the GPU's stream; the metrics read a host copy of the labels
  // and of the batch's number of rows (metric_var, written by that copy) and
  // host copies of the executor's outputs (fetched_var).
  Tensor host_data, host_label, metric_label;
  int64_t metric_valid = 0;
  Var host_var = -1, metric_var = -1;
  struct Fetched {
    std::vector<Tensor> outputs;
    Var var = -1;
  };
  std::map<const Executor*, Fetched> fetched;
  std::unique_ptr<Executor> train, eval;
  std::vector<Var> vars;  // every engine variable made here

  Session(const ConfigFile& cfg, const MemoryStrategy& strategy, Engine* given, Device device)
      : model(BuildModel(cfg, strategy)), rng(cfg.net.solver().seed()), dev(device) {
    const config::Solver& sc = cfg.net.solver();
    if (!given) owned_engine = MakeEngineFor(sc, model.train);
    engine = given ? given : owned_engine.get();
    opt = MakeOptimizer(OptimizerOptionsFromConfig(sc, cfg.path));
    Bindings b;
    for (int id : model.params) {
      const Node& n = model.train.node(id);
      Tensor w = Initialised(n, model.train.shape({id, 0}));
      params[n.name] = b.vars[n.name] = w;
      param_vars[n.name] = b.var_vars[n.name] = NewVar();
      if (!model.train.grad_of[id].valid()) {
        LOG(WARNING) << "parameter " << n.name << " gets no gradient and will not be trained";
        continue;
      }
      grads[n.name] = b.grads[n.name] = Tensor::Empty(w.shape(), DType::kFloat32, dev, MemKind::kParam);
      grad_vars[n.name] = b.grad_vars[n.name] = NewVar();
      if (sc.iter_size() > 1) sums[n.name] = Tensor::Empty(w.shape(), DType::kFloat32, dev, MemKind::kParam);
      states[n.name] = opt->CreateState(w);
      mults[n.name] = {n.lr_mult, n.wd_mult};
      update_names[n.name] = "update(" + n.name + ")";
    }
    for (int id : model.aux) {
      const Node& n = model.train.node(id);
      Tensor a = Initialised(n, model.train.shape({id, 0}));
      aux[n.name] = b.vars[n.name] = a;
      b.var_vars[n.name] = NewVar();
    }
    const config::Data& dc = cfg.net.data();
    data = b.vars[dc.data_name()] = Tensor::Empty(model.data_shape, DType::kFloat32, dev, MemKind::kInput);
    label = b.vars[dc.label_name()] = Tensor::Empty(model.label_shape, DType::kFloat32, dev, MemKind::kInput);
    data_var = b.var_vars[dc.data_name()] = NewVar();
    label_var = b.var_vars[dc.label_name()] = NewVar();
    metrics_var = NewVar();
    b.device = dev;
    train = std::make_unique<Executor>(model.train, model.train_plan, b, engine);
    eval = std::make_unique<Executor>(model.eval, model.eval_plan, b, engine);
    if (on_gpu()) {
      host_data = Pinned(model.data_shape);
      host_label = Pinned(model.label_shape);
      metric_label = Tensor::Empty(model.label_shape);
      host_var = NewVar();
      metric_var = NewVar();
      for (const Executor* e : {train.get(), eval.get()}) {
        Fetched& f = fetched[e];
        for (int k = 0; k < static_cast<int>(e->graph().outputs.size()); ++k)
          f.outputs.push_back(Pinned(e->output(k).shape()));
        f.var = NewVar();
      }
    }
  }

  bool on_gpu() const { return dev.type == DeviceType::kCUDA; }

  // A parameter or aux tensor on dev, initialised on the host from the
  // session's generator (the same values on every device).
  Tensor Initialised(const Node& n, const Shape& shape) {
    Tensor t = Tensor::Empty(shape, DType::kFloat32, {}, MemKind::kParam);
    InitParam(n.init, n.name, &t, &rng);
    if (!on_gpu()) return t;
    Tensor d = Tensor::Empty(shape, DType::kFloat32, dev, MemKind::kParam);
    d.CopyFrom(t);
    return d;
  }

  static Tensor Pinned(const Shape& shape) {
    return Tensor(std::make_shared<Storage>(Device{}, shape.Size() * DTypeBytes(DType::kFloat32), MemKind::kInput,
                                            /*pinned=*/true),
                  0, shape, DType::kFloat32);
  }

  // Host copies of tensors on dev (the tensors themselves on the CPU). The
  // engine must be idle.
  static std::map<std::string, Tensor> OnHost(const std::map<std::string, Tensor>& ts) {
    std::map<std::string, Tensor> host;
    for (const auto& [name, t] : ts) host[name] = t.OnHost();
    return host;
  }

  // Pushes launch(context) to run on dev's stream (backend::LaunchAsync):
  // its variables are released when the GPU has done the work.
  void PushGpu(std::function<void(void*)> launch, const std::vector<Var>& reads, const std::vector<Var>& writes,
               const char* name, int priority = 0) {
    PushOptions o;
    o.device = dev;
    o.name = name;
    o.priority = priority;
    engine->PushAsync([id = dev.id, launch = std::move(launch)](Done done) { backend::LaunchAsync(id, launch, std::move(done)); },
                      reads, writes, o);
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

  std::vector<Var> AllGradVars() const {
    std::vector<Var> v;
    for (const auto& [name, var] : grad_vars) v.push_back(var);
    return v;
  }

  // On the I/O thread: the next batch of `it` into data and label, and its
  // number of real rows into *num_valid (read by the metrics of that batch).
  // With begin_epoch >= 0, starts that epoch first.
  // On a GPU the batch goes to pinned host memory, then to the device on the
  // GPU's stream: decoding the next batch overlaps the current step.
  void PushLoad(DataIter* it, int64_t begin_epoch, int64_t* num_valid) {
    PushOptions o;
    o.kind = FnKind::kIO;
    o.name = "load_batch";
    const std::pair<Tensor, Tensor> xy = LoadTargets();
    engine->Push(
        [it, begin_epoch, num_valid, xy] {
          if (begin_epoch >= 0) it->Reset(begin_epoch);
          CHECK(it->Next(xy.first.f(), xy.second.f(), num_valid)) << "a batch was loaded past the end of the epoch";
        },
        {}, on_gpu() ? std::vector<Var>{host_var} : std::vector<Var>{data_var, label_var}, o);
    if (!on_gpu()) return;
    PushGpu(
        [this, num_valid](void* cuda) {
          metric_label.CopyFrom(host_label);
          metric_valid = *num_valid;
          backend::CopyAsync(cuda, data.raw(), dev, host_data.raw(), Device{}, data.bytes());
          backend::CopyAsync(cuda, label.raw(), dev, host_label.raw(), Device{}, label.bytes());
        },
        {host_var}, {data_var, label_var, metric_var}, "copy_batch_to_gpu");
  }

  // Where the I/O thread writes a batch: the bound inputs on the CPU, the
  // pinned host tensors on a GPU.
  std::pair<Tensor, Tensor> LoadTargets() const {
    return on_gpu() ? std::pair{host_data, host_label} : std::pair{data, label};
  }

  // After batch `micro` of iter_size: adds the gradients to their sums; after
  // the last one, scales them by 1/iter_size and clips their global norm
  // (one function over every gradient, since the norm needs them all).
  void PushCombine(int micro, int iter_size, float clip) {
    const bool last = micro == iter_size - 1;
    if (iter_size == 1 && clip <= 0) return;
    std::vector<Var> gv = AllGradVars();
    if (on_gpu()) {
      PushGpu(
          [this, micro, iter_size, clip, last](void* cuda) {
            std::vector<std::pair<float*, int64_t>> all;
            for (auto& [name, g] : grads) {
              if (iter_size > 1) {
                AccumulateGrad(&sums[name], g, micro == 0, cuda);
                if (last) backend::CopyAsync(cuda, g.raw(), dev, sums[name].raw(), dev, g.bytes());
              }
              all.emplace_back(g.f(), g.size());
            }
            if (last) backend::RescaleAndClipAsync(cuda, all, 1.f / static_cast<float>(iter_size), clip);
          },
          gv, gv, "combine_gradients");
      return;
    }
    PushOptions o;
    o.name = "combine_gradients";
    engine->Push(
        [this, micro, iter_size, clip, last] {
          std::vector<Tensor*> all;
          for (auto& [name, g] : grads) {
            if (iter_size > 1) {
              AccumulateGrad(&sums[name], g, micro == 0);
              if (last) g.CopyFrom(sums[name]);
            }
            all.push_back(&g);
          }
          if (last) RescaleAndClip(all, 1.f / static_cast<float>(iter_size), clip);
        },
        gv, gv, o);
  }

  // One update per parameter, each waiting only for its own gradient.
  void PushUpdates(float lr, int64_t step) {
    for (const auto& [name, g] : grads) {
      PushOptions o;
      o.name = update_names[name].c_str();
      Tensor w = params[name], gt = g;
      OptState* state = &states[name];
      const Optimizer* optimizer = opt.get();
      ParamMult mult = mults[name];
      if (on_gpu()) {
        PushGpu([optimizer, w, gt, state, lr, step, mult](void* cuda) mutable {
          optimizer->Update(&w, gt, state, lr, step, mult, cuda);
        }, {grad_vars[name]}, {param_vars[name]}, o.name);
        continue;
      }
      engine->Push([optimizer, w, gt, state, lr, step, mult]() mutable { optimizer->Update(&w, gt, state, lr, step, mult); },
                   {grad_vars[name]}, {param_vars[name]}, o);
    }
  }

  // Adds the batch's predictions (every graph output of exec, output k
  // against label column k when there are several) to every metric in ms.
  void PushMetrics(const Executor& exec, std::vector<MetricSet*> ms, const int64_t* num_valid,
                   int64_t* samples = nullptr) {
    PushOptions o;
    o.name = "metrics";
    std::vector<Tensor> outputs;
    std::vector<Var> reads{label_var};
    for (int k = 0; k < static_cast<int>(exec.graph().outputs.size()); ++k) {
      outputs.push_back(exec.output(k));
      reads.push_back(exec.output_var(k));
    }
    std::sort(reads.begin(), reads.end());  // outputs may share a block's variable
    reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
    Tensor y = label;
    if (on_gpu()) {  // the outputs to pinned host memory first
      Fetched& f = fetched.at(&exec);
      PushGpu(
          [this, outputs, host = f.outputs](void* cuda) {
            for (size_t k = 0; k < outputs.size(); ++k)
              backend::CopyAsync(cuda, host[k].raw(), Device{}, outputs[k].raw(), dev, outputs[k].bytes());
          },
          reads, {f.var}, "copy_outputs_to_host");
      outputs = f.outputs;
      y = metric_label;
      num_valid = &metric_valid;
      reads = {f.var, metric_var};
    }
    engine->Push(
        [ms, outputs, y, num_valid, samples] {
          for (MetricSet* m : ms) m->Update(outputs, y, *num_valid);
          if (samples) *samples += *num_valid;
        },
        reads, {metrics_var}, o);
  }

  // Everything a checkpoint holds (views, no copies). The engine must be idle.
  CheckpointState State(const ConfigFile& cfg, int64_t epoch, int64_t iteration, int64_t position) const {
    CheckpointState c;
    google::protobuf::TextFormat::PrintToString(cfg.net, &c.config_text);
    c.epoch = epoch;
    c.iteration = iteration;
    c.data_position = position;
    c.rng_state = rng.Save();
    c.optimizer = opt->name();
    c.params = OnHost(params);
    c.aux = OnHost(aux);
    c.opt_state = OnHost(NamedStates(*opt, states));
    return c;
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

MetricSet Evaluate(Session* s, DataIter* it, const std::vector<std::string>& names) {
  MetricSet m(names);
  int64_t valid = 0;
  DrainOnUnwind drain(s->engine);
  for (int64_t b = 0; b < it->batches_per_epoch(); ++b) {
    s->PushLoad(it, b == 0 ? 0 : -1, &valid);
    s->eval->Push(/*is_train=*/false, 0, 0);
    s->PushMetrics(*s->eval, {&m}, &valid);
  }
  s->engine->WaitAll();
  return m;
}

// Restores a checkpoint into the session; returns {epoch, iteration, data position}.
std::array<int64_t, 3> Resume(Session* s, const std::string& where) {
  std::string path = where;
  if (std::ifstream(path + "/.").good() || (!path.empty() && path.back() == '/')) {
    path = CheckpointManager(where, 0, 0).Latest();
    FRUGAL_REQUIRE(!path.empty(), where, ": no checkpoint in this directory to resume from");
  }
  CheckpointState c = LoadCheckpoint(path);
  FRUGAL_REQUIRE(c.optimizer == s->opt->name(), path, ": the checkpoint was written by optimizer ", c.optimizer,
                 " but the config uses ", s->opt->name());
  RestoreTensors(c.params, s->params, "parameters", path);
  RestoreTensors(c.aux, s->aux, "aux state", path);
  RestoreTensors(c.opt_state, NamedStates(*s->opt, s->states), "optimizer state", path);
  s->rng.Load(c.rng_state);
  LOG(INFO) << "resumed from " << path << ": epoch " << c.epoch << ", iteration " << c.iteration << ", batch "
            << c.data_position;
  return {c.epoch, c.iteration, c.data_position};
}

std::string JsonMetrics(const std::string& prefix, const MetricValues& m) {
  std::string out;
  for (const auto& [name, v] : m.values) out += Fmt(",\"", prefix, name, "\":", v);
  return out;
}

}  // namespace

double Train(const ConfigFile& cfg, const TrainOptions& opts) {
  const config::Solver& sc = cfg.net.solver();
  const config::Data& dc = cfg.net.data();
  const MemoryStrategy strategy = ParseMemoryStrategy(cfg.net.memory().strategy());
  const std::vector<std::string> metric_names(sc.metric().begin(), sc.metric().end());
  MetricSet probe(metric_names);  // a bad metric name fails before anything runs
  FRUGAL_REQUIRE(sc.iter_size() >= 1, cfg.path, ": solver.iter_size must be at least 1, got ", sc.iter_size());
  Session s(cfg, strategy, opts.engine, opts.device);
  std::unique_ptr<DataParallel> dp;
  if (opts.dist.comm) dp = std::make_unique<DataParallel>(opts.dist, *s.train, s.grads, s.grad_vars, s.sums);
  Shard shard;
  if (dp) shard = {dp->rank(), dp->size()};
  // Metrics over every rank's rows.
  auto reduce = [&dp](const MetricSet& m) { return dp ? dp->Reduce(m) : LocalValues(m); };
  LOG_IF(INFO, !opts.quiet) << "config " << cfg.path << ", engine " << s.engine->Describe() << ", device " << s.dev.ToString() << ", memory strategy "
            << strategy.Name();
  LOG_IF(INFO, !opts.quiet) << "graph:\n" << GraphSummary(s.model.eval);
  LOG_IF(INFO, !opts.quiet) << PlanSummary(s.model.train_plan, s.model.batch);

  std::unique_ptr<DataIter> train_it = LoadSource(cfg, dc.train(), "train", s.model, dc.shuffle(), shard);
  std::unique_ptr<DataIter> val_it;
  if (dc.has_val()) val_it = LoadSource(cfg, dc.val(), "val", s.model, /*shuffle=*/false, shard);
  LOG_IF(INFO, !opts.quiet) << "data: " << train_it->Describe() << (val_it ? "; validation: " + val_it->Describe() : "")
            << "; batch " << s.model.batch;

  // Every rank steps as often as the smallest shard allows.
  const int64_t batches = dp ? dp->Min(train_it->batches_per_epoch()) : train_it->batches_per_epoch();
  if (dp) LOG_IF(INFO, !opts.quiet) << dp->Describe() << "; global batch " << s.model.batch * dp->size() << ", " << batches << " batches per epoch";
  const int iter_size = sc.iter_size();
  int64_t total_updates = sc.epochs() * batches / iter_size;
  if (sc.max_iters() > 0) total_updates = std::min(total_updates, sc.max_iters() / iter_size);
  const LrSchedule lr = LrScheduleFromConfig(sc, std::max<int64_t>(1, total_updates), cfg.path);
  LOG_IF(INFO, !opts.quiet) << "optimizer " << s.opt->name() << ", learning rate " << lr.ToString() << ", iter_size " << iter_size
            << (sc.clip_gradient() > 0 ? Fmt(", gradient norm clipped at ", sc.clip_gradient()) : "");

  if (!opts.weights.empty()) {
    std::map<std::string, Tensor> model_tensors = s.params;
    model_tensors.insert(s.aux.begin(), s.aux.end());
    LOG_IF(INFO, !opts.quiet) << LoadWeights(opts.weights, model_tensors).ToString(opts.weights);
  }
  int64_t start_epoch = 0, iter = 0, skip = 0;  // iter counts batches
  if (!opts.resume.empty()) {
    auto [e, it, pos] = Resume(&s, opts.resume);
    start_epoch = e;
    iter = it * iter_size;
    skip = pos;
  }
  if (dp) {
    dp->Broadcast(&s.params, "broadcast(parameters)");
    dp->Broadcast(&s.aux, "broadcast(aux state)");
  }
  std::unique_ptr<CheckpointManager> ckpt;
  if (!sc.checkpoint_dir().empty())
    ckpt = std::make_unique<CheckpointManager>(sc.checkpoint_dir(), sc.checkpoint_interval(), sc.keep_checkpoints());
  std::unique_ptr<EventWriter> tb;
  if (!opts.tensorboard.empty()) tb = std::make_unique<EventWriter>(opts.tensorboard);
  TraceWriter trace;
  if (!opts.profile.empty()) s.train->SetTrace(&trace);
  std::ofstream json;
  if (!opts.log_json.empty()) {
    json.open(opts.log_json);
    FRUGAL_REQUIRE(json, opts.log_json, ": cannot write the JSON log");
  }
  g_stop = false;
  auto old_int = std::signal(SIGINT, OnStopSignal);
  auto old_term = std::signal(SIGTERM, OnStopSignal);

  const int display = std::max(1, sc.display());
  ProgressLine progress(opts.progress);
  double last_acc = 0;
  bool done = false;
  // Filled by pushed functions: valid under data/label, the rest under s.metrics_var.
  MetricSet epoch_m(metric_names), window_m(metric_names);
  int64_t valid = 0, window_samples = 0;
  DrainOnUnwind drain(s.engine);
  auto save = [&](int64_t epoch, int64_t position) {
    s.engine->WaitAll();
    progress.Clear();
    std::string path = ckpt->Save(s.State(cfg, epoch, iter / iter_size, position));
    LOG_IF(INFO, !opts.quiet) << "checkpoint " << path;
  };
  // Every rank's BatchNorm statistics come from its own shard: their mean
  // is validated with and checkpointed. Called where every rank gets to.
  auto average_aux = [&] {
    if (!dp || s.aux.empty()) return;
    s.engine->WaitAll();
    dp->AverageAcrossRanks(s.aux);
  };
  // SIGINT / SIGTERM: stop after the step. The ranks of a data-parallel run
  // agree to stop at the same step, checking every kStopCheck updates (a
  // one-number all-reduce), so that none waits in a collective the others
  // never reach.
  constexpr int64_t kStopCheck = 10;
  bool stopped = false;
  auto stop_now = [&] {
    if (!dp) return stopped = g_stop.load();
    if ((iter / iter_size) % kStopCheck != 0 || iter % iter_size != 0) return false;
    return stopped = dp->Sum(g_stop ? 1 : 0) > 0;
  };
  int64_t validated_at = -1;  // the iteration of the last validation
  auto validate = [&](int64_t epoch) {
    validated_at = iter;
    average_aux();
    MetricValues val_m = reduce(Evaluate(&s, val_it.get(), metric_names));
    progress.Clear();
    LOG_IF(INFO, !opts.quiet) << "Epoch[" << epoch << "] " << val_m.ToString("Validation-");
    if (tb)
      for (const auto& [name, v] : val_m.values) tb->AddScalar("val/" + name, v, iter / iter_size);
    if (val_m.Has("accuracy")) last_acc = val_m.Get("accuracy");
    return val_m;
  };
  for (int64_t epoch = start_epoch; epoch < sc.epochs() && !done; ++epoch) {
    auto t_epoch = Clock::now(), t_window = Clock::now();
    epoch_m.Reset();
    window_m.Reset();
    window_samples = 0;
    int64_t batch_no = skip, logged = skip;
    float rate = static_cast<float>(lr.At(iter / iter_size));
    // The metrics of batches [0, batch_no) are in; prints the window if it is full.
    auto log_window = [&] {
      if (batch_no == logged || batch_no % display != 0) return;
      progress.Clear();
      const MetricValues window_v = reduce(window_m);
      const double speed = (dp ? dp->Sum(window_samples) : window_samples) / Seconds(t_window);
      LOG_IF(INFO, !opts.quiet) << Fmt("Epoch[", epoch, "] Batch [", batch_no - display, "-", batch_no, "]  Speed: ") << std::fixed
                << std::setprecision(2) << speed << " samples/sec  " << window_v.ToString() << " lr=" << std::defaultfloat << std::setprecision(6) << rate;
      if (tb) {
        for (const auto& [name, v] : window_v.values) tb->AddScalar("train/" + name, v, iter / iter_size);
        tb->AddScalar("train/lr", rate, iter / iter_size);
        tb->AddScalar("train/samples_per_s", speed, iter / iter_size);
        tb->AddScalar("memory/peak_bytes", static_cast<double>(MemoryAccounting::Get().Peak(s.dev)), iter / iter_size);
        tb->Flush();
      }
      if (json.is_open())
        json << "{\"epoch\":" << epoch << ",\"batch\":" << batch_no << ",\"iterations\":" << iter / iter_size
             << JsonMetrics("train_", window_v) << ",\"lr\":" << rate << ",\"samples_per_s\":" << speed << "}\n";
      window_m.Reset();
      window_samples = 0;
      t_window = Clock::now();
      logged = batch_no;
    };
    // The live line: the epoch's metrics so far, its speed, and the time left at that speed.
    const int64_t first_batch = skip;
    auto show_progress = [&] {
      if (batch_no == first_batch) return;
      const double secs_per_batch = Seconds(t_epoch) / static_cast<double>(batch_no - first_batch);
      int64_t left = (batches - batch_no) + (sc.epochs() - epoch - 1) * batches;
      if (sc.max_iters() > 0) left = std::min(left, sc.max_iters() - iter);
      progress.Show({epoch, sc.epochs(), batch_no, batches, epoch_m.count() / Seconds(t_epoch), epoch_m.ToString(),
                     rate, static_cast<double>(left) * secs_per_batch});
    };
    // Resuming inside an epoch: the batches already used are read and dropped.
    train_it->Reset(epoch);
    const auto [skip_x, skip_y] = s.LoadTargets();
    for (int64_t b = 0; b < skip; ++b) train_it->Next(skip_x.f(), skip_y.f(), &valid);
    if (batch_no < batches) s.PushLoad(train_it.get(), -1, &valid);
    for (int64_t b = skip; b < batches; ++b) {
      const int micro = static_cast<int>(iter % iter_size);
      if (!opts.profile.empty() && iter / iter_size == opts.profile_steps) s.train->SetTrace(nullptr);
      // Data-parallel with iter_size > 1: the earlier micro-batches' sum is
      // averaged during the last one's forward, its gradients during its
      // backward; the micro-batches before it exchange nothing.
      const bool last_micro = micro == iter_size - 1;
      if (dp && last_micro && iter_size > 1) dp->PushAllReduce(s.engine, /*of_sums=*/true);
      s.train->Push(/*is_train=*/true, iter, sc.seed());
      if (dp && last_micro) dp->PushAllReduce(s.engine);
      s.PushCombine(micro, iter_size, sc.clip_gradient());
      if (micro == iter_size - 1) {
        rate = static_cast<float>(lr.At(iter / iter_size));
        s.PushUpdates(rate, iter / iter_size + 1);
      }
      // Batch b-1's metrics: the loop stays at most one batch ahead.
      s.engine->WaitForVar(s.metrics_var);
      log_window();
      show_progress();
      s.PushMetrics(*s.train, {&epoch_m, &window_m}, &valid, &window_samples);
      ++batch_no;
      ++iter;
      const bool updated = iter % iter_size == 0;
      if (updated && dp && dp->CheckDue(iter / iter_size)) {
        s.engine->WaitAll();
        dp->CheckConsistency(s.OnHost(s.params), iter / iter_size);
      }
      if (sc.max_iters() > 0 && iter >= sc.max_iters()) { done = true; break; }
      if (stop_now()) break;
      // Validation loads its batches into the same input tensors: the next
      // training batch is loaded after it.
      if (updated && val_it && sc.val_interval() > 0 && (iter / iter_size) % sc.val_interval() == 0) {
        s.engine->WaitAll();
        const MetricValues val_m = validate(epoch);
        if (json.is_open()) {
          json << "{\"epoch\":" << epoch << ",\"iterations\":" << iter / iter_size << JsonMetrics("val_", val_m) << "}\n";
          json.flush();
        }
      }
      if (updated && sc.checkpoint_interval() > 0 && (iter / iter_size) % sc.checkpoint_interval() == 0) {
        average_aux();
        if (ckpt) save(b + 1 < batches ? epoch : epoch + 1, b + 1 < batches ? b + 1 : 0);
      }
      if (b + 1 < batches) s.PushLoad(train_it.get(), -1, &valid);
    }
    skip = 0;
    s.engine->WaitAll();
    progress.Clear();
    log_window();
    if (stopped) {
      LOG_IF(WARNING, !opts.quiet) << "stopped by a signal after " << iter / iter_size << " updates";
      if (ckpt) save(batch_no < batches ? epoch : epoch + 1, batch_no < batches ? batch_no : 0);
      else LOG_IF(WARNING, !opts.quiet) << "no checkpoint written (set solver.checkpoint_dir or --checkpoint-dir)";
      break;
    }
    const double secs = Seconds(t_epoch);
    const MetricValues epoch_v = reduce(epoch_m);
    const double speed = epoch_v.count / secs;
    LOG_IF(INFO, !opts.quiet) << "Epoch[" << epoch << "] " << epoch_v.ToString("Train-");
    LOG_IF(INFO, !opts.quiet) << "Epoch[" << epoch << "] Time cost=" << std::setprecision(3) << secs;
    if (epoch_v.Has("accuracy")) last_acc = epoch_v.Get("accuracy");
    MetricValues val_m;
    // Every epoch, or at the end of a run whose last update fell between
    // val_interval validations.
    const bool last_epoch = done || epoch + 1 == sc.epochs();
    if (val_it && (sc.val_interval() == 0 || (last_epoch && validated_at != iter))) val_m = validate(epoch);
    if (json.is_open()) {
      json << "{\"epoch\":" << epoch << ",\"iterations\":" << iter / iter_size << JsonMetrics("train_", epoch_v);
      if (val_m.count > 0) json << JsonMetrics("val_", val_m);
      json << ",\"samples_per_s\":" << speed << ",\"time_s\":" << secs
           << ",\"arena_bytes\":" << s.train->arena_bytes() + s.eval->arena_bytes()
           << ",\"peak_bytes\":" << MemoryAccounting::Get().Peak(s.dev)
           << ",\"process_peak_bytes\":" << ProcessPeakBytes() << "}\n";
      json.flush();
    }
    if (sc.checkpoint_interval() == 0) average_aux();  // the epoch's checkpoint (rank 0's)
    if (ckpt && ckpt->Due(iter / iter_size, true)) {
      // A run stopped by max_iters inside the epoch resumes at its next batch.
      if (batch_no < batches) save(epoch, batch_no);
      else save(epoch + 1, 0);
    }
  }
  s.engine->WaitAll();
  if (dp) LOG_IF(INFO, !opts.quiet) << dp->comm()->Stats();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (!opts.profile.empty()) {
    trace.Write(opts.profile);
    LOG_IF(INFO, !opts.quiet) << "trace of the first " << opts.profile_steps << " steps in " << opts.profile;
  }
  const int64_t planned = s.model.train_plan.arena_bytes + s.model.eval_plan.arena_bytes;
  const int64_t measured = MemoryAccounting::Get().Current(s.dev, MemKind::kArena);
  LOG_IF(INFO, !opts.quiet) << "memory: arenas allocated " << HumanBytes(measured) << " (planned " << HumanBytes(planned)
            << ": train " << HumanBytes(s.model.train_plan.arena_bytes) << " + eval "
            << HumanBytes(s.model.eval_plan.arena_bytes) << "), peak of all tensors "
            << HumanBytes(MemoryAccounting::Get().Peak(s.dev)) << ", process peak "
            << HumanBytes(ProcessPeakBytes());
  if (opts.final_params) {
    for (const auto& [name, w] : s.OnHost(s.params)) (*opts.final_params)[name].assign(w.f(), w.f() + w.size());
  }
  return last_acc;
}

MetricSet Test(const ConfigFile& cfg, const std::string& checkpoint) {
  const config::Data& dc = cfg.net.data();
  Session s(cfg, ParseMemoryStrategy(cfg.net.memory().strategy()), nullptr, Device{});
  CheckpointState c = LoadCheckpoint(checkpoint);
  RestoreTensors(c.params, s.params, "parameters", checkpoint);
  RestoreTensors(c.aux, s.aux, "aux state", checkpoint);
  const bool val = dc.has_val();
  std::unique_ptr<DataIter> it = LoadSource(cfg, val ? dc.val() : dc.train(), val ? "val" : "train", s.model, false);
  LOG(INFO) << "test " << checkpoint << " on data." << (val ? "val" : "train") << ": " << it->Describe();
  const config::Solver& sc = cfg.net.solver();
  return Evaluate(&s, it.get(), std::vector<std::string>(sc.metric().begin(), sc.metric().end()));
}

}  // namespace frugal
