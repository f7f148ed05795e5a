// frugal train: fit the config's model and report progress, validation,
// checkpoints and events; with --dist mpi, one rank of a data-parallel run
// started by mpirun.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cstdio>

#include "cli.h"
#include "frugal/dist.h"
#include "frugal/train.h"

DEFINE_string(log_json, "", "write one JSON line per logged interval and per epoch to this file");
DEFINE_string(resume, "", "continue from this checkpoint (or the latest one in this directory)");
DEFINE_string(weights, "", "initialise parameters by name from this checkpoint (fine-tuning)");
DEFINE_string(tensorboard, "", "write TensorBoard scalar events into this directory");
DEFINE_string(profile, "", "write a Chrome trace (JSON) of the ops of the first --profile-steps steps");
DEFINE_int32(profile_steps, 3, "steps traced by --profile");
DEFINE_bool(progress, true, "on a terminal, one live line: epoch, batch, samples/s, metrics, lr, ETA");
DEFINE_string(dist, "", "data-parallel training across processes: mpi (run under mpirun)");
DEFINE_double(dist_timeout, 60,
              "--dist: seconds a collective may wait for the other ranks before every rank stops with an error");
DEFINE_int64(dist_check_every, 100, "--dist: compare parameter checksums across ranks every K updates (0: never)");
DEFINE_bool(dist_scale_lr, false, "--dist: multiply solver.lr by the number of ranks (warm-up still applies)");
DEFINE_string(dist_bucket, "1MiB", "--dist: gradient bytes per all-reduce");

namespace frugal::cli {
namespace {

TrainOptions OptionsFromFlags() {
  TrainOptions opts;
  opts.log_json = FLAGS_log_json;
  opts.resume = FLAGS_resume;
  opts.weights = FLAGS_weights;
  opts.tensorboard = FLAGS_tensorboard;
  opts.profile = FLAGS_profile;
  opts.profile_steps = FLAGS_profile_steps;
  if (FLAGS_progress && isatty(fileno(stderr))) opts.progress = stderr;
  return opts;
}

// One rank of `mpirun -np N frugal train --dist mpi`: rank 0 logs, writes
// events and checkpoints; the others only warn. An error on any rank ends
// every rank.
int TrainDistributed(ConfigFile cfg, TrainOptions opts) {
  CommunicatorOptions co;
  co.timeout_s = FLAGS_dist_timeout;
  std::unique_ptr<Communicator> comm = MakeCommunicator(FLAGS_dist, co);
  const int rank = comm->rank(), size = comm->size();
  try {
    if (rank != 0) {
      FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);
      opts.log_json = opts.tensorboard = opts.profile = "";
      opts.progress = nullptr;
      cfg.net.mutable_solver()->set_checkpoint_dir("");
    }
    if (FLAGS_dist_scale_lr) {
      const float lr = cfg.net.solver().lr();
      cfg.net.mutable_solver()->set_lr(lr * static_cast<float>(size));
      LOG(INFO) << "--dist-scale-lr: learning rate " << lr << " x " << size << " ranks = " << lr * size;
    }
    opts.dist.comm = comm.get();
    opts.dist.check_every = FLAGS_dist_check_every;
    opts.dist.bucket_bytes = ParseBytes(FLAGS_dist_bucket);
    frugal::Train(cfg, opts);
  } catch (const Error& e) {
    comm->Abort(e.what());
  }
  comm->Finish();
  return 0;
}

}  // namespace

int Train() {
  ConfigFile cfg = LoadConfigFromFlags();
  FRUGAL_REQUIRE(DeviceFromFlags().type == DeviceType::kCPU, "--gpus: frugal train runs on the CPU only so far (the ",
                 "GPU optimizer updates and batch feed are not built); frugal time --gpus runs a training step on the GPU");
  TrainOptions opts = OptionsFromFlags();
  if (!FLAGS_dist.empty()) return TrainDistributed(std::move(cfg), std::move(opts));
  frugal::Train(cfg, opts);
  return 0;
}

}  // namespace frugal::cli
