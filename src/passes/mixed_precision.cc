// ToMixedPrecision: a forward graph whose activations are bfloat16 where the
// op has bfloat16 kernels (OpDef::Bf16) and float32 elsewhere, with a cast
// node wherever a value crosses between the two. Parameters, auxiliary
// state and hidden outputs (saved statistics) stay float32: ops such as
// convolution convert a float32 weight on the way into their library call
// (the reorder they make anyway), and their weight gradients come out
// float32, so the optimizer sees float32 master weights and gradients.
// Losses and graph outputs are float32 (a cast where needed), and so is
// the gradient pass's start. bfloat16 keeps float32's exponent range, so no
// loss scaling is needed.
//
// Ops that only move data (Cost::kFree: identity, reshape, flatten) take
// their input's type rather than a cast, and so does an op that decides its
// output types itself (a config's own cast); each node's output types are
// what its op's InferDTypes gives. Each value is cast at most once per
// direction: a bfloat16 activation read by two float32 ops gets one cast,
// which both read.
#include <map>

#include "frugal/op.h"
#include "frugal/passes/rewrite.h"

namespace frugal {

Graph ToMixedPrecision(const Graph& g, DType compute) {
  if (compute == DType::kFloat32) return g;
  FRUGAL_REQUIRE(compute == DType::kBFloat16, "mixed precision computes in bfloat16, not ", DTypeName(compute));
  Graph out;
  std::vector<Entry> to(g.num_entries());                     // old entry id -> entry of the new graph
  std::vector<DType> type(g.num_entries(), DType::kFloat32);  // and its type there
  std::map<std::pair<int, DType>, Entry> casts;               // (old entry id, type) -> its cast
  // Old entry id as type t in the new graph: itself, or its cast.
  auto as = [&](int id, DType t) -> Entry {
    if (type[id] == t) return to[id];
    auto it = casts.find({id, t});
    if (it != casts.end()) return it->second;
    const Entry e = g.EntryOf(id);
    const Node& src = g.node(e.node);
    Node c;
    c.name = Fmt(src.name, e.index > 0 ? Fmt("_out", e.index) : "", t == DType::kBFloat16 ? "_to_bf16" : "_to_fp32");
    c.op = &OpRegistry::Get().Require("cast", [&src] { return src.Where(); });
    c.attrs = {{"dtype", DTypeName(t)}};
    AttrReader reader([&c] { return c.Where(); }, c.attrs);
    c.params = c.op->ParseParams(reader);
    c.inputs = {to[id]};
    c.loc = src.loc;
    const Entry made{out.AddNode(std::move(c)), 0};
    casts[{id, t}] = made;
    return made;
  };
  std::vector<DType> in_t, out_t;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    Node m = n;
    in_t.clear();
    if (!n.is_variable()) {
      bool low = n.op->bf16();
      if (low && n.op->cost() == Cost::kFree) low = type[g.EntryId(n.inputs[0])] == DType::kBFloat16;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const int e = g.EntryId(n.inputs[k]);
        const auto& spec = n.op->inputs();
        const bool param = k < spec.size() && spec[k].made_as != VarKind::kNone;
        const DType want = n.op->has_dtype_rule() ? type[e] : low && !param ? DType::kBFloat16 : DType::kFloat32;
        m.inputs[k] = as(e, want);
        in_t.push_back(want);
      }
    }
    const int id = out.AddNode(std::move(m));
    // The types the op gives its outputs (InferShapes will find the same).
    out_t.assign(g.NumOutputs(i), DType::kFloat32);
    if (!n.is_variable()) {
      DTypeCtx c{out.node(id), in_t, out_t};
      n.op->InferDTypes(c);
    }
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      to[g.EntryId({i, k})] = {id, k};
      type[g.EntryId({i, k})] = out_t[k];
    }
  }
  for (const Entry& e : g.outputs) out.outputs.push_back(as(g.EntryId(e), DType::kFloat32));
  return out;
}

}  // namespace frugal
