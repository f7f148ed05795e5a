// --gpus: which GPUs a command runs on. frugal time takes one id; frugal
// train takes one (the whole model on that GPU) or several (data-parallel
// over the GPUs of this process, gradients averaged with NCCL).
#include <gflags/gflags.h>

#include <cstdlib>

#include "backend/device.h"
#include "cli.h"

DEFINE_string(gpus, "",
              "time, train: run on these GPUs: one id such as 0, or for train several such as 0,1 "
              "(data-parallel with NCCL, the batch split evenly)");

namespace frugal::cli {

namespace {

// The ids as written, checked for form only.
std::vector<int> ParseIds() {
  if (FLAGS_gpus.empty()) return {};
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
    for (int seen : ids) FRUGAL_REQUIRE(seen != v, what, ": GPU ", v, " is named twice");
    ids.push_back(static_cast<int>(v));
    at = comma + 1;
  }
  return ids;
}

}  // namespace

std::vector<int> GpuIdsFromFlags() {
  const std::vector<int> ids = ParseIds();
  for (int id : ids) backend::RequireCudaDevice(id, "--gpus " + FLAGS_gpus);
  return ids;
}

Device DeviceFromFlags() {
  const std::vector<int> ids = ParseIds();
  if (ids.empty()) return Device{};
  FRUGAL_REQUIRE(ids.size() == 1, "--gpus ", FLAGS_gpus, ": this command runs on one GPU (--gpus ", ids[0],
                 "); frugal train takes several");
  backend::RequireCudaDevice(ids[0], "--gpus " + FLAGS_gpus);
  return Device{DeviceType::kCUDA, ids[0]};
}

}  // namespace frugal::cli
