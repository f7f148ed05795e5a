#include "frugal/executor.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>

namespace frugal {

struct Executor::OpRun {
  int node;
  bool is_recompute;
  uint64_t node_key;
  std::vector<Tensor> in, out;
  std::vector<OpReq> req;
  Tensor workspace;
  std::vector<Var> reads, writes;
};

Executor::Executor(const Graph& graph, const MemoryPlan& plan, const Bindings& bindings, Engine* engine)
    : graph_(graph), plan_(plan), engine_(engine) {
  const Graph& g = graph_;
  const Device cpu;
  arena_ = std::make_shared<Storage>(cpu, plan_.arena_bytes, MemKind::kArena);

  // One engine variable per arena block, one per external tensor.
  std::vector<Var> block_var(plan_.num_blocks);
  for (Var& v : block_var) vars_.push_back(v = engine_->NewVar());
  std::vector<Var> entry_var(g.num_entries(), -1);
  entries_.resize(g.num_entries());

  auto bind_external = [&](const std::map<std::string, Tensor>& map, const std::string& name, Entry e,
                           const char* what) {
    auto it = map.find(name);
    FRUGAL_REQUIRE(it != map.end() && it->second.defined(), "no tensor bound for ", what, " '", name, "'");
    FRUGAL_REQUIRE(it->second.shape() == g.shape(e), what, " '", name, "' is bound to a tensor of shape ",
                   it->second.shape(), " but the graph needs ", g.shape(e));
    entries_[g.EntryId(e)] = it->second;
    vars_.push_back(entry_var[g.EntryId(e)] = engine_->NewVar());
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) bind_external(bindings.vars, n.name, {i, 0}, "variable");
    if (i < static_cast<int>(g.grad_of.size()) && g.grad_of[i].valid())
      bind_external(bindings.grads, n.name, g.grad_of[i], "gradient of");
  }
  for (int e = 0; e < g.num_entries(); ++e) {
    if (plan_.entry_offset[e] < 0) continue;
    entries_[e] = Tensor(arena_, plan_.entry_offset[e], g.shapes[e], DType::kFloat32);
    entry_var[e] = block_var[plan_.entry_block[e]];
  }

  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    FRUGAL_REQUIRE(n.op->cpu_kernel() != nullptr, n.Where(), ": op has no CPU kernel");
    // A mirror recomputes another node: same RNG key, no side effects. A
    // gradient node keys on the node it differentiates.
    const Node& origin = g.node(n.mirror_of >= 0 ? n.mirror_of : n.fwd >= 0 ? n.fwd : i);
    OpRun r{i, n.mirror_of >= 0, StableHash(origin.name)};
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      int e = g.EntryId(n.inputs[k]);
      r.in.push_back(entries_[e]);
      const auto& m = n.op->mutates();
      bool written = std::find(m.begin(), m.end(), static_cast<int>(k)) != m.end();
      (written ? r.writes : r.reads).push_back(entry_var[e]);
    }
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      int e = g.EntryId({i, k});
      r.out.push_back(entries_[e]);
      r.req.push_back(plan_.entry_req[e]);
      if (entry_var[e] >= 0) r.writes.push_back(entry_var[e]);
    }
    if (plan_.workspace_offset[i] >= 0) {
      r.workspace = Tensor(arena_, plan_.workspace_offset[i], Shape{plan_.workspace_bytes[i]}, DType::kUInt8);
    }
    runs_.push_back(std::move(r));
  }
  for (const Entry& e : g.outputs) outputs_.push_back(entries_[g.EntryId(e)]);
}

Executor::~Executor() {
  engine_->WaitAll();
  for (Var v : vars_) engine_->DeleteVar(v);
}

void Executor::Run(bool is_train, int64_t step, uint64_t seed) {
  is_train_ = is_train;
  step_ = step;
  seed_ = seed;
  for (const OpRun& r : runs_) {
    const Node& n = graph_.node(r.node);
    PushOptions opts;
    opts.name = n.name.c_str();
    engine_->Push(
        [this, &r, &n] {
          KernelCtx ctx{n, r.in, r.out, r.req, r.workspace, is_train_, r.is_recompute, r.node_key, seed_, step_};
          if (!profiling_) {
            n.op->cpu_kernel()(ctx);
            return;
          }
          auto t0 = std::chrono::steady_clock::now();
          n.op->cpu_kernel()(ctx);
          node_seconds_[r.node] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        r.reads, r.writes, opts);
  }
  engine_->WaitAll();
}

}  // namespace frugal
