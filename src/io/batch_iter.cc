// BatchIter: cuts a Dataset into fixed-size batches with a reproducible,
// platform-independent shuffle. See frugal/io.h for the contract.
#include <algorithm>

#include "frugal/io.h"
#include "io/order.h"

namespace frugal {

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
  // The order is a pure function of (seed, epoch): see io/order.h.
  order_ = io::EpochOrder(ds_->num_samples, shuffle_, seed_, epoch);
  position_ = 0;
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
