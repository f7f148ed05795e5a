// The graph IR that every pass reads: nodes in topological (= execution)
// order, each an op application or a variable, connected by entries (one
// output of one node). Typed per-entry attributes (shapes) and the gradient
// bookkeeping live beside the nodes.
#pragma once

#include <any>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "frugal/base.h"

namespace frugal {

class OpDef;

// One output of one node.
struct Entry {
  int node = -1;
  int index = 0;
  bool valid() const { return node >= 0; }
  bool operator==(const Entry& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Entry& o) const { return !(*this == o); }
};

// Attributes as written in the config; parsed once into Node::params.
using AttrMap = std::map<std::string, std::string>;

enum class VarKind : uint8_t {
  kNone,   // an op node
  kInput,  // fed from data each step (data, label)
  kParam,  // learnable, updated by the optimizer
  kAux,    // state an op updates itself (BatchNorm moving statistics)
  kState,  // optimizer state and iter_size gradient sums (the update graph's)
};

struct Node {
  std::string name;
  const OpDef* op = nullptr;  // nullptr for variables
  VarKind var = VarKind::kNone;
  AttrMap attrs;    // kept for printing and for checkpoints of the config
  std::any params;  // the op's typed params, parsed from attrs by the op
  std::vector<Entry> inputs;
  int fwd = -1;        // backward nodes: the forward node they differentiate
  int mirror_of = -1;  // recomputed copies: the forward node they recompute
  // Config annotations for the recompute planner.
  enum class Keep : uint8_t { kAuto, kCheckpoint, kMirror } keep = Keep::kAuto;
  bool stage = false;              // a segment boundary for sqrt / logn plans
  std::string init;                // params: initializer spec ("xavier", "msra", ...; frugal/init.h)
  float lr_mult = 1, wd_mult = 1;  // params: multipliers of the solver's lr and weight decay
  Shape shape;                     // variables: the shape declared in the config, if any
  SourceLoc loc;
  std::string fused;  // the node fused into this one (FuseBnRelu's relu), by its config name

  bool is_variable() const { return op == nullptr; }
  // The name, with a fused node's: "bn1 (+relu1)".
  std::string Label() const { return fused.empty() ? name : name + " (+" + fused + ")"; }
  // "file:line: node 'fc1' (fully_connected)" for error messages.
  std::string Where() const;
};

class Graph {
 public:
  // Appends a node; its inputs must refer to earlier nodes. Returns its index.
  int AddNode(Node node);
  // Appends an op node parsed from attrs (throws Error naming the node on a
  // bad attribute). The op must be registered.
  int AddOp(const std::string& op, const std::string& name, const AttrMap& attrs, std::vector<Entry> inputs,
            SourceLoc loc = {});
  int AddVariable(const std::string& name, VarKind kind, const std::string& init = "");
  // Room for this many nodes, so that adding them moves none.
  void Reserve(int num_nodes) { nodes_.reserve(num_nodes); }

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int i) const { return nodes_[i]; }
  Node& mutable_node(int i) { return nodes_[i]; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int FindNode(const std::string& name) const;  // -1 if absent

  int NumOutputs(int node) const;
  // Entries are numbered densely: node by node, output by output.
  int EntryId(Entry e) const { return entry_start_[e.node] + e.index; }
  int num_entries() const { return entry_start_.back(); }
  Entry EntryOf(int id) const;

  // Graph outputs (what the user sees: predictions, losses).
  std::vector<Entry> outputs;
  // Nodes [0, num_forward()) are the forward graph; the rest were added by
  // the gradient pass, which calls EndForward() before adding them.
  int num_forward() const { return num_forward_ < 0 ? num_nodes() : num_forward_; }
  void EndForward() { num_forward_ = num_nodes(); }
  // Set by the infer-shape pass: one shape and one element type per entry.
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  // Set by ChooseLayouts (CPU graphs), after shapes: how each entry's bytes
  // are ordered. Empty (InferShapes clears it): every entry plain.
  std::vector<Layout> layouts;
  // Set by the gradient pass: for each node, the entry holding the gradient
  // of its output 0 (meaningful for parameters), or invalid.
  std::vector<Entry> grad_of;

  const Shape& shape(Entry e) const { return shapes[EntryId(e)]; }
  // The shapes of node i's inputs (outputs) into *out, whose storage is
  // reused: a plan reads them for every node of every candidate graph.
  void InputShapes(int i, std::vector<Shape>* out) const;
  void OutputShapes(int i, std::vector<Shape>* out) const;
  DType dtype(Entry e) const { return dtypes[EntryId(e)]; }
  Layout layout(int id) const { return layouts.empty() ? Layout::kPlain : layouts[id]; }
  Layout layout(Entry e) const { return layout(EntryId(e)); }
  // The bytes of entry id's tensor (shapes and types inferred).
  int64_t EntryBytes(int id) const { return shapes[id].Size() * DTypeBytes(dtypes[id]); }
  int64_t EntryBytes(Entry e) const { return EntryBytes(EntryId(e)); }

 private:
  // The first node of each name, indexed when a name is looked up (a plan
  // search builds dozens of training graphs of 10^5 nodes and looks up none
  // of their names); a copy or a moved-to graph indexes anew.
  class NameIndex {
   public:
    NameIndex() = default;
    NameIndex(const NameIndex&) {}
    NameIndex& operator=(const NameIndex&) {
      std::lock_guard<std::mutex> lock(mu_);
      first_.clear();
      indexed_ = 0;
      return *this;
    }
    int Find(const std::vector<Node>& nodes, const std::string& name) const;

   private:
    mutable std::mutex mu_;
    mutable std::unordered_map<std::string, int> first_;
    mutable size_t indexed_ = 0;  // nodes [0, indexed_) are in first_
  };

  std::vector<Node> nodes_;
  NameIndex by_name_;
  std::vector<int> entry_start_{0};
  int num_forward_ = -1;
};

}  // namespace frugal
