// BatchIter: cuts a Dataset into fixed-size batches with a reproducible,
// platform-independent shuffle. See frugal/io.h for the contract.
#include <algorithm>
#include <numeric>
#include <random>

#include "frugal/io.h"

namespace frugal {
namespace {

// SplitMix64 finaliser: spreads nearby seeds/epochs over the whole 64-bit space.
uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A uniform integer in [0, n), n >= 1, without modulo bias. Unlike
// std::uniform_int_distribution its output is the same on every library.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  // threshold = 2^64 mod n; draws below it are rejected so the remaining
  // 2^64 - threshold values split evenly into n classes.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

}  // namespace

BatchIter::BatchIter(const Dataset& ds, int64_t batch_size, bool shuffle, uint64_t seed)
    : ds_(&ds), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  FRUGAL_REQUIRE(batch_size >= 1, "BatchIter: batch_size is ", batch_size,
                 " but must be >= 1 (set a positive batch size)");
  FRUGAL_REQUIRE(ds.num_samples >= 1, "BatchIter: the dataset is empty (num_samples = ",
                 ds.num_samples, "; load a data set with at least one sample)");
  FRUGAL_REQUIRE(ds.sample_shape.known(), "BatchIter: the dataset's sample_shape is not set "
                 "(set it to the shape of one sample, e.g. (1,28,28))");
  sample_size_ = ds.sample_shape.Size();
  FRUGAL_REQUIRE(sample_size_ >= 1 &&
                     static_cast<int64_t>(ds.x.size()) == ds.num_samples * sample_size_ &&
                     static_cast<int64_t>(ds.y.size()) == ds.num_samples,
                 "BatchIter: inconsistent dataset: ", ds.num_samples, " samples of shape ",
                 ds.sample_shape, " need ", ds.num_samples * sample_size_, " x values and ",
                 ds.num_samples, " y values but it has ", ds.x.size(), " and ", ds.y.size(),
                 " (build the Dataset with LoadIdxDataset or fix its sizes)");
  BeginEpoch(0);
}

void BatchIter::BeginEpoch(int64_t epoch) {
  FRUGAL_REQUIRE(epoch >= 0, "BatchIter::BeginEpoch: epoch is ", epoch, " but must be >= 0");
  // 1. Start from the identity order.
  order_.resize(ds_->num_samples);
  std::iota(order_.begin(), order_.end(), int64_t{0});
  position_ = 0;
  if (!shuffle_) return;
  // 2. Seed from (seed, epoch) only, so the order is a pure function of them.
  std::mt19937_64 rng(Mix64(seed_ ^ Mix64(static_cast<uint64_t>(epoch))));
  // 3. Fisher-Yates, back to front: swap each slot with a uniform earlier-or-same slot.
  for (int64_t i = ds_->num_samples - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order_[i], order_[j]);
  }
}

bool BatchIter::Next(float* data, float* label, int64_t* num_valid) {
  if (position_ >= batches_per_epoch()) return false;
  FRUGAL_REQUIRE(data != nullptr && label != nullptr,
                 "BatchIter::Next: data and label must point to buffers of batch_size samples");
  const int64_t n = ds_->num_samples;
  const int64_t first = position_ * batch_size_;
  // Copy batch_size rows; rows past the end wrap to the start of this epoch's order.
  for (int64_t r = 0; r < batch_size_; ++r) {
    const int64_t idx = order_[(first + r) % n];
    const float* src = ds_->x.data() + idx * sample_size_;
    std::copy(src, src + sample_size_, data + r * sample_size_);
    label[r] = ds_->y[idx];
  }
  if (num_valid != nullptr) *num_valid = std::min(batch_size_, n - first);
  ++position_;
  return true;
}

int64_t BatchIter::batch_size() const { return batch_size_; }

int64_t BatchIter::batches_per_epoch() const {
  return (ds_->num_samples + batch_size_ - 1) / batch_size_;
}

int64_t BatchIter::position() const { return position_; }

}  // namespace frugal
