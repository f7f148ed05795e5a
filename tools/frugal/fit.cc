// frugal plan --fit SIZE: the largest batch per strategy that fits a
// memory, found by planning alone.
#include <gflags/gflags.h>

#include <cstdio>

#include "cli.h"
#include "frugal/train.h"

DEFINE_string(fit, "",
              "instead of the plan, the largest batch per strategy whose training process fits SIZE (e.g. 16GiB), "
              "counted as --memory-limit counts it (code, libraries, the data, every tensor, the runtime), found by "
              "planning alone");

DECLARE_bool(json);

namespace frugal::cli {

// frugal plan --fit SIZE: FitBatch per strategy. The batch is the config's
// `batch` variable where it declares one (other sizes, such as an RNN's
// initial state, follow it) and data.batch_size in any case.
int PlanFit(const ConfigFile& cfg, const std::vector<MemoryStrategy>& strategies) {
  const int64_t bytes = ParseBytes(FLAGS_fit);
  FRUGAL_REQUIRE(bytes > 0, "--fit ", FLAGS_fit, ": the size must be positive");
  const bool has_variable = cfg.values.count("batch") > 0;
  auto config_at = [&](int64_t b) {
    ConfigFile c = has_variable ? LoadConfigFromFlags({Fmt("batch=", b)}) : LoadConfigFromFlags();
    c.net.mutable_data()->set_batch_size(static_cast<int32_t>(b));
    return c;
  };
  for (const MemoryStrategy& s : strategies)
    FRUGAL_REQUIRE(!s.auto_budget() && !s.limit(), "--fit with --memory ", s.Name(),
                   ": the first sizes the batch to a memory, the second the plan; give one");
  const DataSources data = OpenDataToPlan(cfg);  // the process holds the data as training does
  // Measured once: each search's models, come and gone, leave the heap
  // larger for the next.
  const int64_t resident = ProcessResidentBytes();
  for (const MemoryStrategy& s : strategies) {
    const BatchFit f = FitBatch(config_at, cfg.net.data().batch_size(), s, bytes, resident);
    if (FLAGS_json) {
      std::printf(
          "{\"strategy\":\"%s\",\"fit_bytes\":%lld,\"batch\":%lld,\"process_bytes\":%lld,"
          "\"tensor_bytes\":%lld,\"plans\":%d,\"search_ms\":%.2f}\n",
          s.Name().c_str(), static_cast<long long>(bytes), static_cast<long long>(f.batch),
          static_cast<long long>(f.process.total()), static_cast<long long>(f.process.tensors), f.plans, f.ms);
    } else if (f.batch == 0) {
      std::printf("%-12s does not fit: batch 1 needs %s, more than %s  (%d plans in %.2f s)\n", s.Name().c_str(),
                  f.process.ToString().c_str(), HumanBytes(bytes).c_str(), f.plans, f.ms / 1e3);
    } else {
      std::printf("%-12s batch %8lld  process %s, of %s  (%d plans in %.2f s)\n", s.Name().c_str(),
                  static_cast<long long>(f.batch), f.process.ToString().c_str(), HumanBytes(bytes).c_str(), f.plans,
                  f.ms / 1e3);
    }
  }
  return 0;
}

}  // namespace frugal::cli
