// frugal train: fit the config's model and report per-epoch metrics.
#include <gflags/gflags.h>

#include "cli.h"
#include "frugal/train.h"

DEFINE_string(log_json, "", "write one JSON line per epoch to this file");

namespace frugal::cli {

int Train() {
  ConfigFile cfg = LoadConfigFromFlags();
  TrainOptions opts;
  opts.log_json = FLAGS_log_json;
  frugal::Train(cfg, opts);
  return 0;
}

}  // namespace frugal::cli
