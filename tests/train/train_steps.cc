#include "train/train_steps.h"

#include "frugal/config.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"

namespace frugal::test {

ConfigFile ConvNet(const std::string& dtype) {
  const std::string text = R"cfg(version: 1
node { name: "conv1" op: "convolution" input: "data" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "16" } attr { key: "no_bias" value: "true" } }
node { name: "bn1" op: "batch_norm" input: "conv1" attr { key: "fix_gamma" value: "false" } }
node { name: "relu1" op: "relu" input: "bn1" }
node { name: "pool1" op: "pooling" input: "relu1" attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } attr { key: "pool_type" value: "max" } }
node { name: "drop1" op: "dropout" input: "pool1" attr { key: "p" value: "0.3" } }
node { name: "conv2" op: "convolution" input: "drop1" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "16" } attr { key: "no_bias" value: "true" } }
node { name: "bn2" op: "batch_norm" input: "conv2" attr { key: "fix_gamma" value: "false" } }
node { name: "relu2" op: "relu" input: "bn2" }
node { name: "conv3" op: "convolution" input: "relu2" attr { key: "kernel" value: "(3,3)" } attr { key: "pad" value: "(1,1)" } attr { key: "num_filter" value: "16" } attr { key: "no_bias" value: "true" } }
node { name: "sum" op: "add_n" input: "conv3" input: "relu2" }
node { name: "pool2" op: "pooling" input: "sum" attr { key: "kernel" value: "(2,2)" } attr { key: "stride" value: "(2,2)" } attr { key: "pool_type" value: "avg" } }
node { name: "fc" op: "fully_connected" input: "pool2" attr { key: "num_hidden" value: "10" } }
node { name: "prob" op: "softmax_cross_entropy" input: "fc" input: "label" }
data { train { synthetic { num_samples: 16 min: -1 max: 1 } } batch_size: 8 sample_shape: [3, 16, 16] }
solver { optimizer: SGD lr: 0.1 epochs: 1 seed: 5 }
)cfg";
  ConfigFile cfg = ParseConfig(text, "convnet.prototxt", {});
  cfg.net.set_dtype(dtype);
  return cfg;
}

BoundModel::BoundModel(const ConfigFile& cfg, const MemoryStrategy& strategy, bool plain_layouts)
    : solver(cfg.net.solver()),
      m(BuildModel(cfg, strategy)),
      engine(MakeEngine("naive")),
      rng(solver.seed()),
      opt(MakeOptimizer(OptimizerOptionsFromConfig(solver, cfg.path))) {
  if (plain_layouts) {
    m.train.layouts.clear();
    m.train_plan = PlanMemory(m.train, strategy);
  }
  for (int id : m.params) {
    const Node& n = m.train.node(id);
    Tensor w = Tensor::Empty(m.train.shape({id, 0}));
    InitParam(n.init, n.name, &w, &rng);
    b.vars[n.name] = w;
    b.grads[n.name] = grads[n.name] = Tensor::Empty(w.shape());
    states[n.name] = opt->CreateState(w);
  }
  for (int id : m.aux) {  // BatchNorm's moving statistics: bound, so Params() shows them
    const Node& n = m.train.node(id);
    Tensor a = Tensor::Empty(m.train.shape({id, 0}));
    InitParam(n.init, n.name, &a, &rng);
    b.vars[n.name] = a;
  }
  data = b.vars["data"] = Tensor::Empty(m.data_shape);
  label = b.vars["label"] = Tensor::Empty(m.label_shape);
  const int64_t before = MemoryAccounting::Get().Current(Device{}, MemKind::kArena);
  exec = std::make_unique<Executor>(m.train, m.train_plan, b, engine.get());
  // The arena poisoned (frugal/executor.h): a kernel that reads a dead
  // buffer stops with an error, never giving the reference's bits.
  exec->SetPoisoning(true);
  arena_allocated = MemoryAccounting::Get().Current(Device{}, MemKind::kArena) - before;
  Bindings u;
  for (const auto& [name, g] : grads) {
    u.vars[name] = b.vars[name];
    u.vars[name + "/grad"] = g;
    for (size_t k = 0; k < states[name].size(); ++k) u.vars[name + "/" + opt->StateNames()[k]] = states[name][k];
  }
  update = std::make_unique<Executor>(m.update, m.update_plan, u, engine.get());
}

void BoundModel::Step(int64_t step) {
  exec->Run(true, step - 1, solver.seed());
  update->Run(true, step, solver.seed(), solver.lr());
}

int64_t RunNode(const std::string& op, const AttrMap& attrs, const std::vector<Tensor>& in, int64_t step, float lr) {
  Graph g;
  Bindings b;
  std::vector<Entry> xs;
  for (size_t k = 0; k < in.size(); ++k) {
    const std::string name = Fmt("x", k);
    xs.push_back({g.AddVariable(name, VarKind::kInput), 0});
    g.mutable_node(xs.back().node).shape = in[k].shape();
    b.vars[name] = in[k];
  }
  g.AddOp(op, op, attrs, xs);
  InferShapes(&g, {});
  const MemoryPlan plan = PlanMemory(g, MemoryStrategy::kShare);
  b.device = in[0].device();
  auto engine = MakeEngine("naive");
  Executor e(g, plan, b, engine.get());
  e.Run(true, step, 0, lr);
  return plan.arena_bytes;
}

void Update(const Optimizer& opt, Tensor* w, const Tensor& g, OptState* state, float lr, int64_t step,
            const ParamMult& mult) {
  std::vector<Tensor> in{*w, g};
  in.insert(in.end(), state->begin(), state->end());
  RunNode(opt.UpdateOp(), opt.UpdateAttrs(mult), in, step, lr);
}

std::vector<std::vector<float>> BoundModel::Params() const {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : b.vars)
    if (name != "data" && name != "label") out.emplace_back(t.f(), t.f() + t.size());
  return out;
}

std::vector<std::vector<float>> TrainSteps(const ConfigFile& cfg, const MemoryStrategy& strategy, int steps,
                                           int64_t* arena_allocated, bool plain_layouts) {
  BoundModel bm(cfg, strategy, plain_layouts);
  if (arena_allocated) *arena_allocated = bm.arena_allocated;
  for (int step = 1; step <= steps; ++step) {
    for (int64_t i = 0; i < bm.data.size(); ++i) bm.data.f()[i] = static_cast<float>(2 * bm.rng.Uniform() - 1);
    for (int64_t i = 0; i < bm.label.size(); ++i) bm.label.f()[i] = static_cast<float>(bm.rng.Next() % 10);
    bm.Step(step);
  }
  std::vector<std::vector<float>> result = bm.Params();
  const Tensor& y = bm.exec->output(0);
  result.emplace_back(y.f(), y.f() + y.size());
  return result;
}

}  // namespace frugal::test
