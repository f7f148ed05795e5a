#include "frugal/executor.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

#include "backend/device.h"
#include "frugal/op.h"
#include "frugal/passes/schedule.h"
#include "ops/cpu/kernel_names.h"

namespace frugal {
namespace {

// Every byte 0xff: a float NaN.
void Poison(Storage* arena, int64_t offset, int64_t bytes) {
  std::memset(static_cast<char*>(arena->data()) + offset, 0xff, static_cast<size_t>(bytes));
}

// Throws Error naming the node if an arena input of a poisoned run still
// holds the poison: the op reads bytes that are dead or were never written.
void CheckNotPoisoned(const Graph& g, const Node& n, const std::vector<Tensor>& in, const Storage* arena) {
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].defined() || in[k].storage().get() != arena) continue;
    const auto* words = static_cast<const uint32_t*>(in[k].raw());
    const int64_t count = in[k].bytes() / 4;
    for (int64_t i = 0; i < count; ++i) {
      if (words[i] != 0xffffffffu) continue;
      throw Error(Fmt(n.Where(), ": input ", k, " ('", g.node(n.inputs[k].node).name, "' output ", n.inputs[k].index,
                      ") holds the arena's poison at element ", i, " of ", count,
                      ": the op reads bytes that are dead or were never written (--poison-arena)"));
    }
  }
}

}  // namespace

struct Executor::OpRun {
  int node;
  bool is_recompute;
  uint64_t node_key;
  std::vector<Tensor> in, out;
  std::vector<OpReq> req;
  Tensor workspace;
};

Executor::Executor(const Graph& graph, const MemoryPlan& plan, const Bindings& bindings, Engine* engine)
    : graph_(graph), plan_(plan), engine_(engine), device_(bindings.device) {
  const Graph& g = graph_;
  const bool gpu = device_.type == DeviceType::kCUDA;
  for (const Node& n : g.nodes()) {
    if (n.is_variable() || n.op->kernel(device_.type)) continue;
    throw Error(Fmt(n.Where(), ": op '", n.op->name(), "' has no ", gpu ? "CUDA" : "CPU", " kernel, so this graph ",
                    "cannot run on ", device_.ToString(),
                    gpu ? " (run it on the CPU, or add the kernel in "
                          "src/ops/cuda; docs/ARCHITECTURE.md lists the ops without one)"
                        : ""));
  }
  for (int e = 0; gpu && e < g.num_entries(); ++e) {
    if (g.dtypes[e] == DType::kFloat32) continue;
    throw Error(Fmt(g.node(g.EntryOf(e).node).Where(), ": its output is ", DTypeName(g.dtypes[e]),
                    ", and the CUDA kernels take float32 only; train with dtype float32 on a GPU"));
  }
  for (int e = 0; gpu && e < g.num_entries(); ++e) {
    CHECK(g.layout(e) == Layout::kPlain) << g.node(g.EntryOf(e).node).Where()
                                         << ": a channels-last output on a GPU (layouts are chosen for the CPU)";
  }
  if (gpu) backend::RequireCudaDevice(device_.id, Fmt("executor on ", device_.ToString()));
  arena_ = std::make_shared<Storage>(device_, plan_.arena_bytes, MemKind::kArena);
  entries_.resize(g.num_entries());
  entry_var_.assign(g.num_entries(), -1);
  BindExternal(bindings);
  BindArena();

  // What each op waits for (EngineAccesses), as engine variables: an
  // entry's own outside the arena, its block's inside.
  auto var_of = [&](int resource) {
    return resource < g.num_entries() ? entry_var_[resource] : block_var_[resource - g.num_entries()];
  };
  for (const OpAccess& a : EngineAccesses(g, plan_)) {
    const Node& n = g.node(a.node);
    // A mirror recomputes another node: same RNG key, no side effects. A
    // gradient node keys on the node it differentiates.
    const Node& origin = g.node(n.mirror_of >= 0 ? n.mirror_of : n.fwd >= 0 ? n.fwd : a.node);
    OpRun r{a.node, n.mirror_of >= 0, StableHash(origin.name)};
    for (const Entry& e : n.inputs) r.in.push_back(entries_[g.EntryId(e)]);
    for (int k = 0; k < g.NumOutputs(a.node); ++k) {
      const int e = g.EntryId({a.node, k});
      r.out.push_back(entries_[e]);
      r.req.push_back(plan_.entry_req[e]);
    }
    if (plan_.workspace_offset[a.node] >= 0) {
      r.workspace = Tensor(arena_, plan_.workspace_offset[a.node], Shape{plan_.workspace_bytes[a.node]}, DType::kUInt8);
    }
    OpSchedule s{a.node, {}, {}};
    for (int x : a.reads)
      if (var_of(x) >= 0) s.reads.push_back(var_of(x));
    for (int x : a.writes)
      if (var_of(x) >= 0) s.writes.push_back(var_of(x));
    runs_.push_back(std::move(r));
    schedule_.push_back(std::move(s));
  }
  for (const Entry& e : g.outputs) {
    outputs_.push_back(entries_[g.EntryId(e)]);
    output_vars_.push_back(entry_var_[g.EntryId(e)]);
  }
}

