#include "frugal/progress.h"

#include <cmath>

#include "frugal/base.h"

namespace frugal {

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

std::string ProgressText(const Progress& p) {
  char speed[64];
  std::snprintf(speed, sizeof speed, "%.1f samples/s", p.samples_per_s);
  std::string rate = speed;
  if (p.tokens_per_sample > 0) {
    std::snprintf(speed, sizeof speed, " (%.0f tokens/s)", p.samples_per_s * static_cast<double>(p.tokens_per_sample));
    rate += speed;
  }
  return Fmt("Epoch[", p.epoch, "] of ", p.epochs, "  batch ", p.batch, "/", p.batches, "  ", rate, "  ",
             p.metrics.empty() ? "" : "epoch average: " + p.metrics + "  ", "lr ", p.lr, "  ETA ",
             p.eta_s < 0 ? std::string("?") : FormatDuration(p.eta_s));
}

void ProgressLine::Show(const Progress& p) {
  if (!out_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && std::chrono::duration<double>(now - last_).count() < min_interval_s_) return;
  std::fprintf(out_, "\r%s\033[K", ProgressText(p).c_str());
  std::fflush(out_);
  shown_ = true;
  last_ = now;
}

void ProgressLine::Clear() {
  if (!out_ || !shown_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace frugal
