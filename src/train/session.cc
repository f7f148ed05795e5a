#include "train/session.h"

#include <glog/logging.h>

#include <cmath>
#include <utility>

#include "backend/device.h"

namespace frugal {

Session::Session(const ConfigFile& cfg, const MemoryStrategy& strategy, Engine* given, Device device,
                 OptimizerShard shard)
    : model(BuildModel(cfg, strategy, device, shard)),
      rng(cfg.net.solver().seed()),
      dev(device),
      data_name_(cfg.net.data().data_name()),
      label_name_(cfg.net.data().label_name()) {
  const config::Solver& sc = cfg.net.solver();
  if (!given) owned_engine = MakeEngineFor(sc, model.train);
  engine = given ? given : owned_engine.get();
  opt = MakeOptimizer(OptimizerOptionsFromConfig(sc, cfg.path));
  Bindings b;
  for (int id : model.params) AddParam(id, sc.iter_size(), &b);
  for (int id : model.aux) {
    const Node& n = model.train.node(id);
    Tensor a = Initialised(n, model.train.shape({id, 0}));
    aux[n.name] = b.vars[n.name] = a;
    b.var_vars[n.name] = NewVar();
  }
  train_inputs = BindInputs(&b);
  b.device = dev;
  train = std::make_unique<Executor>(model.train, model.train_plan, b, engine);
  bound_ = std::move(b);
  BindUpdates();
}

Executor& Session::Eval() {
  if (!eval_) {
    Bindings b = bound_;
    eval_inputs = BindInputs(&b);
    eval_ = std::make_unique<Executor>(model.eval, model.eval_plan, b, engine);
    eval_->SetPoisoning(poison_);
  }
  return *eval_;
}

BatchInputs Session::BindInputs(Bindings* b) {
  BatchInputs in;
  in.data = b->vars[data_name_] = Tensor::Empty(model.data_shape, DType::kFloat32, dev, MemKind::kInput);
  in.label = b->vars[label_name_] = Tensor::Empty(model.label_shape, DType::kFloat32, dev, MemKind::kInput);
  in.data_var = b->var_vars[data_name_] = NewVar();
  in.label_var = b->var_vars[label_name_] = NewVar();
  return in;
}

void Session::SetPoisoning(bool on) {
  poison_ = on;
  for (Executor* e : {train.get(), eval_.get(), update.get(), accumulate.get()})
    if (e) e->SetPoisoning(on);
}

// The update graphs over the parameters' tensors, with their engine
// variables: a weight's update writes its value variable, and everything
// that touches a gradient or its sum (backward, the all-reduces, the sums,
// rescaling) goes through the gradient's variable. Optimizer state has a
// variable of the executor's own: only its update touches it.
void Session::BindUpdates() {
  Bindings u, acc;
  u.device = acc.device = dev;
  const std::vector<std::string> names = opt->StateNames();
  for (Param* p : params.trained()) {
    u.vars[p->name + "/grad"] = acc.vars[p->name + "/grad"] = p->g;
    u.var_vars[p->name + "/grad"] = acc.var_vars[p->name + "/grad"] = p->g_var;
    acc.vars[p->name + "/sum"] = p->sum;
    acc.var_vars[p->name + "/sum"] = p->g_var;
    const Slice* own = model.OwnSlice(p->name);
    if (!own) continue;
    const bool sliced = own->size < p->w.size();
    u.vars[p->name] = sliced ? p->w.Elements(own->begin, own->size) : p->w;
    u.var_vars[p->name] = p->w_var;
    if (sliced) {
      u.vars[p->name + "/grad_slice"] = p->g.Elements(own->begin, own->size);
      u.var_vars[p->name + "/grad_slice"] = p->g_var;
    }
    for (size_t k = 0; k < names.size(); ++k) u.vars[p->name + "/" + names[k]] = p->state[k];
  }
  update = std::make_unique<Executor>(model.update, model.update_plan, u, engine);
  if (model.accumulate.num_nodes() > 0)
    accumulate = std::make_unique<Executor>(model.accumulate, model.accumulate_plan, acc, engine);
}

void Session::AddParam(int id, int iter_size, Bindings* b) {
  const Node& n = model.train.node(id);
  Param p;
  p.name = n.name;
  p.w = b->vars[n.name] = Initialised(n, model.train.shape({id, 0}));
  p.w_var = b->var_vars[n.name] = NewVar();
  if (!model.train.grad_of[id].valid()) {
    LOG(WARNING) << "parameter " << n.name << " gets no gradient and will not be trained";
    params.Add(std::move(p));
    return;
  }
  p.g = b->grads[n.name] = Tensor::Empty(p.w.shape(), DType::kFloat32, dev, MemKind::kParam);
  p.g_var = b->grad_vars[n.name] = NewVar();
  if (iter_size > 1) p.sum = Tensor::Empty(p.w.shape(), DType::kFloat32, dev, MemKind::kParam);
  if (const Slice* own = model.OwnSlice(p.name))
    p.state = opt->CreateState(own->size < p.w.size() ? p.w.Elements(own->begin, own->size) : p.w);
  params.Add(std::move(p));
}

Tensor Session::Initialised(const Node& n, const Shape& shape) {
  Tensor t = Tensor::Empty(shape, DType::kFloat32, {}, MemKind::kParam);
  InitParam(n.init, n.name, &t, &rng);
  if (!on_gpu()) return t;
  Tensor d = Tensor::Empty(shape, DType::kFloat32, dev, MemKind::kParam);
  d.CopyFrom(t);
  return d;
}

Session::~Session() {
  train.reset();  // the executors wait for the engine
  eval_.reset();
  update.reset();
  accumulate.reset();
  for (Var v : vars_) engine->DeleteVar(v);
}

Var Session::NewVar() {
  vars_.push_back(engine->NewVar());
  return vars_.back();
}

void Session::PushOn(std::function<void(cuda::Context*)> fn, const std::vector<Var>& reads,
                     const std::vector<Var>& writes, const char* name) {
  PushOptions o;
  o.name = name;
  if (!on_gpu()) {
    engine->Push([fn = std::move(fn)] { fn(nullptr); }, reads, writes, o);
    return;
  }
  o.device = dev;
  engine->PushAsync([id = dev.id, fn = std::move(fn)](Done done) { backend::LaunchAsync(id, fn, std::move(done)); },
                    reads, writes, o);
}

CheckpointState Session::State(const ConfigFile& cfg, int64_t epoch, int64_t iteration, int64_t position) const {
  CheckpointState c;
  c.config_text = ConfigAsRun(cfg);
  c.epoch = epoch;
  c.iteration = iteration;
  c.data_position = position;
  c.rng_state = rng.Save();
  c.optimizer = opt->name();
  c.params = OnHost(params.Values());
  c.aux = OnHost(aux);
  return c;
}

std::map<std::string, Tensor> Session::OptState(DataParallel* dp) const {
  if (model.shard.ranks == 1) return OnHost(NamedStates(*opt, params.States()));
  CHECK(dp && dp->size() == model.shard.ranks) << "a sharded optimizer state gathers over its ranks";
  const std::vector<std::string> names = opt->StateNames();
  std::map<std::string, Tensor> whole;
  for (const Param* p : params.trained()) {
    const Slice* own = model.OwnSlice(p->name);
    for (size_t k = 0; k < names.size(); ++k) {
      Tensor t;
      if (dp->rank() == 0) t = whole[p->name + "/" + names[k]] = Tensor::Empty(p->w.shape());
      dp->GatherToRoot(model.slices.at(p->name), own ? p->state[k].OnHost() : Tensor(), t);
    }
  }
  return whole;
}

std::map<std::string, Tensor> Session::OwnPart(std::map<std::string, Tensor> whole) const {
  if (model.shard.ranks == 1) return whole;
  for (const Param* p : params.trained()) {
    const Slice* own = model.OwnSlice(p->name);
    for (const std::string& s : opt->StateNames()) {
      auto it = whole.find(p->name + "/" + s);
      if (it == whole.end() || it->second.shape() != p->w.shape()) continue;
      if (own)
        it->second = it->second.Elements(own->begin, own->size).Reshaped(p->state[0].shape());
      else
        whole.erase(it);
    }
  }
  return whole;
}

std::vector<SlicedTensor> Session::SlicedParams() const {
  std::vector<SlicedTensor> out;
  for (const Param* p : params.trained()) out.push_back({p->w, p->w_var, model.slices.at(p->name)});
  return out;
}

int64_t ArenaBytes(const Session& s) {
  int64_t bytes = s.train->arena_bytes() + s.update->arena_bytes();
  if (s.eval_if_bound()) bytes += s.eval_if_bound()->arena_bytes();
  return s.accumulate ? bytes + s.accumulate->arena_bytes() : bytes;
}

std::map<std::string, Tensor> OnHost(const std::map<std::string, Tensor>& ts) {
  std::map<std::string, Tensor> host;
  for (const auto& [name, t] : ts) host[name] = t.OnHost();
  return host;
}

std::string FirstNonFinite(const std::map<std::string, Tensor>& ts) {
  for (const auto& [name, t] : ts) {
    if (t.dtype() != DType::kFloat32) continue;
    const float* v = t.f();
    for (int64_t i = 0; i < t.size(); ++i)
      if (!std::isfinite(v[i])) return Fmt(name, "[", i, "] = ", v[i]);
  }
  return "";
}

std::string LargestMagnitude(const std::map<std::string, Tensor>& ts) {
  float best = -1;
  std::string where;
  for (const auto& [name, t] : ts) {
    if (t.dtype() != DType::kFloat32) continue;
    for (int64_t i = 0; i < t.size(); ++i) {
      if (std::abs(t.f()[i]) <= best) continue;
      best = std::abs(t.f()[i]);
      where = name;
    }
  }
  return Fmt(where, " (", best, ")");
}

}  // namespace frugal
