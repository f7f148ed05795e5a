#include "ops/op_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frugal/executor.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"

namespace frugal::test {
namespace {

Tensor MakeTensor(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(s);
  std::copy(v.begin(), v.end(), t.f());
  return t;
}

}  // namespace

std::vector<float> ToVector(const Tensor& t) { return std::vector<float>(t.f(), t.f() + t.size()); }

OpGraph BuildOpGraph(const OpCase& c, bool with_gradient) {
  OpGraph og;
  Graph& g = og.g;
  std::vector<Entry> xs;
  for (size_t k = 0; k < c.in_shapes.size(); ++k) {
    xs.push_back({g.AddVariable("x" + std::to_string(k), VarKind::kInput), 0});
    og.var_shapes.push_back({"x" + std::to_string(k), c.in_shapes[k]});
  }
  og.op_node = g.AddOp(c.op, "op", c.attrs, xs);
  int n_out = g.NumOutputs(og.op_node);
  for (int k = 0; k < n_out; ++k) g.outputs.push_back({og.op_node, k});
  InferShapes(&g, og.var_shapes);
  for (int k = 0; k < n_out; ++k) og.out_shapes.push_back(g.shape({og.op_node, k}));
  if (!with_gradient || !g.node(og.op_node).op->has_gradient()) return og;  // e.g. block_grad, zeros_like
  std::vector<Entry> dys;
  if (!g.node(og.op_node).op->is_loss()) {
    for (int k = 0; k < n_out; ++k) {
      dys.push_back({g.AddVariable("dy" + std::to_string(k), VarKind::kInput), 0});
      og.var_shapes.push_back({"dy" + std::to_string(k), og.out_shapes[k]});
    }
  } else {
    dys.assign(n_out, Entry{});
  }
  GradCtx ctx{og.op_node, g.node(og.op_node).inputs, {}, dys};
  for (int k = 0; k < n_out; ++k) ctx.outputs.push_back({og.op_node, k});
  og.in_grads = g.node(og.op_node).op->BuildGradient(g, ctx);
  for (size_t k = 0; k < c.in_shapes.size(); ++k)
    if (c.differentiable[k]) g.outputs.push_back(og.in_grads[k]);
  InferShapes(&g, og.var_shapes);
  return og;
}

namespace {

// Binds the op graph and runs it once with the given variable values.
struct Bound {
  MemoryPlan plan;
  std::unique_ptr<Engine> engine = MakeEngine("naive");
  std::unique_ptr<Executor> exec;
  std::vector<Tensor> vars;
  Bound(const OpGraph& og, const Values& values) {
    plan = PlanMemory(og.g, MemoryStrategy::kNone);
    Bindings b;
    for (size_t k = 0; k < og.var_shapes.size(); ++k) {
      vars.push_back(MakeTensor(og.var_shapes[k].second, values[k]));
      b.vars[og.var_shapes[k].first] = vars.back();
    }
    exec = std::make_unique<Executor>(og.g, plan, b, engine.get());
    exec->Run(/*is_train=*/true, 0, 7);
  }
};

// The same on another device: variables copied there, every output copied
// back to the host.
struct BoundOn {
  std::unique_ptr<Engine> engine = MakeEngine("threaded");
  std::unique_ptr<Executor> exec;
  Values outputs;
  BoundOn(const OpGraph& og, const Values& values, Device dev, const MemoryStrategy& strategy) {
    const MemoryPlan plan = PlanMemory(og.g, strategy);
    Bindings b;
    b.device = dev;
    for (size_t k = 0; k < og.var_shapes.size(); ++k) {
      Tensor t = Tensor::Empty(og.var_shapes[k].second, DType::kFloat32, dev, MemKind::kInput);
      t.CopyFrom(MakeTensor(og.var_shapes[k].second, values[k]));
      b.vars[og.var_shapes[k].first] = t;
    }
    exec = std::make_unique<Executor>(og.g, plan, b, engine.get());
    exec->Run(/*is_train=*/true, 0, 7);
    for (size_t k = 0; k < og.g.outputs.size(); ++k) { outputs.push_back(ToVector(exec->output(k).OnHost())); }
  }
};

// The scalar whose gradient the op's backward computes.
double Objective(const OpCase& c, const Values& in, const Values& out, const Values& r) {
  if (c.loss) return c.loss(in, out);
  double j = 0;
  for (size_t k = 0; k < out.size(); ++k)
    for (size_t i = 0; i < out[k].size(); ++i) j += static_cast<double>(out[k][i]) * r[k][i];
  return j;
}

// Runs one node's kernel on fresh outputs, with req for every requested
// output; out_init fills the outputs first. Outputs with req kNull get no
// tensor at all, as in the executor.
std::vector<Tensor> RunKernel(const Graph& g, int node, const std::vector<Tensor>& in, const std::vector<OpReq>& req,
                              float out_init, int alias_in = -1, int alias_out = -1) {
  std::vector<Tensor> out;
  for (int k = 0; k < g.NumOutputs(node); ++k) {
    if (req[k] == OpReq::kNull) {
      out.emplace_back();
      continue;
    }
    Tensor t = Tensor::Empty(g.shape({node, k}));
    t.Fill(out_init);
    out.push_back(t);
  }
  std::vector<Tensor> ins = in;
  if (alias_in >= 0) {
    out[alias_out].CopyFrom(in[alias_in]);
    ins[alias_in] = out[alias_out];
  }
  Tensor no_ws;
  Tensor ws;
  const Node& n = g.node(node);
  std::vector<Shape> in_shapes;
  for (const Entry& e : n.inputs) in_shapes.push_back(g.shape(e));
  std::vector<Shape> out_shapes;
  for (int k = 0; k < g.NumOutputs(node); ++k) out_shapes.push_back(g.shape({node, k}));
  std::vector<Layout> in_layouts, out_layouts;
  for (const Tensor& t : ins) in_layouts.push_back(t.defined() ? t.layout() : Layout::kPlain);
  for (const Tensor& t : out) out_layouts.push_back(t.defined() ? t.layout() : Layout::kPlain);
  int64_t ws_bytes = n.op->WorkspaceBytes({n, in_shapes, out_shapes, DType::kFloat32, in_layouts, out_layouts});
  if (ws_bytes > 0) ws = Tensor::Empty(Shape{ws_bytes}, DType::kUInt8);
  const uint64_t key = StableHash(g.node(n.fwd >= 0 ? n.fwd : node).name);  // as the executor keys it
  KernelCtx ctx{n, ins, out, req, ws_bytes > 0 ? ws : no_ws, true, false, key, 7, 0};
  n.op->cpu_kernel()(ctx);
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(static_cast<double>(want[i]))))
        << what << " element " << i;
  }
}

