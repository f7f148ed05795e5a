// The JSON log (--log-json): one line per training window (with the tensor
// bytes held per kind and the process peak), per validation between epochs,
// and per epoch (with its validation, speed, time and memory).
#include <cerrno>
#include <cstring>
#include <fstream>

#include "train/observer.h"

namespace frugal {
namespace {

std::string JsonMetrics(const std::string& prefix, const MetricValues& m) {
  std::string out;
  for (const auto& [name, v] : m.values) out += Fmt(",\"", prefix, name, "\":", v);
  return out;
}

// What is held now, per kind of tensor memory, and the process peak so far:
// ,"bytes":{"arena":..,...},"process_peak_bytes":..
std::string MemoryNow(Device dev) {
  std::string out = ",\"bytes\":{";
  for (int k = 0; k < static_cast<int>(MemKind::kNumKinds); ++k)
    out += Fmt(k ? "," : "", "\"", MemKindName(static_cast<MemKind>(k)),
               "\":", MemoryAccounting::Get().Current(dev, static_cast<MemKind>(k)));
  return out + Fmt("},\"process_peak_bytes\":", ProcessPeakBytes());
}

class JsonLog : public Observer {
 public:
  explicit JsonLog(const std::string& path) : path_(path), out_(path) {
    FRUGAL_REQUIRE(out_, path, ": cannot write the JSON log");
  }

  void OnWindow(Run& r, const MetricValues& m, double speed) override {
    out_ << "{\"epoch\":" << r.epoch << ",\"batch\":" << r.batch << ",\"iterations\":" << r.updates()
         << JsonMetrics("train_", m) << ",\"lr\":" << r.rate;
    if (speed >= 0) out_ << ",\"samples_per_s\":" << speed;  // absent: nothing timed (OnWindow)
    if (speed >= 0 && r.tokens_per_sample > 0) out_ << ",\"tokens_per_s\":" << speed * r.tokens_per_sample;
    out_ << MemoryNow(r.s.dev) << "}\n";
  }

  void OnValidation(Run& r, const MetricValues& m, bool epoch_end) override {
    if (epoch_end) return;  // in the epoch's line
    out_ << "{\"epoch\":" << r.epoch << ",\"iterations\":" << r.updates() << JsonMetrics("val_", m) << "}\n";
    Flush();
  }

  void OnEpochEnd(Run& r, const MetricValues& train, double secs) override {
    out_ << "{\"epoch\":" << r.epoch << ",\"iterations\":" << r.updates() << JsonMetrics("train_", train);
    if (r.val.count > 0) out_ << JsonMetrics("val_", r.val);
    const double samples = static_cast<double>(r.epoch_samples);
    out_ << ",\"samples\":" << r.epoch_samples << ",\"samples_per_s\":" << samples / secs;
    if (r.tokens_per_sample > 0) out_ << ",\"tokens_per_s\":" << samples * r.tokens_per_sample / secs;
    out_ << ",\"time_s\":" << secs << ",\"arena_bytes\":" << ArenaBytes(r.s)
         << ",\"peak_bytes\":" << MemoryAccounting::Get().Peak(r.s.dev)
         << ",\"process_peak_bytes\":" << ProcessPeakBytes() << "}\n";
    Flush();
  }

  void OnEnd(Run&) override { Flush(); }

 private:
  // A log that cannot be written fails the run as a checkpoint would.
  void Flush() {
    out_.flush();
    FRUGAL_REQUIRE(out_, path_, ": writing the JSON log failed (", std::strerror(errno),
                   "); free some space or give another --log-json");
  }

  std::string path_;
  std::ofstream out_;
};

}  // namespace

std::unique_ptr<Observer> MakeJsonLog(const std::string& path) { return std::make_unique<JsonLog>(path); }

}  // namespace frugal