void Executor::BindExternal(const Bindings& b) {
  const Graph& g = graph_;
  auto bind = [&](const std::map<std::string, Tensor>& tensors, const std::map<std::string, Var>& vars,
                  const std::string& name, Entry e, const char* what) {
    auto it = tensors.find(name);
    FRUGAL_REQUIRE(it != tensors.end() && it->second.defined(), "no tensor bound for ", what, " '", name, "'");
    FRUGAL_REQUIRE(it->second.shape() == g.shape(e), what, " '", name, "' is bound to a tensor of shape ",
                   it->second.shape(), " but the graph needs ", g.shape(e));
    FRUGAL_REQUIRE(it->second.dtype() == g.dtype(e), what, " '", name, "' is bound to a ",
                   DTypeName(it->second.dtype()), " tensor but the graph needs ", DTypeName(g.dtype(e)));
    FRUGAL_REQUIRE(it->second.device() == device_, what, " '", name, "' is bound to a tensor on ",
                   it->second.device().ToString(), " but the graph runs on ", device_.ToString());
    entries_[g.EntryId(e)] = it->second;
    auto v = vars.find(name);
    if (v != vars.end()) {
      entry_var_[g.EntryId(e)] = v->second;
    } else {
      owned_vars_.push_back(entry_var_[g.EntryId(e)] = engine_->NewVar());
    }
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) bind(b.vars, b.var_vars, n.name, {i, 0}, "variable");
    if (i < static_cast<int>(g.grad_of.size()) && g.grad_of[i].valid())
      bind(b.grads, b.grad_vars, n.name, g.grad_of[i], "gradient of");
  }
}

// Arena tensors, and one engine variable per block (a workspace's too).
void Executor::BindArena() {
  const Graph& g = graph_;
  for (int b = 0; b < plan_.num_blocks; ++b) owned_vars_.push_back(engine_->NewVar());
  block_var_.assign(owned_vars_.end() - plan_.num_blocks, owned_vars_.end());
  for (int e = 0; e < g.num_entries(); ++e) {
    if (plan_.entry_offset[e] < 0) continue;
    entries_[e] = Tensor(arena_, plan_.entry_offset[e], g.shapes[e], g.dtypes[e]);
    if (g.layout(e) != Layout::kPlain) entries_[e] = entries_[e].WithLayout(g.layout(e));
    entry_var_[e] = block_var_[plan_.entry_block[e]];
  }
}

// fresh_: each block before its first writer, each workspace before its op;
// dying_: each block after its last reader (never a graph output's), each
// workspace after its op.
void Executor::SetPoisoning(bool on) {
  const Graph& g = graph_;
  poison_ = on && device_.type != DeviceType::kCUDA;
  fresh_.assign(poison_ ? g.num_nodes() : 0, {});
  dying_.assign(poison_ ? g.num_nodes() : 0, {});
  if (!poison_) return;
  const int num_blocks = plan_.num_blocks;
  std::vector<int> first_writer(num_blocks, -1), last_reader(num_blocks, -1);
  std::vector<Range> block(num_blocks, Range{0, 0, -1});
  auto block_of = [&](Entry e) { return plan_.entry_offset[g.EntryId(e)] >= 0 ? plan_.entry_block[g.EntryId(e)] : -1; };
  for (int i = 0; i < g.num_nodes(); ++i) {
    for (const Entry& e : g.node(i).inputs)
      if (block_of(e) >= 0) last_reader[block_of(e)] = i;
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      const int b = block_of({i, k}), e = g.EntryId({i, k});
      if (b < 0) continue;
      if (first_writer[b] < 0) first_writer[b] = i;
      block[b] = {plan_.entry_offset[e], std::max(block[b].bytes, entries_[e].bytes()), entry_var_[e]};
    }
  }
  for (const Entry& e : g.outputs)
    if (block_of(e) >= 0) last_reader[block_of(e)] = g.num_nodes();  // live to the end
  for (int b = 0; b < num_blocks; ++b) {
    if (first_writer[b] < 0) continue;
    fresh_[first_writer[b]].push_back(block[b]);
    if (last_reader[b] < g.num_nodes()) dying_[std::max(last_reader[b], first_writer[b])].push_back(block[b]);
  }
  for (int b = 0; b < num_blocks; ++b) {
    const int i = plan_.blocks[b].node;
    if (plan_.blocks[b].entry >= 0) continue;  // a workspace's block
    const Range r{plan_.workspace_offset[i], plan_.workspace_bytes[i], block_var_[b]};
    fresh_[i].push_back(r);
    dying_[i].push_back(r);
  }
}

