// ArrayIter: the DataIter over the caller's float arrays (MXNet's
// NDArrayIter). See frugal/io.h for the contract.
#include <algorithm>

#include "frugal/io.h"
#include "io/order.h"

namespace frugal {

ArrayIter::ArrayIter(const float* data, Shape sample_shape, const float* labels, Shape label_shape, int64_t num_samples,
                     const std::string& name, int64_t batch_size, bool shuffle, uint64_t seed, Shard shard)
    : data_(data),
      labels_(labels),
      sample_(std::move(sample_shape)),
      label_(std::move(label_shape)),
      n_(num_samples),
      name_(name),
      batch_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      shard_(shard) {
  FRUGAL_REQUIRE(batch_size >= 1, name, ": batch_size is ", batch_size, " but must be >= 1");
  FRUGAL_REQUIRE(num_samples >= 1, name, ": no samples");
  FRUGAL_REQUIRE(data != nullptr && labels != nullptr, name, ": no data or no labels");
  io::CheckShard(shard, name);
  Reset(0);
}

void ArrayIter::Reset(int64_t epoch) {
  FRUGAL_REQUIRE(epoch >= 0, name_, ": epoch is ", epoch, " but must be >= 0");
  position_ = 0;
  order_ = io::EpochOrder(n_, shuffle_, seed_, epoch);
}

int64_t ArrayIter::batches_per_epoch() const { return io::PartBatchCount(n_, batch_, shard_.num_parts); }

bool ArrayIter::Next(float* data, float* label, int64_t* num_valid) {
  if (position_ >= batches_per_epoch()) return false;
  const int64_t size = sample_.Size(), label_size = label_.Size();
  const int64_t first = io::PartFirst(position_, batch_, shard_.part_index, shard_.num_parts);
  for (int64_t r = 0; r < batch_; ++r) {  // rows past the end wrap to the start of this epoch's order
    const int64_t idx = order_[(first + r) % n_];
    std::copy_n(data_ + idx * size, size, data + r * size);
    std::copy_n(labels_ + idx * label_size, label_size, label + r * label_size);
  }
  if (num_valid != nullptr) *num_valid = io::ValidRows(n_, first, batch_);
  ++position_;
  return true;
}

std::string ArrayIter::Describe() const {
  return Fmt(name_, ": ", n_, " samples of ", sample_, " from arrays, batch ", batch_, shuffle_ ? ", shuffled" : "",
             io::DescribePart(shard_, batch_));
}

}  // namespace frugal
