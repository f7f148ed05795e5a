// Decoding and augmenting one image with OpenCV: resize, crop (random resized,
// or pad then random / centre), mirror, normalise to float CHW RGB. See
// Augment and DecodeAugmentImage in frugal/io.h.
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>  // the IMREAD_ flags only: the codecs load on first use
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>

#include "frugal/io.h"
#include "io/imgcodecs.h"
#include "io/order.h"

namespace frugal {
namespace {

// Resizes img to (w, h): area averaging when shrinking, bilinear otherwise.
cv::Mat ResizeTo(const cv::Mat& img, int w, int h) {
  if (img.cols == w && img.rows == h) return img;
  cv::Mat out;
  const bool shrink = w <= img.cols && h <= img.rows;
  cv::resize(img, out, cv::Size(w, h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  return out;
}

// Step 1: the shorter side to `side` pixels, keeping the aspect ratio.
cv::Mat ResizeShorter(const cv::Mat& img, int side) {
  const int64_t h = img.rows, w = img.cols;
  if (h <= w) return ResizeTo(img, static_cast<int>(std::max<int64_t>(1, (w * side + h / 2) / h)), side);
  return ResizeTo(img, side, static_cast<int>(std::max<int64_t>(1, (h * side + w / 2) / w)));
}

// A uniform float in [lo, hi).
double UniformIn(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * io::Uniform01(rng); }

// Step 2a: a random region of area fraction [min_area, max_area] and aspect
// ratio w/h (log-uniform) in [min_ratio, max_ratio]; ten tries, then the whole
// image clamped to the ratio range, centred (as torchvision's RandomResizedCrop).
cv::Rect RandomResizedRegion(const cv::Mat& img, const Augment& aug, std::mt19937_64& rng) {
  const double area = static_cast<double>(img.rows) * img.cols;
  const double log_lo = std::log(aug.min_ratio), log_hi = std::log(aug.max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * UniformIn(rng, aug.min_area, aug.max_area);
    const double ratio = std::exp(UniformIn(rng, log_lo, log_hi));
    const int cw = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int ch = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (cw < 1 || ch < 1 || cw > img.cols || ch > img.rows) continue;
    const int x0 = static_cast<int>(io::UniformBelow(rng, img.cols - cw + 1));
    const int y0 = static_cast<int>(io::UniformBelow(rng, img.rows - ch + 1));
    return cv::Rect(x0, y0, cw, ch);
  }
  int cw = img.cols, ch = img.rows;
  const double in_ratio = static_cast<double>(cw) / ch;
  if (in_ratio < aug.min_ratio) ch = std::max(1, static_cast<int>(std::lround(cw / aug.min_ratio)));
  if (in_ratio > aug.max_ratio) cw = std::max(1, static_cast<int>(std::lround(ch * aug.max_ratio)));
  return cv::Rect((img.cols - cw) / 2, (img.rows - ch) / 2, cw, ch);
}

// Step 4: HWC BGR (or grey) bytes -> CHW RGB floats, (p * scale - mean) / std.
void ToChw(const cv::Mat& img, const Augment& aug, float* out) {
  const int c = img.channels(), h = img.rows, w = img.cols;
  for (int ch = 0; ch < c; ++ch) {
    const int src_ch = c == 3 ? 2 - ch : ch;  // OpenCV keeps BGR; out is RGB
    const float mean = aug.mean.empty() ? 0.f : aug.mean[ch];
    const float mul = aug.scale / (aug.std.empty() ? 1.f : aug.std[ch]);
    const float add = -mean / (aug.std.empty() ? 1.f : aug.std[ch]);
    float* plane = out + static_cast<int64_t>(ch) * h * w;
    for (int y = 0; y < h; ++y) {
      const uint8_t* row = img.ptr<uint8_t>(y);
      for (int x = 0; x < w; ++x) plane[y * w + x] = row[x * c + src_ch] * mul + add;
    }
  }
}

}  // namespace

void CheckNormalisation(const Augment& a, int64_t channels, const std::string& where) {
  for (const auto* v : {&a.mean, &a.std}) {
    FRUGAL_REQUIRE(v->empty() || static_cast<int64_t>(v->size()) == channels, where, ": augment.",
                   v == &a.mean ? "mean" : "std", " has ", v->size(), " values but the samples have ", channels,
                   " channels (give one per channel)");
  }
  for (float x : a.std) FRUGAL_REQUIRE(x > 0 && std::isfinite(x), where, ": augment.std ", x, " must be positive");
  for (float x : a.mean) FRUGAL_REQUIRE(std::isfinite(x), where, ": augment.mean ", x, " is not a number");
}

void DecodeAugmentImage(const std::string& encoded, const Shape& data_shape, const Augment& aug, uint64_t seed,
                        int64_t epoch, int64_t sample, const std::string& where, float* out) {
  FRUGAL_REQUIRE(
      data_shape.ndim() == 3 && (data_shape[0] == 1 || data_shape[0] == 3) && data_shape[1] >= 1 && data_shape[2] >= 1,
      where, ": images decode to (c,h,w) with c 1 (grey) or 3 (RGB), not ", data_shape);
  const int c = static_cast<int>(data_shape[0]), h = static_cast<int>(data_shape[1]),
            w = static_cast<int>(data_shape[2]);
  // Decode (grey for one channel, else colour).
  cv::Mat img = imgcodecs::Decode(encoded.data(), encoded.size(), c == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  FRUGAL_REQUIRE(!img.empty() && img.depth() == CV_8U, where, ": cannot decode the image (", encoded.size(),
                 " bytes): not a JPEG, PNG or other format OpenCV reads, or corrupt (re-create the .rec with "
                 "`frugal im2rec`)");
  std::mt19937_64 rng = io::SampleRng(seed, epoch, sample);
  // 1. Resize the shorter side.
  if (aug.resize > 0) img = ResizeShorter(img, aug.resize);
  // 2. Crop to (h, w).
  if (aug.rand_resized_crop) {
    img = ResizeTo(img(RandomResizedRegion(img, aug, rng)), w, h);
  } else {
    if (aug.pad > 0) {
      cv::Mat padded;
      cv::copyMakeBorder(img, padded, aug.pad, aug.pad, aug.pad, aug.pad, cv::BORDER_CONSTANT, cv::Scalar::all(0));
      img = padded;
    }
    FRUGAL_REQUIRE(img.rows >= h && img.cols >= w, where, ": the image is ", img.rows, "x", img.cols,
                   " (height x width, after resize and pad) but the crop is ", h, "x", w,
                   " (set augment.resize to at least ", std::max(h, w), ", or make the .rec with a larger --resize)");
    const int y0 = aug.rand_crop ? static_cast<int>(io::UniformBelow(rng, img.rows - h + 1)) : (img.rows - h) / 2;
    const int x0 = aug.rand_crop ? static_cast<int>(io::UniformBelow(rng, img.cols - w + 1)) : (img.cols - w) / 2;
    img = img(cv::Rect(x0, y0, w, h));
  }
  // 3. Mirror.
  if (aug.mirror && (rng() >> 63) != 0) {
    cv::Mat flipped;
    cv::flip(img, flipped, 1);
    img = flipped;
  }
  // 4. Normalise into CHW floats.
  ToChw(img, aug, out);
}

}  // namespace frugal
