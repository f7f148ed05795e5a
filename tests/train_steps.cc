#include "train_steps.h"

namespace frugal::test {

std::vector<std::vector<float>> TrainSteps(const ConfigFile& cfg, const MemoryStrategy& strategy, int steps,
                                           int64_t* arena_allocated) {
  const config::Solver& sc = cfg.net.solver();
  Model m = BuildModel(cfg, strategy);
  auto engine = MakeEngine("naive");
  Rng rng(sc.seed());
  std::unique_ptr<Optimizer> opt = MakeOptimizer(OptimizerOptionsFromConfig(sc, cfg.path));
  Bindings b;
  std::map<std::string, Tensor> grads;
  std::map<std::string, OptState> states;
  for (int id : m.params) {
    const Node& n = m.train.node(id);
    Tensor w = Tensor::Empty(m.train.shape({id, 0}));
    InitParam(n.init, n.name, &w, &rng);
    b.vars[n.name] = w;
    b.grads[n.name] = grads[n.name] = Tensor::Empty(w.shape());
    states[n.name] = opt->CreateState(w);
  }
  Tensor data = b.vars["data"] = Tensor::Empty(m.data_shape);
  Tensor label = b.vars["label"] = Tensor::Empty(m.label_shape);
  const int64_t before = MemoryAccounting::Get().Current(Device{}, MemKind::kArena);
  Executor exec(m.train, m.train_plan, b, engine.get());
  if (arena_allocated) *arena_allocated = MemoryAccounting::Get().Current(Device{}, MemKind::kArena) - before;
  for (int step = 0; step < steps; ++step) {
    for (int64_t i = 0; i < data.size(); ++i) data.f()[i] = static_cast<float>(2 * rng.Uniform() - 1);
    for (int64_t i = 0; i < label.size(); ++i) label.f()[i] = static_cast<float>(rng.Next() % 10);
    exec.Run(true, step, sc.seed());
    for (auto& [name, g] : grads) opt->Update(&b.vars[name], g, &states[name], sc.lr(), step + 1);
  }
  std::vector<std::vector<float>> result;
  for (auto& [name, t] : b.vars)
    if (name != "data" && name != "label") result.emplace_back(t.f(), t.f() + t.size());
  result.emplace_back(exec.output(0).f(), exec.output(0).f() + exec.output(0).size());
  return result;
}

}  // namespace frugal::test
