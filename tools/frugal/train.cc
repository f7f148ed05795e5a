// frugal train: fit the config's model and report progress, validation,
// checkpoints and events.
#include <gflags/gflags.h>

#include "cli.h"
#include "frugal/train.h"

DEFINE_string(log_json, "", "write one JSON line per logged interval and per epoch to this file");
DEFINE_string(resume, "", "continue from this checkpoint (or the latest one in this directory)");
DEFINE_string(weights, "", "initialise parameters by name from this checkpoint (fine-tuning)");
DEFINE_string(tensorboard, "", "write TensorBoard scalar events into this directory");
DEFINE_string(profile, "", "write a Chrome trace (JSON) of the ops of the first --profile-steps steps");
DEFINE_int32(profile_steps, 3, "steps traced by --profile");

namespace frugal::cli {

int Train() {
  ConfigFile cfg = LoadConfigFromFlags();
  FRUGAL_REQUIRE(DeviceFromFlags().type == DeviceType::kCPU, "--gpus: frugal train runs on the CPU only so far (the ",
                 "GPU optimizer updates and batch feed are not built); frugal time --gpus runs a training step on the GPU");
  TrainOptions opts;
  opts.log_json = FLAGS_log_json;
  opts.resume = FLAGS_resume;
  opts.weights = FLAGS_weights;
  opts.tensorboard = FLAGS_tensorboard;
  opts.profile = FLAGS_profile;
  opts.profile_steps = FLAGS_profile_steps;
  frugal::Train(cfg, opts);
  return 0;
}

}  // namespace frugal::cli