// Write versus add, and in place, for the kernel of one node.
void CheckKernel(const Graph& g, int node, const std::vector<Tensor>& in, OpReport* rep) {
  const Node& n = g.node(node);
  std::vector<OpReq> write(g.NumOutputs(node), OpReq::kWrite), add(g.NumOutputs(node), OpReq::kAdd);
  // With req write, an output must not depend on what its buffer held: run
  // twice over two sentinels. An output left as its sentinel in both runs
  // is one this kernel leaves alone (a label's gradient, never requested in
  // a real graph); any other difference means the kernel read or added into
  // its output.
  constexpr float kSentinelA = 7.25e33f, kSentinelB = -3.5e33f;
  std::vector<Tensor> ref = RunKernel(g, node, in, write, kSentinelA);
  std::vector<Tensor> ref_b = RunKernel(g, node, in, write, kSentinelB);
  std::vector<bool> written(g.NumOutputs(node));
  for (int k = 0; k < g.NumOutputs(node); ++k) {
    const std::vector<float> a = ToVector(ref[k]), b = ToVector(ref_b[k]);
    const bool alone = std::all_of(a.begin(), a.end(), [](float v) { return v == kSentinelA; }) &&
                       std::all_of(b.begin(), b.end(), [](float v) { return v == kSentinelB; });
    written[k] = !alone;
    // A hidden output may be a library's workspace (max pooling's argmax)
    // that fills only part of its tensor: only visible outputs are held to
    // this.
    if (written[k] && k < n.op->NumVisibleOutputs(n.params)) {
      EXPECT_EQ(a, b) << n.name << " (" << n.op->name() << ") output " << k
                      << " with req write depends on what its buffer held before: the kernel reads or adds into it";
    }
  }
  std::vector<Tensor> zero_then_add = RunKernel(g, node, in, add, 0.5f);
  // Hidden outputs (saved statistics, argmax workspaces) are never
  // accumulated into: only visible ones are checked with req add.
  for (int k = 0; k < n.op->NumVisibleOutputs(n.params); ++k) {
    if (!written[k]) continue;
    std::vector<float> w = ToVector(ref[k]), a = ToVector(zero_then_add[k]);
    for (float& v : w) v += 0.5f;
    ExpectNear(a, w, 1e-5, n.name + " (" + n.op->name() + ") output " + std::to_string(k) + " with req add");
  }
  ++rep->kernels_checked;
  // Each output in turn unread (kNull, no tensor): the others are unchanged.
  for (int k = 0; k < g.NumOutputs(node); ++k) {
    std::vector<OpReq> req = write;
    req[k] = OpReq::kNull;
    std::vector<Tensor> got = RunKernel(g, node, in, req, kSentinelA);
    for (int j = 0; j < g.NumOutputs(node); ++j) {
      // Hidden outputs serve the gradient of the visible ones: with a
      // visible output unread there is no gradient, and they may be skipped.
      const bool hidden_for_unread = j >= n.op->NumVisibleOutputs(n.params) && k < n.op->NumVisibleOutputs(n.params);
      if (j == k || hidden_for_unread || !written[j]) continue;
      EXPECT_EQ(ToVector(got[j]), ToVector(ref[j]))
          << n.name << ": output " << j << " changes when output " << k << " is not requested";
    }
    ++rep->null_checked;
  }
  for (const auto& [i, o] : n.op->inplace()) {
    if (i >= static_cast<int>(in.size()) || in[i].bytes() != ref[o].bytes()) continue;
    std::vector<Tensor> aliased = RunKernel(g, node, in, write, 0.f, i, o);
    for (int k = 0; k < g.NumOutputs(node); ++k) {  // every output, not only the aliased one
      if (k != o && !written[k]) continue;
      EXPECT_EQ(ToVector(aliased[k]), ToVector(ref[k]))
          << n.name << ": in place " << i << "->" << o << ", output " << k << " differs";
    }
    ++rep->inplace_checked;
  }
}

}  // namespace

