// infer-shape: one sweep in topological order. Each op sees its input shapes
// (and may complete a parameter's shape) and sets its output shapes; backward
// nodes also see the shapes of the forward node they differentiate. Element
// types follow in the same sweep (OpDef::InferDTypes): variables are float32.
#include <glog/logging.h>

#include "frugal/op.h"
#include "frugal/passes/shapes.h"

namespace frugal {

namespace {

// Variables' declared shapes, and the given inputs' (the first node of each
// name, found by a scan: FindNode would index every name of a training
// graph that a plan search builds only to measure).
void SetKnownShapes(Graph& g, const std::vector<std::pair<std::string, Shape>>& input_shapes) {
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).is_variable()) g.shapes[g.EntryId({i, 0})] = g.node(i).shape;
  std::vector<int> input_node(input_shapes.size(), -1);
  size_t found = 0;
  for (int i = 0; i < g.num_nodes() && found < input_shapes.size(); ++i)
    for (size_t k = 0; k < input_shapes.size(); ++k)
      if (input_node[k] < 0 && g.node(i).name == input_shapes[k].first) input_node[k] = i, ++found;
  for (size_t k = 0; k < input_shapes.size(); ++k) {
    FRUGAL_REQUIRE(input_node[k] >= 0, "no input named '", input_shapes[k].first, "' in the graph");
    g.shapes[g.EntryId({input_node[k], 0})] = input_shapes[k].second;
  }
}

// Every shape's element count must fit int64 (Size throws) and its bytes
// kMaxTensorBytes: found here, the error names the node.
void CheckTensorBytes(const Node& n, const std::vector<Shape>& in, const std::vector<DType>& in_t,
                      const std::vector<Shape>& out, const std::vector<DType>& out_t) {
  for (const std::vector<Shape>* shapes : {&in, &out})
    for (size_t k = 0; k < shapes->size(); ++k) {
      const Shape& sh = (*shapes)[k];
      if (!sh.known()) continue;
      const int64_t bytes = sh.Size() * DTypeBytes(shapes == &in ? in_t[k] : out_t[k]);
      FRUGAL_REQUIRE(bytes <= kMaxTensorBytes, n.Where(), ": ", shapes == &in ? "input " : "output ", k, " ", sh,
                     " would hold ", HumanBytes(bytes), ", more than one tensor may (", HumanBytes(kMaxTensorBytes),
                     "); use a smaller batch or input size");
    }
}

// Inputs the op completed (parameter shapes) flow back to their variables;
// an input it needs in another shape is an error naming the node.
void FlowBack(Graph& g, const Node& n, const std::vector<Shape>& in) {
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    Shape& s = g.shapes[g.EntryId(n.inputs[k])];
    if (!s.known()) {
      FRUGAL_REQUIRE(in[k].known(), n.Where(), ": cannot infer the shape of input '", g.node(n.inputs[k].node).name,
                     "'");
      s = in[k];
    } else if (s != in[k]) {
      throw Error(
          Fmt(n.Where(), ": input '", g.node(n.inputs[k].node).name, "' has shape ", s, " but the op needs ", in[k]));
    }
  }
}

}  // namespace

void InferShapes(Graph* graph, const std::vector<std::pair<std::string, Shape>>& input_shapes) {
  Graph& g = *graph;
  g.shapes.assign(g.num_entries(), Shape());
  g.dtypes.assign(g.num_entries(), DType::kFloat32);
  g.layouts.clear();
  SetKnownShapes(g, input_shapes);
  std::vector<Shape> in, out, fwd_in, fwd_out;
  std::vector<DType> in_t, out_t, fwd_in_t, fwd_out_t;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_variable()) continue;
    g.InputShapes(i, &in);
    out.assign(g.NumOutputs(i), Shape());
    in_t.clear();
    for (const Entry& e : n.inputs) in_t.push_back(g.dtype(e));
    out_t.assign(g.NumOutputs(i), DType::kFloat32);
    ShapeCtx ctx{n, in, out};
    DTypeCtx tctx{n, in_t, out_t};
    if (n.fwd >= 0) {
      const Node& f = g.node(n.fwd);
      g.InputShapes(n.fwd, &fwd_in);
      fwd_in_t.clear();
      for (const Entry& e : f.inputs) fwd_in_t.push_back(g.dtype(e));
      g.OutputShapes(n.fwd, &fwd_out);
      fwd_out_t.clear();
      for (int k = 0; k < g.NumOutputs(n.fwd); ++k) fwd_out_t.push_back(g.dtype({n.fwd, k}));
      ctx.fwd_in = &fwd_in;
      ctx.fwd_out = &fwd_out;
      tctx.fwd = &f;
      tctx.fwd_in = &fwd_in_t;
      tctx.fwd_out = &fwd_out_t;
    }
    CHECK(n.op->infer_shape()) << n.op->name() << " has no shape inference";
    FRUGAL_REQUIRE(static_cast<int>(n.inputs.size()) == n.op->NumInputs(n.params), n.Where(), ": has ", n.inputs.size(),
                   " inputs but the op takes ", n.op->NumInputs(n.params));
    try {
      n.op->infer_shape()(ctx);
      n.op->InferDTypes(tctx);
      CheckTensorBytes(n, in, in_t, out, out_t);
    } catch (const Error& e) {  // one that does not name the node yet (a shape too large to count)
      const std::string where = n.Where();
      if (std::string(e.what()).rfind(where, 0) == 0) throw;
      throw Error(Fmt(where, ": ", e.what()));
    }
    FlowBack(g, n, in);
    for (int k = 0; k < g.NumOutputs(i); ++k) {
      CHECK(out[k].known()) << n.Where() << ": output " << k << " shape not inferred";
      g.shapes[g.EntryId({i, k})] = out[k];
      g.dtypes[g.EntryId({i, k})] = out_t[k];
    }
  }
}

}  // namespace frugal
