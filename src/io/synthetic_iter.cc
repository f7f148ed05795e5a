// SyntheticIter: one batch of seeded random data and labels, returned as
// every batch of an epoch, for benchmarks. See frugal/io.h.
#include <algorithm>
#include <cmath>

#include "frugal/io.h"
#include "io/order.h"

namespace frugal {

SyntheticIter::SyntheticIter(const SyntheticIterOptions& opts) : o_(opts) {
  const Shape& s = opts.sample_shape;
  FRUGAL_REQUIRE(s.known() && s.ndim() >= 1 && s.Size() >= 1, "synthetic data: sample shape ", s,
                 " must have at least one dim, all positive (set data.sample_shape or synthetic.shape)");
  for (int64_t d : s.dims()) FRUGAL_REQUIRE(d >= 1, "synthetic data: sample shape ", s, " has a dim < 1");
  FRUGAL_REQUIRE(opts.batch_size >= 1, "synthetic data: batch_size is ", opts.batch_size, " but must be >= 1");
  FRUGAL_REQUIRE(opts.num_classes >= 1, "synthetic data: num_classes is ", opts.num_classes, " but must be >= 1");
  FRUGAL_REQUIRE(opts.num_samples >= 1, "synthetic data: num_samples is ", opts.num_samples, " but must be >= 1");
  FRUGAL_REQUIRE(opts.min < opts.max, "synthetic data: the range [", opts.min, ", ", opts.max, ") is empty");
  std::mt19937_64 rng(io::Mix64(opts.seed));
  data_.resize(opts.batch_size * s.Size());
  for (int64_t d : opts.label_shape.dims())
    FRUGAL_REQUIRE(d >= 1, "synthetic data: label shape ", opts.label_shape, " has a dim < 1");
  for (float& x : data_) {
    x = static_cast<float>(opts.min + (opts.max - opts.min) * io::Uniform01(rng));
    if (opts.integers) x = std::floor(x);
  }
  label_.resize(opts.batch_size * opts.label_shape.Size());
  for (float& y : label_) y = static_cast<float>(io::UniformBelow(rng, static_cast<uint64_t>(opts.num_classes)));
}

bool SyntheticIter::Next(float* data, float* label, int64_t* num_valid) {
  if (position_ >= batches_per_epoch()) return false;
  FRUGAL_REQUIRE(data != nullptr && label != nullptr, "synthetic data: Next needs data and label buffers");
  std::copy(data_.begin(), data_.end(), data);
  std::copy(label_.begin(), label_.end(), label);
  if (num_valid != nullptr) *num_valid = std::min(o_.batch_size, o_.num_samples - position_ * o_.batch_size);
  ++position_;
  return true;
}

std::string SyntheticIter::Describe() const {
  return Fmt("synthetic: ", o_.num_samples, " samples of ", o_.sample_shape, o_.integers ? " whole numbers" : "",
             " uniform in [", o_.min, ", ", o_.max, "), labels ", o_.label_shape, " of ", o_.num_classes,
             " classes, batch ", o_.batch_size, " (one batch drawn once from seed ", o_.seed, ")");
}

}  // namespace frugal
