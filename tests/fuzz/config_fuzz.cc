// libFuzzer target: the config language. ParseConfig (variables, ${...}
// substitution, $(...) expressions, protobuf text) and ExpandBlocks (block
// repeats and @{...} arguments) on arbitrary text must return or throw
// frugal::Error, never crash, overflow (UBSan stops on signed overflow),
// recurse off the stack or grow without bound (the expansion is capped at
// max_nodes, set low here so that one input stays fast).
#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "config/blocks.h"
#include "frugal/base.h"
#include "frugal/config.h"

// The parser's warning lines would be most of the run's output: errors only.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  FLAGS_minloglevel = google::GLOG_ERROR;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    frugal::ConfigFile cfg = frugal::ParseConfig(text, "fuzz.prototxt", {});
    cfg.net.set_max_nodes(std::min<int64_t>(cfg.net.max_nodes(), 10000));
    frugal::ExpandBlocks(cfg);
  } catch (const frugal::Error&) {}
  return 0;
}
