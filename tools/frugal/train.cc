// frugal train: fit the config's model and report progress, validation,
// checkpoints and events; with --dist mpi, one rank of a data-parallel run
// started by mpirun.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cstdio>

#include "cli.h"
#include "frugal/checkpoint.h"
#include "frugal/dist.h"
#include "frugal/train.h"

DEFINE_string(log_json, "", "write one JSON line per logged interval and per epoch to this file");
DEFINE_string(resume, "",
              "continue from this checkpoint (or the latest one in this directory); without --config, with the "
              "config it holds");
DEFINE_string(weights, "",
              "initialise parameters by name from this checkpoint (or the latest one in this directory; "
              "fine-tuning)");
DEFINE_string(tensorboard, "", "write TensorBoard scalar events into this directory");
DEFINE_string(profile, "",
              "write a Chrome trace (JSON) of the ops of the first --profile-steps steps (with --dist, also the "
              "gradient all-reduces and the broadcasts of --shard optimizer)");
DEFINE_int32(profile_steps, 3, "steps traced by --profile");
DEFINE_bool(poison_arena, false,
            "debugging: fill dead arena buffers with NaN and stop at the op that reads one (slow; CPU only)");
DEFINE_bool(progress, true, "on a terminal, one live line: epoch, batch, samples/s, metrics, lr, ETA");
DEFINE_string(dist, "", "data-parallel training across processes: mpi (run under mpirun)");
DEFINE_double(dist_timeout, 60,
              "--dist: seconds a collective may wait for the other ranks before every rank stops with an error");
DEFINE_int64(dist_check_every, 100, "--dist: compare parameter checksums across ranks every K updates (0: never)");
DEFINE_bool(dist_scale_lr, false, "--dist: multiply solver.lr by the number of ranks (warm-up still applies)");
DECLARE_string(gpus);
DEFINE_string(dist_bucket, "1MiB", "--dist: gradient bytes per all-reduce");
DEFINE_string(shard, "",
              "--dist: optimizer (ZeRO stage 1): each rank holds and updates the optimizer state of 1/N of the "
              "parameters and broadcasts its updated slice (frugal plan --ranks N --shard optimizer: per rank)");

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
  opts.poison_arena = FLAGS_poison_arena;
  if (FLAGS_progress && isatty(fileno(stderr))) opts.progress = stderr;
  return opts;
}

DistOptions DistFromFlags(Communicator* comm) {
  DistOptions d;
  d.comm = comm;
  d.shard_optimizer = ShardOptimizerFromFlags();
  d.check_every = FLAGS_dist_check_every;
  d.bucket_bytes = ParseBytes(FLAGS_dist_bucket);
  return d;
}

// One rank of `mpirun -np N frugal train --dist mpi [--gpus ID]`: rank 0
// logs, writes events and checkpoints; the others only warn. An error on any
// rank ends every rank. With a GPU, gradients go through NCCL.
int TrainDistributed(ConfigFile cfg, TrainOptions opts, const std::vector<int>& gpus) {
  FRUGAL_REQUIRE(gpus.size() <= 1, "--gpus ", FLAGS_gpus, " with --dist mpi: each rank runs on one GPU; give each ",
                 "rank its own id (with OpenMPI: sh -c 'frugal train ... --gpus $OMPI_COMM_WORLD_LOCAL_RANK')");
  CommunicatorOptions co;
  co.timeout_s = FLAGS_dist_timeout;
  std::unique_ptr<Communicator> comm = MakeCommunicator(FLAGS_dist, co);
  const int rank = comm->rank(), size = comm->size();
  try {
    if (rank != 0) {
      FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);
      QuietRank(&cfg, &opts);
    }
    if (!gpus.empty()) {
      opts.device = Device{DeviceType::kCUDA, gpus[0]};
      comm = MakeNcclCommunicator(std::move(comm), gpus[0]);
    }
    if (FLAGS_dist_scale_lr) {
      const float lr = cfg.net.solver().lr();
      cfg.net.mutable_solver()->set_lr(lr * static_cast<float>(size));
      LOG(INFO) << "--dist-scale-lr: learning rate " << lr << " x " << size << " ranks = " << lr * size;
    }
    opts.dist = DistFromFlags(comm.get());
    frugal::Train(cfg, opts);
  } catch (const Error& e) { comm->Abort(e.what()); }
  comm->Finish();
  return 0;
}

// `frugal train --gpus 0,1,...`: one thread per GPU, each a rank of a
// data-parallel run over its share of the batch (the config's batch split
// evenly) and its shard of the data; gradients averaged with NCCL as
// backward produces them; thread 0 logs, writes events and checkpoints.
int TrainOnGpus(ConfigFile cfg, TrainOptions opts, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  const int batch = cfg.net.data().batch_size();
  FRUGAL_REQUIRE(batch % n == 0, "--gpus ", FLAGS_gpus, ": the batch of ", batch, " does not split evenly over ", n,
                 " GPUs; give a multiple of ", n, " (--batch ", (batch + n - 1) / n * n, ")");
  FRUGAL_REQUIRE(FLAGS_dist_scale_lr == false,
                 "--dist-scale-lr is for --dist mpi; with --gpus the config's batch "
                 "and learning rate are the global ones");
  cfg.net.mutable_data()->set_batch_size(batch / n);
  std::vector<std::unique_ptr<Communicator>> comms = MakeNcclGroup(MakeLocalGroup(n), gpus);
  LOG(INFO) << "data-parallel over " << n << " GPUs (" << FLAGS_gpus << "): batch " << batch / n << " per GPU, "
            << batch << " in all; gradients averaged with NCCL";
  opts.dist = DistFromFlags(nullptr);
  std::vector<Communicator*> ranks;
  std::vector<Device> devices;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(comms[r].get());
    devices.push_back(Device{DeviceType::kCUDA, gpus[r]});
  }
  TrainRanksInThreads(cfg, opts, ranks, devices);
  for (auto& c : comms) c->Finish();
  return 0;
}

}  // namespace

bool ShardOptimizerFromFlags() {
  if (FLAGS_shard.empty()) return false;
  FRUGAL_REQUIRE(FLAGS_shard != "gradients",
                 "--shard gradients (ZeRO stage 2) is not built yet; --shard optimizer shards the optimizer state");
  FRUGAL_REQUIRE(FLAGS_shard == "optimizer", "--shard ", FLAGS_shard, ": unknown; the one built is optimizer");
  return true;
}

int Train() {
  ConfigFile cfg = FLAGS_resume.empty() ? LoadConfigFromFlags() : LoadConfigFor(ResolveCheckpoint(FLAGS_resume));
  const std::vector<int> gpus = GpuIdsFromFlags();
  TrainOptions opts = OptionsFromFlags();
  FRUGAL_REQUIRE(!ShardOptimizerFromFlags() || !FLAGS_dist.empty(), "--shard ", FLAGS_shard,
                 " shards over the ranks of a data-parallel run: add --dist mpi and start it with mpirun -np N");
  if (!FLAGS_dist.empty()) return TrainDistributed(std::move(cfg), std::move(opts), gpus);
  if (gpus.size() > 1) return TrainOnGpus(std::move(cfg), std::move(opts), gpus);
  if (gpus.size() == 1) opts.device = Device{DeviceType::kCUDA, gpus[0]};
  frugal::Train(cfg, opts);
  return 0;
}

}  // namespace frugal::cli
