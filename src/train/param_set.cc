#include "train/param_set.h"

#include <utility>

namespace frugal {

void ParamSet::Add(Param p) {
  const std::string name = p.name;
  all_.emplace(name, std::move(p));
  trained_.clear();
  for (auto& [n, q] : all_)
    if (q.trained()) trained_.push_back(&q);
}

std::map<std::string, Tensor> ParamSet::Values() const {
  std::map<std::string, Tensor> m;
  for (const auto& [name, p] : all_) m[name] = p.w;
  return m;
}

std::map<std::string, Tensor> ParamSet::Grads() const {
  std::map<std::string, Tensor> m;
  for (const Param* p : trained_) m[p->name] = p->g;
  return m;
}

std::map<std::string, Var> ParamSet::GradVars() const {
  std::map<std::string, Var> m;
  for (const Param* p : trained_) m[p->name] = p->g_var;
  return m;
}

std::map<std::string, Tensor> ParamSet::Sums() const {
  std::map<std::string, Tensor> m;
  for (const Param* p : trained_)
    if (p->sum.defined()) m[p->name] = p->sum;
  return m;
}

std::map<std::string, OptState> ParamSet::States() const {
  std::map<std::string, OptState> m;
  for (const Param* p : trained_) m[p->name] = p->state;
  return m;
}

}  // namespace frugal
