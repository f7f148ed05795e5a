// gradient: reverse-mode differentiation as a graph rewrite. Walks the forward
// nodes from last to first; a node gets gradient nodes when it lies on a path
// from a parameter to a loss head. The gradient of an entry read by several
// nodes is the sum of its parts, folded in as each part appears (so a weight
// shared by the T steps of an unrolled RNN holds one running sum, not T
// parts waiting for one add_n); an output that gets no gradient while
// other outputs of its node do is given zeros_like.
//
// Recomputation: a forward result whose keep level is not 0 is not read by
// the backward pass. When a gradient node needs it, a mirror (a copy of the
// producing node, Node::mirror_of) is added just before that gradient node,
// reading the mirrors of its own dropped inputs back to the nearest kept
// results. A mirror is cached for later readers when its level is at most
// every level between it and the request (the running minimum): for sqrt and
// drop_cheap plans everything needed is cached (one recomputation per node);
// for recursive plans only the checkpoints that start later recomputations.
// An op may have its mirror read small outputs of the original instead of
// recomputing them (OpDef::MirrorReads: batch_norm's statistics).
#include <glog/logging.h>

#include <algorithm>

#include "frugal/op.h"
#include "frugal/passes/gradient.h"

namespace frugal {
namespace {

// needs[i]: node i depends on a parameter (so gradients must flow into it).
std::vector<bool> DependsOnParams(const Graph& g) {
  std::vector<bool> needs(g.num_nodes(), false);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    needs[i] = n.var == VarKind::kParam;
    for (const Entry& e : n.inputs) needs[i] = needs[i] || needs[e.node];
  }
  return needs;
}

// Adds one part to the running sum of an entry's gradient (invalid: none
// yet). The sum runs left to right in the order parts appear, as add_n of
// all parts would.
void AddPart(Graph& g, const std::string& name, Entry* sum, Entry part) {
  if (!sum->valid()) {
    *sum = part;
    return;
  }
  *sum = {g.AddOp("add_n", name + "_grad_sum", {{"num_args", "2"}}, {*sum, part}), 0};
}

// Zeros in the shape of output k of forward node i: the gradient of an
// output nobody differentiates. It reads nothing, so the unused output is not
// kept alive for its shape.
Entry ZerosLike(Graph& g, int i, int k) {
  int id =
      g.AddOp("zeros_like", Fmt(g.node(i).name, "_out", k, "_zero_grad"), {{"like_output", std::to_string(k)}}, {});
  g.mutable_node(id).fwd = i;
  return {id, 0};
}

class Mirrors {
 public:
  Mirrors(Graph* g, const KeepLevels& keep)
      : g_(*g), keep_(keep), cache_(g->num_nodes(), -1), made_(g->num_nodes(), -1), request_of_(g->num_nodes(), -1) {}

  // An entry holding forward entry e's value at this point of the backward
  // pass: e itself if kept, else a mirror. The mirrors one request needs are
  // added in forward order, so a recomputation runs as the forward pass ran:
  // a cell's input projection is made just before the cell, not before the
  // whole chain of earlier steps that the cell's other input reaches back
  // through (which kept one projection per step alive at once).
  Entry Get(Entry e) {
    if (keep_.empty() || keep_[e.node] == 0) return e;
    if (cache_[e.node] >= 0) return {cache_[e.node], e.index};
    ++requests_;
    request_.clear();
    Collect(e.node, kDropped);
    std::sort(request_.begin(), request_.end());
    for (const auto& [p, cached] : request_) {
      Node m = g_.node(p);  // a copy: same op, params, attrs, source location
      for (Entry& in : m.inputs) in = Made(in);
      for (auto [in, out] : m.op->mirror_reads()) m.inputs[in] = {p, out};
      m.name = g_.node(p).name + "@recompute";
      m.mirror_of = p;
      const int id = g_.AddNode(std::move(m));
      made_[p] = id;
      if (cached) cache_[p] = id;
    }
    return {made_[e.node], e.index};
  }

 private:
  // The nodes to recompute for one request (request_, forward node and
  // whether its mirror is cached), each once (a node reached along two
  // paths, a residual add, is recomputed once), down to the kept results
  // and the cached mirrors. A mirror is cached when its level is at most
  // every level between it and the request (min_level, on the path that
  // first reaches it).
  void Collect(int p, int min_level) {
    if (keep_[p] == 0 || cache_[p] >= 0 || request_of_[p] == requests_) return;
    request_of_[p] = requests_;
    request_.emplace_back(p, keep_[p] <= min_level);
    const int below = std::min(min_level, keep_[p]);
    for (const Entry& in : g_.node(p).inputs) Collect(in.node, below);
  }

