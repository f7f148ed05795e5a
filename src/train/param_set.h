// The parameters of a bound model, one record each: the values, and for a
// trained parameter its gradient, the gradient's sum over iter_size batches,
// the optimizer state, with the engine variables that order
// every access to them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/optimizer.h"
#include "frugal/tensor.h"

namespace frugal {

struct Param {
  std::string name;
  Tensor w;
  Var w_var = -1;
  // Set only for a parameter that gets a gradient (is trained).
  Tensor g;
  Tensor sum;  // iter_size > 1 only
  Var g_var = -1;
  OptState state;
  bool trained() const { return g_var >= 0; }
};

// Records by name: every loop over them (updates, the gradient combination,
// checkpoints) runs in name order. Records do not move once added.
class ParamSet {
 public:
  void Add(Param p);
  const std::vector<Param*>& trained() const { return trained_; }
  const std::map<std::string, Param>& all() const { return all_; }

  // Views by name, for the parts that take maps (executor bindings,
  // checkpoints, data-parallel): every value; the trained ones' gradients,
  // their variables, sums and optimizer states.
  std::map<std::string, Tensor> Values() const;
  std::map<std::string, Tensor> Grads() const;
  std::map<std::string, Var> GradVars() const;
  std::map<std::string, Tensor> Sums() const;  // empty with iter_size 1
  std::map<std::string, OptState> States() const;

 private:
  std::map<std::string, Param> all_;
  std::vector<Param*> trained_;  // in name order
};

}  // namespace frugal
