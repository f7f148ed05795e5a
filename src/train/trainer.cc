// The fit loop: bind the model, then per epoch run training batches (forward,
// backward, SGD) with a progress line every `display` batches, then evaluate
// on the validation data.
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>

#include "frugal/io.h"
#include "frugal/train.h"

namespace frugal {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// The iterator of data.train or data.val, reading batches of the model's size.
std::unique_ptr<DataIter> LoadSource(const ConfigFile& cfg, const config::DataSource& src, const std::string& what,
                                     const Model& m, bool shuffle) {
  DataIterOptions o;
  o.batch_size = m.batch;
  o.shuffle = shuffle;
  o.seed = cfg.net.solver().seed();
  o.sample_shape = Shape(std::vector<int64_t>(m.data_shape.dims().begin() + 1, m.data_shape.dims().end()));
  o.where = cfg.path + ": data." + what;
  return MakeDataIter(src, o);
}

// Everything bound for one run: parameters, their gradients and momenta,
// input tensors, the executors.
struct Session {
  Model model;
  std::unique_ptr<Engine> engine;
  std::map<std::string, Tensor> params, grads, moms, aux;
  Tensor data, label;
  std::unique_ptr<Executor> train, eval;

  Session(const ConfigFile& cfg, const MemoryStrategy& strategy) : model(BuildModel(cfg, strategy)) {
    engine = MakeEngine(cfg.net.solver().engine());
    Rng rng(cfg.net.solver().seed());
    Bindings b;
    for (int id : model.params) {
      const Node& n = model.train.node(id);
      Tensor w = Tensor::Empty(model.train.shape({id, 0}), DType::kFloat32, {}, MemKind::kParam);
      InitParam(n.init, n.name, &w, &rng);
      params[n.name] = b.vars[n.name] = w;
      if (!model.train.grad_of[id].valid()) {
        LOG(WARNING) << "parameter " << n.name << " gets no gradient and will not be trained";
        continue;
      }
      grads[n.name] = b.grads[n.name] = Tensor::Empty(w.shape(), DType::kFloat32, {}, MemKind::kParam);
      moms[n.name] = Tensor::Empty(w.shape(), DType::kFloat32, {}, MemKind::kParam);
    }
    for (int id : model.aux) {
      const Node& n = model.train.node(id);
      Tensor a = Tensor::Empty(model.train.shape({id, 0}), DType::kFloat32, {}, MemKind::kParam);
      InitParam(n.init, n.name, &a, &rng);
      aux[n.name] = b.vars[n.name] = a;
    }
    const config::Data& dc = cfg.net.data();
    data = b.vars[dc.data_name()] = Tensor::Empty(model.data_shape, DType::kFloat32, {}, MemKind::kInput);
    label = b.vars[dc.label_name()] = Tensor::Empty(model.label_shape, DType::kFloat32, {}, MemKind::kInput);
    train = std::make_unique<Executor>(model.train, model.train_plan, b, engine.get());
    eval = std::make_unique<Executor>(model.eval, model.eval_plan, b, engine.get());
  }
};

void CheckSampleShape(const DataIter& it, const Model& m, const std::string& path) {
  Shape want(std::vector<int64_t>(m.data_shape.dims().begin() + 1, m.data_shape.dims().end()));
  FRUGAL_REQUIRE(it.sample_shape() == want, path, ": data.sample_shape is ", want, " but the data has samples of ",
                 it.sample_shape());
  Shape label(std::vector<int64_t>(m.label_shape.dims().begin() + 1, m.label_shape.dims().end()));
  FRUGAL_REQUIRE(it.label_shape() == label, path, ": data.label_shape is ", label, " but the data has labels of ",
                 it.label_shape(), " (set data.label_shape)");
}

MetricSet Evaluate(Session* s, DataIter* it) {
  it->Reset(0);
  MetricSet m;
  int64_t valid = 0;
  while (it->Next(s->data.f(), s->label.f(), &valid)) {
    s->eval->Run(/*is_train=*/false, 0, 0);
    m.Update(s->eval->output(0), s->label, valid);
  }
  return m;
}

}  // namespace

