// frugal test: evaluate a checkpoint on its config's validation data (the
// config the checkpoint holds, or --config).
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/checkpoint.h"
#include "frugal/train.h"

DEFINE_string(checkpoint, "",
              "test, export-onnx, predict: the checkpoint whose parameters to evaluate, export or run (or the latest "
              "one in this directory); without --config, with the config it holds");

namespace frugal::cli {

int Test() {
  FRUGAL_REQUIRE(!FLAGS_checkpoint.empty(), "no checkpoint given (use --checkpoint FILE or DIR)");
  const std::string checkpoint = ResolveCheckpoint(FLAGS_checkpoint);
  const ConfigFile cfg = LoadConfigFor(checkpoint);
  MetricSet m = frugal::Test(cfg, checkpoint);
  std::printf("%s: %s (%lld samples)\n", checkpoint.c_str(), m.ToString("test-").c_str(),
              static_cast<long long>(m.count()));
  return 0;
}

}  // namespace frugal::cli
