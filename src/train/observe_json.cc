// The JSON log (--log-json): one line per training window (with the tensor
// bytes held per kind and the process peak), per validation between epochs,
// and per epoch (with its validation, speed, time and memory); and the same
// lines to TrainOptions::on_event.
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

// The lines of the log: a window's, a validation's between epochs, an
// epoch's (with its validation).
std::string WindowLine(const Run& r, const Window& w) {
  std::string line = Fmt("{\"epoch\":", r.epoch, ",\"batch\":", r.batch, ",\"iterations\":", r.updates(),
                         JsonMetrics("train_", w.metrics), ",\"lr\":", w.lr);
  const double speed = w.samples_per_s;
  if (speed >= 0) line += Fmt(",\"samples_per_s\":", speed);  // absent: nothing timed (Window)
  if (speed >= 0 && r.tokens_per_sample > 0) line += Fmt(",\"tokens_per_s\":", speed * r.tokens_per_sample);
  return line + MemoryNow(r.s.dev) + "}";
}

std::string ValidationLine(const Run& r, const MetricValues& m) {
  return Fmt("{\"epoch\":", r.epoch, ",\"iterations\":", r.updates(), JsonMetrics("val_", m), "}");
}

std::string EpochLine(const Run& r, const EpochEnd& e) {
  std::string line = Fmt("{\"epoch\":", r.epoch, ",\"iterations\":", r.updates(), JsonMetrics("train_", e.train));
  if (e.val) line += JsonMetrics("val_", *e.val);
  const double samples = static_cast<double>(e.samples);
  line += Fmt(",\"samples\":", e.samples, ",\"samples_per_s\":", samples / e.secs);
  if (r.tokens_per_sample > 0) line += Fmt(",\"tokens_per_s\":", samples * r.tokens_per_sample / e.secs);
  return line + Fmt(",\"time_s\":", e.secs, ",\"arena_bytes\":", ArenaBytes(r.s),
                    ",\"peak_bytes\":", MemoryAccounting::Get().Peak(r.s.dev),
                    ",\"process_peak_bytes\":", ProcessPeakBytes(), "}");
}

class JsonLog : public Observer {
 public:
  explicit JsonLog(const std::string& path) : path_(path), out_(path) {
    FRUGAL_REQUIRE(out_, path, ": cannot write the JSON log");
  }

  void OnWindow(Run& r, const Window& w) override { out_ << WindowLine(r, w) << "\n"; }

  void OnValidation(Run& r, const MetricValues& m, bool epoch_end) override {
    if (epoch_end) return;  // in the epoch's line
    out_ << ValidationLine(r, m) << "\n";
    Flush();
  }

  void OnEpochEnd(Run& r, const EpochEnd& e) override {
    out_ << EpochLine(r, e) << "\n";
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

// The same lines to TrainOptions::on_event, which may stop the run.
class EventCallback : public Observer {
 public:
  explicit EventCallback(std::function<bool(const TrainEvent&)> f) : f_(std::move(f)) {}

  void OnWindow(Run& r, const Window& w) override { Call(r, "window", WindowLine(r, w)); }
  void OnValidation(Run& r, const MetricValues& m, bool epoch_end) override {
    if (!epoch_end) Call(r, "validation", ValidationLine(r, m));
  }
  void OnEpochEnd(Run& r, const EpochEnd& e) override { Call(r, "epoch", EpochLine(r, e)); }
  void OnStop(Run& r, float) override {
    f_({"stopped", Fmt("{\"epoch\":", r.epoch, ",\"batch\":", r.batch, ",\"iterations\":", r.updates(), "}")});
  }

 private:
  void Call(Run& r, const char* kind, std::string json) {
    if (f_({kind, std::move(json)})) r.stop = true;
  }

  std::function<bool(const TrainEvent&)> f_;
};

}  // namespace

std::unique_ptr<Observer> MakeJsonLog(const std::string& path) { return std::make_unique<JsonLog>(path); }
std::unique_ptr<Observer> MakeEventCallback(std::function<bool(const TrainEvent&)> f) {
  return std::make_unique<EventCallback>(std::move(f));
}

}  // namespace frugal