double Train(const ConfigFile& cfg, const TrainOptions& opts) {
  const config::Solver& sc = cfg.net.solver();
  const config::Data& dc = cfg.net.data();
  MemoryStrategy strategy = ParseMemoryStrategy(cfg.net.memory().strategy());
  LOG(INFO) << "config " << cfg.path << ", engine " << sc.engine() << ", device cpu(0), memory strategy "
            << strategy.Name();
  Session s(cfg, strategy);
  LOG(INFO) << "graph:\n" << GraphSummary(s.model.eval);
  LOG(INFO) << PlanSummary(s.model.train_plan, s.model.batch);

  std::unique_ptr<DataIter> train_it = LoadSource(cfg, dc.train(), "train", s.model, dc.shuffle());
  CheckSampleShape(*train_it, s.model, cfg.path);
  LOG(INFO) << train_it->Describe();
  std::unique_ptr<DataIter> val_it;
  if (dc.has_val()) {
    val_it = LoadSource(cfg, dc.val(), "val", s.model, /*shuffle=*/false);
    CheckSampleShape(*val_it, s.model, cfg.path);
    LOG(INFO) << val_it->Describe();
  }

  const auto sgd = MakeOptimizer({OptimizerKind::kSgd, sc.momentum(), sc.weight_decay()});
  DataIter& it = *train_it;
  std::ofstream json;
  if (!opts.log_json.empty()) {
    json.open(opts.log_json);
    FRUGAL_REQUIRE(json, opts.log_json, ": cannot write the JSON log");
  }
  const int display = std::max(1, sc.display());
  int64_t iter = 0;
  double last_acc = 0;
  bool done = false;
  for (int epoch = 0; epoch < sc.epochs() && !done; ++epoch) {
    auto t_epoch = Clock::now(), t_window = Clock::now();
    MetricSet epoch_m, window_m;
    it.Reset(epoch);
    int64_t valid = 0, batch_no = 0, window_samples = 0;
    while (it.Next(s.data.f(), s.label.f(), &valid)) {
      s.train->Run(/*is_train=*/true, iter, sc.seed());
      for (const auto& [name, g] : s.grads) {
        OptState mom{s.moms[name]};
        sgd->Update(&s.params[name], g, &mom, sc.lr(), iter + 1);
      }
      epoch_m.Update(s.train->output(0), s.label, valid);
      window_m.Update(s.train->output(0), s.label, valid);
      window_samples += valid;
      ++batch_no;
      ++iter;
      if (batch_no % display == 0) {
        LOG(INFO) << Fmt("Epoch[", epoch, "] Batch [", batch_no - display, "-", batch_no, "]  Speed: ")
                  << std::fixed << std::setprecision(2) << window_samples / Seconds(t_window) << " samples/sec  "
                  << window_m.ToString();
        window_m.Reset();
        window_samples = 0;
        t_window = Clock::now();
      }
      if (sc.max_iters() > 0 && iter >= sc.max_iters()) { done = true; break; }
    }
    double secs = Seconds(t_epoch);
    double speed = epoch_m.count() / secs;
    LOG(INFO) << "Epoch[" << epoch << "] " << epoch_m.ToString("Train-");
    LOG(INFO) << "Epoch[" << epoch << "] Time cost=" << std::setprecision(3) << secs;
    last_acc = epoch_m.Get("accuracy");
    MetricSet val_m;
    if (val_it) {
      val_m = Evaluate(&s, val_it.get());
      LOG(INFO) << "Epoch[" << epoch << "] " << val_m.ToString("Validation-");
      last_acc = val_m.Get("accuracy");
    }
    if (json.is_open()) {
      json << "{\"epoch\":" << epoch << ",\"iterations\":" << iter << ",\"train_accuracy\":" << epoch_m.Get("accuracy")
           << ",\"train_cross_entropy\":" << epoch_m.Get("cross_entropy");
      if (val_m.count() > 0)
        json << ",\"val_accuracy\":" << val_m.Get("accuracy") << ",\"val_cross_entropy\":" << val_m.Get("cross_entropy");
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
  return last_acc;
}

}  // namespace frugal