Executor::~Executor() {
  std::string error = WaitAllNoThrow(engine_);
  if (!error.empty()) LOG(ERROR) << "executor destroyed with an unreported error: " << error;
  for (Var v : owned_vars_) engine_->DeleteVar(v);
}

void Executor::Push(bool is_train, int64_t step, uint64_t seed, float lr) {
  if (device_.type == DeviceType::kCUDA) return PushCuda(is_train, step, seed, lr);
  const int threads = engine_->KernelThreads(Device{});
  for (size_t j = 0; j < runs_.size(); ++j) {
    const OpRun& r = runs_[j];
    const Node& n = graph_.node(r.node);
    PushOptions opts;
    opts.name = n.name.c_str();
    // Everything the kernel needs is captured by value or lives as long as
    // the executor: a later Push with other arguments cannot change it.
    engine_->Push(
        [&r, &n, is_train, step, seed, lr, threads, part = data_part_,
         seconds = profiling_ ? &node_seconds_[r.node] : nullptr,
         kernels = profiling_ ? &node_kernels_[r.node] : nullptr, trace = trace_,
         fresh = poison_ ? &fresh_[r.node] : nullptr, arena = arena_.get(), graph = &graph_] {
          if (fresh) {
            CheckNotPoisoned(*graph, n, r.in, arena);
            for (const Range& p : *fresh) Poison(arena, p.offset, p.bytes);
          }
          KernelCtx ctx{n,          r.in, r.out, r.req,   r.workspace,      is_train, r.is_recompute,
                        r.node_key, seed, step,  threads, /*cuda=*/nullptr, lr,       part};
          if (trace) {
            const char* category = r.is_recompute ? "recompute" : n.fwd >= 0 ? "backward" : "forward";
            ScopedTrace t(trace, n.name, category, TraceThreadId());
            t.event().Arg("step", step);
            if (r.is_recompute) t.event().Arg("recompute", true);
            n.op->cpu_kernel()(ctx);
            return;
          }
          if (!seconds) {
            n.op->cpu_kernel()(ctx);
            return;
          }
          const cpu::KernelNames names(kernels);
          auto t0 = std::chrono::steady_clock::now();
          n.op->cpu_kernel()(ctx);
          *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        schedule_[j].reads, schedule_[j].writes, opts);
    if (!poison_) continue;
    PushOptions poison_opts;
    poison_opts.name = "poison";
    for (const Range& p : dying_[r.node])
      engine_->Push([arena = arena_.get(), p] { Poison(arena, p.offset, p.bytes); }, {}, {p.var}, poison_opts);
  }
}

// On a GPU each node is an asynchronous push to the GPU's engine worker: the
// kernel launches on the GPU's stream and the engine releases the node's
// variables when the stream has passed it (an event, backend/device.h). One
// stream per GPU runs the nodes in push order. Profiling times the launch
// only; traces are CPU-side only.
void Executor::PushCuda(bool is_train, int64_t step, uint64_t seed, float lr) {
  for (size_t j = 0; j < runs_.size(); ++j) {
    const OpRun& r = runs_[j];
    const Node& n = graph_.node(r.node);
    PushOptions opts;
    opts.name = n.name.c_str();
    opts.device = device_;
    engine_->PushAsync(
        [&r, &n, is_train, step, seed, lr, part = data_part_, dev = device_.id](Done done) {
          backend::LaunchAsync(
              dev,
              [&](cuda::Context* cuda) {
                KernelCtx ctx{n,          r.in, r.out, r.req, r.workspace, is_train, r.is_recompute,
                              r.node_key, seed, step,  1,     cuda,        lr,       part};
                n.op->cuda_kernel()(ctx);
              },
              std::move(done));
        },
        schedule_[j].reads, schedule_[j].writes, opts);
  }
}

void Executor::WaitForOutputs() {
  for (Var v : output_vars_) engine_->WaitForVar(v);
}

void Executor::Run(bool is_train, int64_t step, uint64_t seed, float lr) {
  Push(is_train, step, seed, lr);
  engine_->WaitAll();
}

}  // namespace frugal
