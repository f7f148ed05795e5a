// The live progress line of `frugal train` on a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace frugal {

// What the line shows: where training is, how fast, and how long is left.
struct Progress {
  int64_t epoch = 0, epochs = 1;   // epoch counts from 0, as in the log lines
  int64_t batch = 0, batches = 1;  // batches of this epoch done, of all
  double samples_per_s = 0;
  int64_t tokens_per_sample = 0;  // a language model's (tokens/s shown beside samples/s); 0: none
  std::string metrics;            // the epoch's so far: "accuracy=0.912300 cross_entropy=0.25"
  float lr = 0;
  double eta_s = -1;  // seconds to the end of training; < 0: unknown yet
};

// "Epoch[3] of 10  batch 120/938  1234.5 samples/s  epoch average: accuracy=0.912300  lr 0.1  ETA 4:05"
std::string ProgressText(const Progress& p);
// "4:05", "1:02:03".
std::string FormatDuration(double seconds);

// One line rewritten in place ("\r", the text, clear to the end of the line),
// at most every `min_interval_s`; Clear() erases it before a log line is
// printed, the next Show() draws it again. With a null stream it does nothing.
class ProgressLine {
 public:
  explicit ProgressLine(FILE* out, double min_interval_s = 0.2) : out_(out), min_interval_s_(min_interval_s) {}
  ~ProgressLine() { Clear(); }
  void Show(const Progress& p);
  void Clear();

 private:
  FILE* out_;
  double min_interval_s_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace frugal
