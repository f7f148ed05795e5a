// Speed of the image iterator (not a test; figures in docs/benchmarks.md,
// "Data"). Writes a few hundred synthetic JPEGs into class folders of a temp
// directory, packs them with `frugal im2rec`, then times ImageRecordIter
// epochs for a few augmentation settings and thread counts.
//
//   cmake --build build --target bench_data && build/bench_data [images] [width] [height]
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "frugal/io.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A photo-like test image: smooth colour gradients, a few shapes and noise,
// so JPEG sizes and decode times resemble real photographs.
cv::Mat MakeImage(int w, int h, int i) {
  cv::Mat img(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      img.at<cv::Vec3b>(y, x) = cv::Vec3b((x * 255 / w + i * 7) % 256, (y * 255 / h + i * 13) % 256, (x + y + i) % 256);
  cv::RNG rng(i);
  for (int k = 0; k < 8; ++k)
    cv::circle(img, cv::Point(rng.uniform(0, w), rng.uniform(0, h)), rng.uniform(10, h / 3),
               cv::Scalar(rng.uniform(0, 255), rng.uniform(0, 255), rng.uniform(0, 255)), -1);
  cv::Mat noise(h, w, CV_8UC3);
  rng.fill(noise, cv::RNG::NORMAL, 0, 12);
  return img + noise;
}

// CPU seconds (user + system) of the whole process so far.
double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Run(const std::string& name, frugal::ImageRecordIterOptions o, int epochs) {
  frugal::ImageRecordIter it(o);
  std::vector<float> data(o.batch_size * o.data_shape.Size()), label(o.batch_size * o.label_width);
  int64_t valid = 0, images = 0;
  it.Reset(0);  // warm-up epoch: page cache, thread start
  while (it.Next(data.data(), label.data(), &valid)) {}
  auto t0 = Clock::now();
  const double cpu0 = CpuSeconds();
  for (int e = 1; e <= epochs; ++e) {
    it.Reset(e);
    while (it.Next(data.data(), label.data(), &valid)) images += valid;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  const double rate = images / secs;
  // CPU time per image shows the cost without the machine's load: on a busy
  // machine the wall-clock rate is lower than threads / cpu_per_image.
  std::printf("%-50s threads %d  %7.1f images/s  %5.2f ms CPU/image  %4.0f%% CPU\n", name.c_str(), o.threads, rate,
              1e3 * cpu / images, 100 * cpu / secs);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 400;
  const int w = argc > 2 ? std::atoi(argv[2]) : 500, h = argc > 3 ? std::atoi(argv[3]) : 375;
  char tmpl[] = "/tmp/frugal_bench_data_XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const fs::path dir = tmpl;
  for (int c = 0; c < 4; ++c) fs::create_directories(dir / "images" / ("class" + std::to_string(c)));
  for (int i = 0; i < n; ++i)
    cv::imwrite((dir / "images" / ("class" + std::to_string(i % 4)) / (std::to_string(i) + ".jpg")).string(),
                MakeImage(w, h, i), {cv::IMWRITE_JPEG_QUALITY, 90});
  const std::string prefix = (dir / "bench").string();
  const std::string cmd = std::string(FRUGAL_BIN) + " im2rec --input " + (dir / "images").string() + " --output " +
                          prefix + " --quality 90 > /dev/null";
  if (std::system(cmd.c_str()) != 0) return 1;
  std::printf("%d JPEGs of %dx%d, %lld bytes in %s.rec\n", n, w, h,
              static_cast<long long>(fs::file_size(prefix + ".rec")), prefix.c_str());

  frugal::ImageRecordIterOptions o;
  o.path = prefix + ".rec";
  o.index_path = prefix + ".idx";
  o.data_shape = frugal::Shape{3, 224, 224};
  o.batch_size = 32;
  o.shuffle = true;
  o.seed = 1;
  o.aug.mean = {0.485f, 0.456f, 0.406f};
  o.aug.std = {0.229f, 0.224f, 0.225f};
  for (int threads : {1, 2}) {
    o.threads = threads;
    frugal::ImageRecordIterOptions train = o;
    train.aug.rand_resized_crop = true;
    train.aug.mirror = true;
    Run("train: rand_resized_crop 224, mirror, normalise", train, 3);
    frugal::ImageRecordIterOptions val = o;
    val.shuffle = false;
    val.aug.resize = 256;
    Run("val: resize 256, centre crop 224, normalise", val, 3);
  }
  fs::remove_all(dir);
  return 0;
}
