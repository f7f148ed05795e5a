// One harness for every op: forward against a reference, finite-difference
// gradient check with kink handling, in-place equivalence, and
// write-versus-add and unrequested outputs for every kernel the op's
// gradient uses.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frugal/graph.h"
#include "frugal/op.h"

namespace frugal::test {

using Values = std::vector<std::vector<float>>;  // one flat vector per tensor

struct OpCase {
  std::string op;
  AttrMap attrs;
  std::vector<Shape> in_shapes;
  // Inputs that get a gradient (others, e.g. labels, are left alone; all
  // false for ops without a gradient).
  std::vector<bool> differentiable;
  // Fills input k (default: uniform in [-1, 1]).
  std::function<void(int k, std::vector<float>*)> fill;
  // The forward result computed the obvious way.
  std::function<Values(const Values& in)> reference;
  // Loss ops only: the scalar the op's gradient differentiates, from its
  // inputs and outputs. Other ops are checked through sum(y * r), r random.
  std::function<double(const Values& in, const Values& out)> loss;
  double fd_eps = 1e-2;
  double fd_tol = 1e-3;  // |analytic - numeric| <= tol * max(1, |numeric|)
};

struct OpReport {
  int forward_checked = 0;  // output elements compared with the reference
  int grads_checked = 0;    // input elements checked by finite differences
  int kinks_skipped = 0;    // elements where the function is not smooth
  int kernels_checked = 0;  // kernels checked for write/add (and in place)
  int inplace_checked = 0;  // in-place pairs checked
  int null_checked = 0;     // outputs run as unrequested (kNull, no tensor)
};

// The graph CheckOp builds: the op applied to variables x0..xn-1 (the
// node "op"), its outputs the graph's outputs; with_gradient, also its
// gradient nodes, which read variables dy0..dym-1 (none for a loss op), and
// the gradients of the differentiable inputs as graph outputs. Shapes
// inferred. Tests that run one kernel by hand find their node here.
struct OpGraph {
  Graph g;
  int op_node = -1;
  std::vector<Entry> in_grads;
  std::vector<Shape> out_shapes;
  std::vector<std::pair<std::string, Shape>> var_shapes;
};
OpGraph BuildOpGraph(const OpCase& c, bool with_gradient);

// A float32 tensor's elements (on the host).
std::vector<float> ToVector(const Tensor& t);

// Runs every check with gtest assertions; returns what was covered so a test
// can require that the checks actually ran.
OpReport CheckOp(const OpCase& c);

// Runs the op and its gradient nodes (fed random output gradients) on the
// CPU and on `dev`, with the same inputs, under both OpReq::kWrite (the plan
// of strategy none) and in-place sharing (strategy share), and expects every
// visible output and every input gradient to agree:
// |dev - cpu| <= tol * max(1, |cpu|). Returns the elements compared.
int64_t CheckOpOnDevice(const OpCase& c, Device dev, double tol);

}  // namespace frugal::test