  // Input `in` of a mirror: kept, made by this request, or cached.
  Entry Made(Entry in) const {
    if (keep_[in.node] == 0) return in;
    const int id = request_of_[in.node] == requests_ ? made_[in.node] : cache_[in.node];
    CHECK_GE(id, 0) << "mirror of " << g_.node(in.node).name << " read before it is made";
    return {id, in.index};
  }

  Graph& g_;
  const KeepLevels& keep_;
  std::vector<int> cache_;  // forward node -> its cached mirror
  // The request being made: its nodes, and per forward node the mirror the
  // last request that reached it made (request_of_: that request's number).
  std::vector<std::pair<int, bool>> request_;
  std::vector<int> made_, request_of_;
  int requests_ = 0;
};

}  // namespace

void Gradient(Graph* graph, const KeepLevels& keep) {
  Graph& g = *graph;
  CHECK(g.grad_of.empty()) << "gradient pass run twice";
  CHECK(keep.empty() || static_cast<int>(keep.size()) == g.num_nodes()) << "one keep level per forward node";
  const int num_fwd = g.num_nodes();
  g.EndForward();
  // Room for a guess of the nodes to come, so that few are moved: gradient
  // nodes and sums (the 4x1024 LSTM: 2.65 per forward node) and a mirror per
  // dropped node.
  g.Reserve(3 * num_fwd + static_cast<int>(keep.size() - std::count(keep.begin(), keep.end(), 0)));
  std::vector<bool> needs = DependsOnParams(g);
  Mirrors mirrors(&g, keep);
  // grad[entry id]: the sum of the gradient parts of that forward entry so far.
  std::vector<Entry> grad(g.num_entries());
  bool has_loss = false;
  for (int i = num_fwd - 1; i >= 0; --i) {
    // Copies, not references: adding nodes may move the node vector.
    const OpDef* op = g.node(i).op;
    const std::string name = g.node(i).name;
    if (!op || !needs[i] || !op->has_gradient()) continue;
    GradCtx c{i, g.node(i).inputs, {}, {}};
    bool any = op->is_loss();
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      c.outputs.push_back({i, k});
      c.out_grads.push_back(grad[g.EntryId({i, k})]);
      any = any || c.out_grads.back().valid();
    }
    has_loss = has_loss || op->is_loss();
    if (!any) continue;  // nothing downstream of this node reaches a loss
    // Some outputs have a gradient and others not (an unused part of a
    // split): the missing ones are zeros. Hidden outputs never get one.
    for (int k = 0; !op->is_loss() && k < op->NumVisibleOutputs(g.node(i).params); ++k)
      if (!c.out_grads[k].valid()) c.out_grads[k] = ZerosLike(g, i, k);
    // What the gradient reads of the forward pass, recomputed where dropped.
    for (const BackwardRead& r : op->backward_reads()) {
      if (r.kind == BackwardRead::kInput && r.index < static_cast<int>(c.inputs.size()))
        c.inputs[r.index] = mirrors.Get(c.inputs[r.index]);
      if (r.kind == BackwardRead::kOutput) c.outputs[r.index] = mirrors.Get(c.outputs[r.index]);
    }
    std::vector<Entry> in_grads = op->BuildGradient(g, c);
    const std::vector<Entry> inputs = g.node(i).inputs;
    CHECK_EQ(in_grads.size(), inputs.size()) << op->name() << ": gradient count";
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (in_grads[k].valid() && needs[inputs[k].node])
        AddPart(g, g.node(inputs[k].node).name, &grad[g.EntryId(inputs[k])], in_grads[k]);
    }
  }
  FRUGAL_REQUIRE(has_loss, "the graph has no loss op on a path from a parameter (add e.g. softmax_cross_entropy)");
  std::vector<Entry> grad_of(num_fwd);
  for (int i = 0; i < num_fwd; ++i) {
    if (g.node(i).var == VarKind::kParam) grad_of[i] = grad[g.EntryId({i, 0})];
  }
  grad_of.resize(g.num_nodes());
  g.grad_of = std::move(grad_of);
}

}  // namespace frugal
