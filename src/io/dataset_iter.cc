// DatasetIter: the DataIter over an in-memory Dataset, with CHW pad/crop,
// mirror and per-channel normalisation. See frugal/io.h for the contract.
#include <algorithm>
#include <cmath>

#include "frugal/io.h"
#include "io/order.h"

namespace frugal {

DatasetIter::DatasetIter(Dataset ds, const std::string& name, int64_t batch_size, bool shuffle, uint64_t seed,
                         const Augment& aug, Shard shard)
    : ds_(std::move(ds)), name_(name), batch_(batch_size), shuffle_(shuffle), seed_(seed), aug_(aug), shard_(shard) {
  FRUGAL_REQUIRE(batch_size >= 1, name, ": batch_size is ", batch_size, " but must be >= 1");
  FRUGAL_REQUIRE(ds_.num_samples >= 1, name, ": the dataset is empty");
  const int64_t sample = ds_.sample_shape.known() ? ds_.sample_shape.Size() : 0;
  FRUGAL_REQUIRE(sample >= 1 && static_cast<int64_t>(ds_.pixels.size()) == ds_.num_samples * sample &&
                     static_cast<int64_t>(ds_.y.size()) == ds_.num_samples,
                 name, ": inconsistent dataset: ", ds_.num_samples, " samples of shape ", ds_.sample_shape, " but ",
                 ds_.pixels.size(), " pixels and ", ds_.y.size(), " labels");
  FRUGAL_REQUIRE(std::isfinite(ds_.scale), name, ": the dataset's scale ", ds_.scale, " is not finite");
  // Which augmentations an in-memory CHW dataset can take.
  FRUGAL_REQUIRE(aug.resize == 0 && !aug.rand_resized_crop, name,
                 ": resize and rand_resized_crop work on RecordIO images only (use pad and rand_crop here)");
  const bool spatial = aug.pad > 0 || aug.rand_crop || aug.mirror || !aug.mean.empty() || !aug.std.empty();
  FRUGAL_REQUIRE(!spatial || ds_.sample_shape.ndim() == 3, name, ": augmentation needs (c,h,w) samples but they are ",
                 ds_.sample_shape);
  FRUGAL_REQUIRE(aug.pad >= 0, name, ": augment.pad is ", aug.pad, " but must be >= 0");
  CheckNormalisation(aug, ds_.sample_shape.ndim() == 3 ? ds_.sample_shape[0] : 1, name);
  io::CheckShard(shard, name);
  Reset(0);
}

void DatasetIter::Reset(int64_t epoch) {
  FRUGAL_REQUIRE(epoch >= 0, name_, ": epoch is ", epoch, " but must be >= 0");
  epoch_ = epoch;
  position_ = 0;
  order_ = io::EpochOrder(ds_.num_samples, shuffle_, seed_, epoch);
}

int64_t DatasetIter::batches_per_epoch() const { return io::PartBatchCount(ds_.num_samples, batch_, shard_.num_parts); }

void DatasetIter::Fill(int64_t sample, float* out) const {
  const int64_t size = ds_.sample_shape.Size();
  const uint8_t* src = ds_.pixels.data() + sample * size;
  const float scale = ds_.scale;
  const bool spatial = aug_.pad > 0 || aug_.rand_crop || aug_.mirror || !aug_.mean.empty() || !aug_.std.empty();
  if (!spatial) {
    for (int64_t i = 0; i < size; ++i) out[i] = src[i] * scale;
    return;
  }
  // Draws in a fixed order: crop offset (y, x), then mirror.
  std::mt19937_64 rng = io::SampleRng(seed_, epoch_, sample);
  const int64_t c = ds_.sample_shape[0], h = ds_.sample_shape[1], w = ds_.sample_shape[2], p = aug_.pad;
  int64_t dy = p, dx = p;  // crop offset in the padded image; centre by default
  if (aug_.rand_crop) {
    dy = static_cast<int64_t>(io::UniformBelow(rng, 2 * p + 1));
    dx = static_cast<int64_t>(io::UniformBelow(rng, 2 * p + 1));
  }
  const bool flip = aug_.mirror && (rng() >> 63) != 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mean = aug_.mean.empty() ? 0.f : aug_.mean[ch];
    const float inv_std = aug_.std.empty() ? 1.f : 1.f / aug_.std[ch];
    for (int64_t y = 0; y < h; ++y) {
      const int64_t sy = y + dy - p;  // source row; outside the image is padding (0)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sx = (flip ? w - 1 - x : x) + dx - p;
        const float v = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? src[(ch * h + sy) * w + sx] * scale : 0.f;
        out[(ch * h + y) * w + x] = (v - mean) * inv_std;
      }
    }
  }
}

bool DatasetIter::Next(float* data, float* label, int64_t* num_valid) {
  if (position_ >= batches_per_epoch()) return false;
  FRUGAL_REQUIRE(data != nullptr && label != nullptr, name_, ": Next needs data and label buffers");
  const int64_t n = ds_.num_samples, size = ds_.sample_shape.Size();
  const int64_t first = io::PartFirst(position_, batch_, shard_.part_index, shard_.num_parts);
  // Rows past the end wrap to the start of this epoch's order.
  for (int64_t r = 0; r < batch_; ++r) {
    const int64_t idx = order_[(first + r) % n];
    Fill(idx, data + r * size);
    label[r] = ds_.y[idx];
  }
  if (num_valid != nullptr) *num_valid = io::ValidRows(n, first, batch_);
  ++position_;
  return true;
}

std::string DatasetIter::Describe() const {
  std::string aug;
  if (aug_.pad > 0) aug += Fmt(" pad ", aug_.pad);
  if (aug_.rand_crop) aug += " rand_crop";
  if (aug_.mirror) aug += " mirror";
  if (!aug_.mean.empty() || !aug_.std.empty()) aug += " normalise";
  return Fmt(name_, ": ", num_samples(), " samples of ", ds_.sample_shape, " in memory, batch ", batch_,
             shuffle_ ? ", shuffled" : "", io::DescribePart(shard_, batch_), aug.empty() ? "" : ", augment:" + aug);
}

}  // namespace frugal
