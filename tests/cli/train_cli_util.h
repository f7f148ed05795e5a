// The toy run the `frugal train` CLI tests share (train_cli_test.cc,
// plan_cli_test.cc): 4x4 images of four classes in IDX files, a small MLP
// config over them, and reading the one error line of a failed run. In a
// namespace of its own: the tests' unity build puts other files' helpers of
// the same names beside these.
#pragma once

#include <string>

#include "test_util.h"

namespace frugal::test::train_cli {

// 200 training and 40 validation samples in dir (batches of 8: 25 updates
// per epoch); returns dir's path.
std::string WriteToy(const TempDir& dir);

// Nodes fc1, relu1 and fc2 (4 outputs).
extern const char* const kMlp;

// The toy config with the given nodes (ending in a node "fc2" of 4 outputs)
// and solver fields.
std::string ToyConfig(const TempDir& dir, const std::string& solver, const std::string& nodes = kMlp);

// The "frugal: error: ..." line of a run's output, checking that it is one
// line with no CHECK failure or stack dump.
std::string ErrorLine(const RunResult& r);

// The last "val_accuracy" of a --log-json file; -1 where there is none.
double LastValAccuracy(const std::string& log_path);

// A checkpoint of the toy model after one epoch (its config written to
// dir/toy.prototxt, *cfg its path), in dir/a.
std::string TrainOneEpoch(const TempDir& dir, std::string* cfg);

}  // namespace frugal::test::train_cli