OpReport CheckOp(const OpCase& c) {
  OpReport rep;
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  Values x(c.in_shapes.size());
  for (size_t k = 0; k < c.in_shapes.size(); ++k) {
    x[k].resize(c.in_shapes[k].Size());
    if (c.fill)
      c.fill(static_cast<int>(k), &x[k]);
    else
      for (float& v : x[k]) v = uni(gen);
  }

  // Forward against the reference.
  OpGraph fwd = BuildOpGraph(c, false);
  auto forward = [&](const Values& in) {
    Bound b(fwd, in);
    Values out;
    for (size_t k = 0; k < fwd.out_shapes.size(); ++k) out.push_back(ToVector(b.exec->output(k)));
    return out;
  };
  Values y = forward(x);
  Values want = c.reference(x);
  // The reference gives every visible output and may give hidden ones
  // (saved statistics); an op-internal encoding (an argmax workspace) is
  // checked through the gradient instead.
  const OpDef& op = OpRegistry::Get().Require(c.op, [] { return std::string("test"); });
  const Node& op_node = fwd.g.node(fwd.op_node);
  const size_t n_visible = static_cast<size_t>(op.NumVisibleOutputs(op_node.params));
  EXPECT_GE(want.size(), n_visible);
  EXPECT_LE(want.size(), y.size());
  for (size_t k = 0; k < y.size() && k < want.size(); ++k) {
    ExpectNear(y[k], want[k], 1e-4, c.op + " forward output " + std::to_string(k));
    rep.forward_checked += static_cast<int>(y[k].size());
  }

  // Analytic gradients through the op's own gradient nodes.
  OpGraph full = BuildOpGraph(c, true);
  Values r;
  Values vals = x;
  if (!c.loss) {
    for (const Shape& s : fwd.out_shapes) {
      // Hidden outputs exist for the backward pass: the objective ignores them.
      const bool hidden = r.size() >= n_visible;
      r.emplace_back(s.Size());
      for (float& v : r.back()) v = hidden ? 0.f : uni(gen);
      vals.push_back(r.back());
    }
  }
  Bound bound(full, vals);
  const int n_out = static_cast<int>(fwd.out_shapes.size());
  int out_idx = n_out;
  for (size_t k = 0; k < c.in_shapes.size(); ++k) {
    if (!c.differentiable[k]) continue;
    std::vector<float> analytic = ToVector(bound.exec->output(out_idx++));
    // Central differences, with one-sided ones to detect kinks.
    const int64_t n = static_cast<int64_t>(x[k].size());
    const int64_t stride = std::max<int64_t>(1, n / 48);
    for (int64_t i = 0; i < n; i += stride) {
      Values xp = x, xm = x;
      xp[k][i] += static_cast<float>(c.fd_eps);
      xm[k][i] -= static_cast<float>(c.fd_eps);
      double j0 = Objective(c, x, y, r), jp = Objective(c, xp, forward(xp), r), jm = Objective(c, xm, forward(xm), r);
      double right = (jp - j0) / c.fd_eps, left = (j0 - jm) / c.fd_eps, central = (jp - jm) / (2 * c.fd_eps);
      if (std::fabs(right - left) > 10 * c.fd_tol * std::max(1.0, std::fabs(central))) {
        ++rep.kinks_skipped;
        continue;
      }
      EXPECT_NEAR(analytic[i], central, c.fd_tol * std::max(1.0, std::fabs(central)))
          << c.op << ": gradient of input " << k << " element " << i;
      ++rep.grads_checked;
    }
  }

  // Every kernel of the forward and gradient graph: write/add and in place.
  std::vector<Tensor> entry_tensors(full.g.num_entries());
  for (int i = 0; i < full.g.num_nodes(); ++i) {
    const Node& n = full.g.node(i);
    if (n.is_variable()) continue;
    std::vector<Tensor> in;
    for (const Entry& e : n.inputs) {
      const Node& src = full.g.node(e.node);
      if (src.is_variable()) {
        int v = 0;
        while (full.var_shapes[v].first != src.name) ++v;
        in.push_back(bound.vars[v]);
      } else {
        in.push_back(entry_tensors[full.g.EntryId(e)]);
      }
    }
    std::vector<OpReq> write(full.g.NumOutputs(i), OpReq::kWrite);
    std::vector<Tensor> out = RunKernel(full.g, i, in, write, 0.f);
    for (int k = 0; k < full.g.NumOutputs(i); ++k) entry_tensors[full.g.EntryId({i, k})] = out[k];
    CheckKernel(full.g, i, in, &rep);
  }
  return rep;
}

}  // namespace frugal::test

