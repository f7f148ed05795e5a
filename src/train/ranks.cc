// The ranks of a data-parallel run as threads of this process (frugal/train.h,
// TrainRanksInThreads): `frugal train --gpus 0,1,...` and its tests.
#include <glog/logging.h>

#include <thread>

#include "frugal/train.h"

namespace frugal {

void QuietRank(ConfigFile* cfg, TrainOptions* opts) {
  opts->quiet = true;
  opts->log_json = opts->tensorboard = opts->profile = "";
  opts->progress = nullptr;
  cfg->net.mutable_solver()->set_checkpoint_dir("");
}

void TrainRanksInThreads(const ConfigFile& cfg, const TrainOptions& opts, const std::vector<Communicator*>& comms,
                         const std::vector<Device>& devices,
                         std::vector<std::map<std::string, std::vector<float>>>* params) {
  CHECK_EQ(comms.size(), devices.size());
  if (params) params->assign(comms.size(), {});
  // Each rank's config and options are copied here, on one thread: copying
  // a protobuf message with map fields is not safe from several threads at
  // once (a const read may sync its map).
  std::vector<ConfigFile> cfgs(comms.size(), cfg);
  std::vector<TrainOptions> options(comms.size(), opts);
  for (size_t r = 0; r < comms.size(); ++r) {
    if (r != 0) QuietRank(&cfgs[r], &options[r]);
    options[r].device = devices[r];
    options[r].dist.comm = comms[r];
    options[r].final_params = params ? &(*params)[r] : nullptr;
  }
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < comms.size(); ++r) {
    ranks.emplace_back([&, r] {
      try {
        Train(cfgs[r], options[r]);
      } catch (const Error& e) { comms[r]->Abort(e.what()); }
    });
  }
  for (std::thread& t : ranks) t.join();
}

}  // namespace frugal
