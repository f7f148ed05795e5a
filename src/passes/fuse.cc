// FuseBnRelu: an activation (OpDef::Activation: relu) whose input is output
// 0 of an op that fuses it (OpDef::FusesActivation: batch_norm), read by
// nothing else, becomes part of that op (its attribute act_type). The fused
// op makes one pass over memory where the pair made two, and its backward
// recomputes the ReLU's mask from x, which batch_norm keeps anyway
// (src/ops/batch_norm.cc). The fused node keeps the batch_norm's name;
// config annotations of either node carry over (checkpoint before mirror),
// and so does the relu's stage mark.
#include <set>

#include "frugal/op.h"
#include "frugal/passes/rewrite.h"

namespace frugal {
namespace {

bool IsFusable(const Graph& g, const Node& relu, const std::vector<int>& readers) {
  if (relu.is_variable()) return false;
  const Entry in = relu.inputs[0];
  const Node& bn = g.node(in.node);
  if (bn.is_variable() || !bn.op->fuses_activation(relu.op->activation()) || in.index != 0) return false;
  if (bn.attrs.count("act_type")) return false;
  return readers[g.EntryId(in)] == 1;
}

Node::Keep Merged(Node::Keep a, Node::Keep b) {
  if (a == Node::Keep::kCheckpoint || b == Node::Keep::kCheckpoint) return Node::Keep::kCheckpoint;
  return a == Node::Keep::kMirror || b == Node::Keep::kMirror ? Node::Keep::kMirror : Node::Keep::kAuto;
}

}  // namespace

Graph FuseBnRelu(const Graph& g) {
  std::vector<int> readers(g.num_entries(), 0);  // nodes and graph outputs reading each entry
  for (const Node& n : g.nodes())
    for (const Entry& e : n.inputs) ++readers[g.EntryId(e)];
  for (const Entry& e : g.outputs) ++readers[g.EntryId(e)];
  std::vector<int> fused_relu(g.num_nodes(), -1);  // batch_norm -> the relu it takes in
  std::set<int> absorbed;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (!IsFusable(g, g.node(i), readers)) continue;
    fused_relu[g.node(i).inputs[0].node] = i;
    absorbed.insert(i);
  }
  if (absorbed.empty()) return g;

  Graph out;
  std::vector<Entry> to(g.num_entries());  // old entry id -> entry of the fused graph
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (absorbed.count(i)) {  // the relu's output is the fused batch_norm's
      to[g.EntryId({i, 0})] = to[g.EntryId(n.inputs[0])];
      continue;
    }
    Node m = n;
    for (Entry& e : m.inputs) e = to[g.EntryId(e)];
    if (fused_relu[i] >= 0) {
      const Node& relu = g.node(fused_relu[i]);
      m.attrs["act_type"] = relu.op->activation();
      AttrReader reader([&m] { return m.Where(); }, m.attrs);
      m.params = m.op->ParseParams(reader);
      m.keep = Merged(n.keep, relu.keep);
      m.stage = n.stage || relu.stage;
      m.fused = relu.name;
    }
    const int id = out.AddNode(std::move(m));
    for (int k = 0; k < g.NumOutputs(i); ++k) to[g.EntryId({i, k})] = {id, k};
  }
  for (const Entry& e : g.outputs) out.outputs.push_back(to[g.EntryId(e)]);
  return out;
}

}  // namespace frugal