namespace frugal::test {

int64_t CheckOpOnDevice(const OpCase& c, Device dev, double tol) {
  std::mt19937 gen(43);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  const OpGraph og = BuildOpGraph(c, true);
  Values vals(og.var_shapes.size());
  for (size_t k = 0; k < og.var_shapes.size(); ++k) {
    vals[k].resize(og.var_shapes[k].second.Size());
    if (c.fill && k < c.in_shapes.size())
      c.fill(static_cast<int>(k), &vals[k]);
    else
      for (float& v : vals[k]) v = uni(gen);
  }
  const int n_out = static_cast<int>(og.out_shapes.size());
  const int n_visible = og.g.node(og.op_node).op->NumVisibleOutputs(og.g.node(og.op_node).params);
  int64_t compared = 0;
  for (const MemoryStrategy& strategy :
       {MemoryStrategy(MemoryStrategy::kNone), MemoryStrategy(MemoryStrategy::kShare)}) {
    const BoundOn cpu(og, vals, Device{}, strategy), gpu(og, vals, dev, strategy);
    for (size_t k = 0; k < og.g.outputs.size(); ++k) {
      if (static_cast<int>(k) < n_out && static_cast<int>(k) >= n_visible) continue;  // hidden: device formats differ
      const std::string what = Fmt(c.op, " on ", dev.ToString(), " (", strategy.Name(),
                                   "): ", static_cast<int>(k) < n_out ? "output " : "gradient ", k);
      ExpectNear(gpu.outputs[k], cpu.outputs[k], tol, what);
      compared += static_cast<int64_t>(cpu.outputs[k].size());
    }
  }
  return compared;
}

}  // namespace frugal::test
