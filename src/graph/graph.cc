#include "frugal/graph.h"

#include <glog/logging.h>

#include <algorithm>

#include "frugal/op.h"

namespace frugal {

std::string Node::Where() const {
  std::string loc_text = loc.ToString();
  return Fmt(loc_text.empty() ? "" : loc_text + ": ", "node '", name, "'", op ? Fmt(" (", op->name(), ")") : "");
}

int Graph::AddNode(Node node) {
  int id = num_nodes();
  for (const Entry& e : node.inputs) {
    CHECK(e.node >= 0 && e.node < id) << "node " << node.name << " reads a later node";
    CHECK(e.index < NumOutputs(e.node)) << "node " << node.name << " reads a missing output";
  }
  int n_out = node.op ? node.op->NumOutputs(node.params) : 1;
  nodes_.push_back(std::move(node));
  entry_start_.push_back(entry_start_.back() + n_out);
  return id;
}

int Graph::AddOp(const std::string& op, const std::string& name, const AttrMap& attrs, std::vector<Entry> inputs,
                 SourceLoc loc) {
  Node n;
  n.name = name;
  n.loc = std::move(loc);
  n.op = &OpRegistry::Get().Require(op, [&n] { return n.Where(); });
  n.attrs = attrs;
  AttrReader reader([&n] { return n.Where(); }, attrs);
  n.params = n.op->ParseParams(reader);
  n.inputs = std::move(inputs);
  return AddNode(std::move(n));
}

int Graph::AddVariable(const std::string& name, VarKind kind, const std::string& init) {
  Node n;
  n.name = name;
  n.var = kind;
  n.init = init;
  return AddNode(std::move(n));
}

int Graph::FindNode(const std::string& name) const { return by_name_.Find(nodes_, name); }

int Graph::NameIndex::Find(const std::vector<Node>& nodes, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (; indexed_ < nodes.size(); ++indexed_) first_.emplace(nodes[indexed_].name, static_cast<int>(indexed_));
  auto it = first_.find(name);
  return it == first_.end() ? -1 : it->second;
}

void Graph::InputShapes(int i, std::vector<Shape>* out) const {
  const std::vector<Entry>& in = nodes_[i].inputs;
  out->resize(in.size());
  for (size_t k = 0; k < in.size(); ++k) (*out)[k] = shape(in[k]);
}

void Graph::OutputShapes(int i, std::vector<Shape>* out) const {
  out->resize(NumOutputs(i));
  for (size_t k = 0; k < out->size(); ++k) (*out)[k] = shapes[entry_start_[i] + k];
}

int Graph::NumOutputs(int node) const { return entry_start_[node + 1] - entry_start_[node]; }

Entry Graph::EntryOf(int id) const {
  // entry_start_ is sorted: find the last node whose start <= id.
  auto it = std::upper_bound(entry_start_.begin(), entry_start_.end(), id);
  int node = static_cast<int>(it - entry_start_.begin()) - 1;
  return {node, id - entry_start_[node]};
}

}  // namespace frugal
