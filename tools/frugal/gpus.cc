// --gpus: which GPU a command runs on. One id runs the whole graph on that
// GPU; several ids (data-parallel training with NCCL, issue #8) are not
// built yet and are refused with a clear error.
#include <gflags/gflags.h>

#include <cstdlib>

#include "backend/device.h"
#include "cli.h"

DEFINE_string(gpus, "", "time, train: run on this GPU (an id such as 0; several ids are not supported yet)");

namespace frugal::cli {

Device DeviceFromFlags() {
  if (FLAGS_gpus.empty()) return Device{};
  const std::string what = "--gpus " + FLAGS_gpus;
  std::vector<int> ids;
  size_t at = 0;
  while (at <= FLAGS_gpus.size()) {
    const size_t comma = std::min(FLAGS_gpus.find(',', at), FLAGS_gpus.size());
    const std::string id = FLAGS_gpus.substr(at, comma - at);
    char* end = nullptr;
    const long v = std::strtol(id.c_str(), &end, 10);
    FRUGAL_REQUIRE(!id.empty() && *end == '\0' && v >= 0 && v < kMaxDevices, what,
                   ": expected GPU ids separated by commas, such as 0 or 0,1; got '", id, "'");
    ids.push_back(static_cast<int>(v));
    at = comma + 1;
  }
  FRUGAL_REQUIRE(ids.size() == 1, what, ": data-parallel training on several GPUs (NCCL) is not built yet; ",
                 "run on one GPU (--gpus ", ids[0], ")");
  backend::RequireCudaDevice(ids[0], what);
  return Device{DeviceType::kCUDA, ids[0]};
}

}  // namespace frugal::cli
