// Data input: reading IDX files (the MNIST / Fashion-MNIST format), turning
// an image file plus a label file into an in-memory Dataset, and cutting a
// Dataset into (optionally shuffled) fixed-size batches.
//
// Every problem the user can cause (missing file, corrupt or truncated data,
// image/label count mismatch, bad batch size) throws frugal::Error with a
// one-line message that names the file, the problem, the values and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/base.h"

namespace frugal {

// The contents of one IDX file (the MNIST/Fashion-MNIST format): dims and raw
// unsigned bytes. bytes.size() is the product of dims; bytes are row-major.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// Reads an IDX file, gzip-compressed or plain (zlib's gzopen/gzread read
// both). Only element type 0x08 (unsigned byte) is accepted.
//
// Format: two zero bytes, a type byte, a rank byte, then `rank` big-endian
// uint32 dims, then exactly prod(dims) data bytes.
//
// Throws Error naming the path for: missing/unreadable file, bad magic,
// unsupported type, zero/absurd dims (rank 0 or > 16, any dim 0, more than
// 4 GiB of data), truncated data (or a corrupt gzip stream), trailing garbage.
IdxFile ReadIdx(const std::string& path);

// An in-memory labelled data set: float32 samples and float labels (class
// index).
struct Dataset {
  Shape sample_shape;  // e.g. (1,28,28) for IDX images of 28x28
  int64_t num_samples = 0;
  std::vector<float> x;  // num_samples * sample_shape.Size(), pixel * scale
  std::vector<float> y;  // num_samples class indices
};

// Loads images (N,H,W) -> sample_shape (1,H,W) and labels (N). Each pixel
// byte p becomes p * scale; each label byte becomes a float class index.
// Throws Error if the image file is not rank 3, the label file is not rank 1,
// scale is not finite, or counts differ (naming both files and both counts).
Dataset LoadIdxDataset(const std::string& images, const std::string& labels,
                       float scale = 1.0f / 255.0f);

// Cuts a Dataset into batches. With shuffle, the order of an epoch is a pure
// function of (seed, epoch), identical on every platform and standard library:
// a hand-written Fisher-Yates over a std::mt19937_64 seeded from (seed, epoch)
// with unbiased rejection sampling (no std::shuffle, no std distributions).
// Without shuffle the order is 0, 1, ..., num_samples-1 every epoch.
//
// The last partial batch is filled by wrapping to the start of the epoch's
// order; num_valid says how many rows are real (the rest are repeats). If
// batch_size > num_samples the single batch wraps as often as needed.
//
// The iterator keeps a pointer to ds: ds must outlive it and must not change.
// The constructor starts epoch 0, so Next() works without BeginEpoch(0).
class BatchIter {
 public:
  // Throws Error if batch_size < 1, ds is empty, or ds.x / ds.y sizes do not
  // match num_samples and sample_shape.
  BatchIter(const Dataset& ds, int64_t batch_size, bool shuffle, uint64_t seed);

  // Starts epoch `epoch` (>= 0) from its first batch; computes its order.
  void BeginEpoch(int64_t epoch);

  // Writes batch_size samples to data (batch_size * sample_shape.Size()
  // floats) and batch_size labels to label; sets *num_valid (if non-null) to
  // the number of real rows. Returns false (writing nothing) at the end of
  // the epoch.
  bool Next(float* data, float* label, int64_t* num_valid);

  int64_t batch_size() const;
  int64_t batches_per_epoch() const;  // ceil(num_samples / batch_size)
  // Position inside the epoch (batches already returned) — used later for
  // resume.
  int64_t position() const;

 private:
  const Dataset* ds_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  int64_t sample_size_;          // floats per sample
  int64_t position_ = 0;         // batches returned in this epoch
  std::vector<int64_t> order_;   // this epoch's sample order
};

}  // namespace frugal
