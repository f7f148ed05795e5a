// The update graphs of a model (Model::update, Model::accumulate in
// frugal/train.h), built from its training graph and the solver.
#pragma once

#include <string>

#include "frugal/train.h"

namespace frugal {

// Fills m->optimizer, m->slices (for m->shard), m->update and m->accumulate
// with their plans, for the
// trained parameters of m->train (those with a gradient). path names the
// config in errors (the solver's fields are checked).
void BuildUpdateGraphs(const config::Solver& sc, const std::string& path, Model* m);

}  // namespace frugal
