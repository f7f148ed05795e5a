// The graphs a training step runs after backward (frugal/train.h, Model):
// the gradient combination and the optimizer updates as ops.
#include "train/update_graph.h"

#include <map>
#include <utility>
#include <vector>

#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"

namespace frugal {
namespace {

int AddVar(Graph* g, const std::string& name, VarKind kind, const Shape& shape) {
  const int id = g->AddVariable(name, kind);
  g->mutable_node(id).shape = shape;
  return id;
}

MemoryPlan Planned(Graph* g) {
  InferShapes(g, {});
  return PlanMemory(*g, MemoryStrategy::kShare);
}

}  // namespace

void BuildUpdateGraphs(const config::Solver& sc, const std::string& path, Model* m) {
  const Optimizer opt(OptimizerOptionsFromConfig(sc, path));
  m->optimizer = opt.name();
  std::map<std::string, int> trained;  // name order, as every loop over parameters
  for (int id : m->params)
    if (m->train.grad_of[id].valid()) trained[m->train.node(id).name] = id;
  const int iter_size = sc.iter_size();
  const float clip = sc.clip_gradient();

  Graph& u = m->update;
  std::map<std::string, Entry> grad;
  for (const auto& [name, id] : trained)
    grad[name] = {AddVar(&u, name + "/grad", VarKind::kInput, m->train.shape({id, 0})), 0};
  if (iter_size > 1 || clip > 0) {
    std::vector<Entry> all;
    for (const auto& [name, e] : grad) all.push_back(e);
    const AttrMap a{{"num_args", Fmt(all.size())},
                    {"rescale", ExactAttr(1.f / static_cast<float>(iter_size))},
                    {"max_norm", ExactAttr(clip)}};
    if (!all.empty()) u.AddOp("rescale_clip", "rescale_clip", a, all);
  }
  std::vector<int64_t> sizes;
  for (const auto& [name, id] : trained) sizes.push_back(m->train.shape({id, 0}).Size());
  const std::vector<std::vector<Slice>> slices = SliceAcrossRanks(sizes, m->shard.ranks);
  size_t k = 0;
  for (const auto& [name, id] : trained) m->slices[name] = slices[k++];
  // The rules are elementwise: a slice updates as the whole would.
  const std::vector<std::string> states = opt.StateNames();
  for (const auto& [name, id] : trained) {
    const Slice* own = m->OwnSlice(name);
    if (!own) continue;
    const Node& n = m->train.node(id);
    const Shape& whole = m->train.shape({id, 0});
    const bool sliced = own->size < whole.Size();
    const Shape shape = sliced ? Shape({own->size}) : whole;
    const Entry g = sliced ? Entry{AddVar(&u, name + "/grad_slice", VarKind::kInput, shape), 0} : grad[name];
    std::vector<Entry> in{{AddVar(&u, name, VarKind::kParam, shape), 0}, g};
    for (const std::string& s : states) in.push_back({AddVar(&u, name + "/" + s, VarKind::kState, shape), 0});
    u.AddOp(opt.UpdateOp(), "update(" + name + ")", opt.UpdateAttrs({n.lr_mult, n.wd_mult}), in);
  }
  m->update_plan = Planned(&u);

  if (iter_size < 2) return;
  Graph& acc = m->accumulate;
  for (const auto& [name, id] : trained) {
    const Shape& shape = m->train.shape({id, 0});
    const Entry sum{AddVar(&acc, name + "/sum", VarKind::kState, shape), 0};
    const Entry g{AddVar(&acc, name + "/grad", VarKind::kInput, shape), 0};
    acc.AddOp("grad_accumulate", "accumulate(" + name + ")", {{"iter_size", Fmt(iter_size)}}, {sum, g});
  }
  m->accumulate_plan = Planned(&acc);
}

}  // namespace frugal
