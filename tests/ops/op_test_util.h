// Small helpers for the op tests: shapes through InferShapes, reference
// index arithmetic written the obvious way (independent of src/ops), fills.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "frugal/executor.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"
#include "ops/op_harness.h"

namespace frugal::test {

// Requires that the harness really checked something.
inline void ExpectCovered(const OpReport& r, bool grads = true) {
  EXPECT_GT(r.forward_checked, 0);
  if (grads) { EXPECT_GT(r.grads_checked, 0); }
  EXPECT_GT(r.kernels_checked, 0);
}

// Softmax cross-entropy of out[0] (probabilities, rows of in[1]'s labels):
// -sum log p[i, label_i] over rows whose label is not `ignore`, / norm
// ("batch": the rows, "valid": the rows not ignored, "null": 1).
inline double SceLoss(const Values& in, const Values& out, float ignore, const std::string& norm) {
  const int64_t n = static_cast<int64_t>(in[1].size()), k = static_cast<int64_t>(in[0].size()) / n;
  double l = 0;
  int valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (in[1][i] == ignore) continue;
    ++valid;
    l -= std::log(out[0][i * k + static_cast<int64_t>(in[1][i])]);
  }
  return l / (norm == "batch" ? n : norm == "valid" ? std::max(valid, 1) : 1);
}

// The output shapes of op applied to inputs of these shapes (throws Error
// like the real pipeline).
inline std::vector<Shape> OutShapes(const std::string& op, const AttrMap& attrs, const std::vector<Shape>& in) {
  Graph g;
  std::vector<Entry> xs;
  std::vector<std::pair<std::string, Shape>> shapes;
  for (size_t k = 0; k < in.size(); ++k) {
    xs.push_back({g.AddVariable("x" + std::to_string(k), VarKind::kInput), 0});
    shapes.push_back({"x" + std::to_string(k), in[k]});
  }
  int id = g.AddOp(op, "op", attrs, xs);
  InferShapes(&g, shapes);
  std::vector<Shape> out;
  for (int k = 0; k < g.NumOutputs(id); ++k) out.push_back(g.shape({id, k}));
  return out;
}

// Row-major coordinates of linear index i in shape s.
inline std::vector<int64_t> Coords(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.ndim());
  for (int d = s.ndim() - 1; d >= 0; --d) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}

// Linear index in s of coordinates given for a (possibly larger) shape
// aligned from the right; dims of size 1 in s take coordinate 0.
inline int64_t BroadcastOffset(const std::vector<int64_t>& coords, const Shape& s) {
  int64_t off = 0;
  const int shift = static_cast<int>(coords.size()) - s.ndim();
  for (int d = 0; d < s.ndim(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : coords[d + shift]);
  return off;
}

// Values in +-[lo, hi], deterministic, with alternating signs when signed.
inline std::vector<float> AwayFromZero(size_t n, float lo, float hi, bool is_signed, int seed = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    float u = 0.5f + 0.5f * std::sin(1.7f * static_cast<float>(i) + 0.3f * static_cast<float>(seed));
    v[i] = (lo + (hi - lo) * u) * (is_signed && i % 2 ? -1.f : 1.f);
  }
  return v;
}

// Plans, binds and runs a graph whose variables are all given (name ->
// shape and values); returns the graph outputs. Parameter gradients, if the
// graph has them, go to `grads` (by parameter name).
struct GraphRun {
  std::vector<std::vector<float>> outputs;
  std::map<std::string, std::vector<float>> grads;
};

inline GraphRun RunGraph(Graph g, const std::map<std::string, std::pair<Shape, std::vector<float>>>& vars,
                         bool is_train = true, int64_t step = 0, uint64_t seed = 1,
                         MemoryStrategy strategy = MemoryStrategy::kNone, int64_t data_part = 0) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& [name, v] : vars) shapes.push_back({name, v.first});
  InferShapes(&g, shapes);
  MemoryPlan plan = PlanMemory(g, strategy);
  EXPECT_EQ(VerifyPlan(g, plan), "");
  auto engine = MakeEngine("naive");
  Bindings b;
  for (const auto& [name, v] : vars) {
    Tensor t = Tensor::Empty(v.first);
    std::copy(v.second.begin(), v.second.end(), t.f());
    b.vars[name] = t;
  }
  for (int i = 0; i < static_cast<int>(g.grad_of.size()); ++i)
    if (g.grad_of[i].valid()) b.grads[g.node(i).name] = Tensor::Empty(g.shape(g.grad_of[i]));
  Executor exec(g, plan, b, engine.get());
  exec.SetDataPart(data_part);
  exec.Run(is_train, step, seed);
  GraphRun r;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const Tensor& t = exec.output(static_cast<int>(k));
    r.outputs.emplace_back(t.f(), t.f() + t.size());
  }
  for (const auto& [name, t] : b.grads) r.grads[name] = std::vector<float>(t.f(), t.f() + t.size());
  return r;
}

}  // namespace frugal::test
