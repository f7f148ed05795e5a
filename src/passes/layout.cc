// ChooseLayouts: channels-last (NHWC) activations between the ops that take
// them, so that oneDNN's convolutions read and write them without the
// reorders to and from plain NCHW that every call paid otherwise (they were
// 36% of a float32 ResNet-56 step's convolution time and 57% of a bfloat16
// one's: docs/benchmarks.md).
//
// Entries are grouped so that values that must share a layout get one:
//   - the tied slots of one node (OpDef::ChannelsLast with tied: relu,
//     add_n, batch_norm and their gradients), which read and write alike;
//   - a recomputed copy's outputs with the outputs it recomputes (same
//     kernels on the same bytes: the same bits);
//   - a one-node gradient's outputs with the forward inputs they belong to,
//     and its output-gradient inputs with the forward outputs (dx with x, dy
//     with y: max pooling's argmax is laid out as the forward's y).
// A group is channels-last when every member is a 4-D activation that is
// more than a vector (C > 1 and H W > 1: otherwise both orders are the same
// bytes, and the entry stays plain), none is bound from outside (variables,
// parameter gradients) or a graph output, every node slot reading or
// writing a member takes channels-last, and some slot is untied
// (convolution, pooling): only there does a reorder go away.
#include <numeric>

#include "frugal/op.h"
#include "frugal/passes/shapes.h"

namespace frugal {
namespace {

class Groups {
 public:
  explicit Groups(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int e) {
    while (parent_[e] != e) e = parent_[e] = parent_[parent_[e]];
    return e;
  }
  void Join(int a, int b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<int> parent_;
};

bool MoreThanAVector(const Shape& s) { return s.ndim() == 4 && s[1] > 1 && s[2] * s[3] > 1; }

}  // namespace

void ChooseLayouts(Graph* graph) {
  Graph& g = *graph;
  const int num = g.num_entries();
  std::vector<bool> candidate(num);
  for (int e = 0; e < num; ++e) candidate[e] = MoreThanAVector(g.shapes[e]);
  Groups groups(num);
  auto join = [&](int a, int b) {
    if (candidate[a] && candidate[b] && g.shapes[a] == g.shapes[b]) groups.Join(a, b);
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    const OpDef& op = *n.op;
    if (op.nhwc_tied()) {
      int first = -1;
      auto tie = [&](int e) {
        if (!candidate[e]) return;
        if (first < 0) first = e;
        join(first, e);
      };
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (op.nhwc_input(static_cast<int>(k))) tie(g.EntryId(n.inputs[k]));
      for (int k = 0; k < g.NumOutputs(i); ++k)
        if (op.nhwc_output(k)) tie(g.EntryId({i, k}));
    }
    if (n.mirror_of >= 0) {
      for (int k = 0; k < g.NumOutputs(i); ++k) join(g.EntryId({i, k}), g.EntryId({n.mirror_of, k}));
    }
    const Node* f = n.fwd >= 0 ? &g.node(n.fwd) : nullptr;
    if (f && !f->is_variable() && f->op->backward_op() == op.name()) {  // a one-node gradient
      for (int k = 0; k < g.NumOutputs(i) && k < static_cast<int>(f->inputs.size()); ++k)
        join(g.EntryId({i, k}), g.EntryId(f->inputs[k]));
      const auto& reads = f->op->backward_reads();
      for (size_t k = 0; k < n.inputs.size() && k < reads.size(); ++k)
        if (reads[k].kind == BackwardRead::kOutGrad) join(g.EntryId(n.inputs[k]), g.EntryId({n.fwd, reads[k].index}));
    }
  }
  // Per group root: whether anything forbids channels-last, and whether
  // an untied slot would gain from it.
  std::vector<bool> forbidden(num, false), gains(num, false);
  auto note = [&](int e, bool allowed, bool untied) {
    if (!candidate[e]) return;
    const int r = groups.Find(e);
    if (!allowed) forbidden[r] = true;
    if (allowed && untied) gains[r] = true;
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) {
      note(g.EntryId({i, 0}), false, false);
      continue;
    }
    const bool untied = !n.op->nhwc_tied();
    for (size_t k = 0; k < n.inputs.size(); ++k)
      note(g.EntryId(n.inputs[k]), n.op->nhwc_input(static_cast<int>(k)), untied);
    for (int k = 0; k < g.NumOutputs(i); ++k) note(g.EntryId({i, k}), n.op->nhwc_output(k), untied);
  }
  for (const Entry& e : g.outputs) note(g.EntryId(e), false, false);
  for (const Entry& e : g.grad_of)
    if (e.valid()) note(g.EntryId(e), false, false);
  g.layouts.assign(num, Layout::kPlain);
  for (int e = 0; e < num; ++e) {
    const int r = candidate[e] ? groups.Find(e) : -1;
    if (r >= 0 && !forbidden[r] && gains[r]) g.layouts[e] = Layout::kNhwc;
  }
}

}  // namespace frugal
