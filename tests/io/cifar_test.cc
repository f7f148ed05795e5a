// LoadCifar: CIFAR-10 and CIFAR-100 binary batches, written by the test, and
// every malformation it must refuse.
#include <gtest/gtest.h>

#include "frugal/io.h"
#include "test_util.h"

namespace frugal::test {
namespace {

constexpr int kPixels = 3072;

// The byte of pixel (c, y, x) of record i: a pattern that differs per record,
// channel, row and column.
uint8_t Pixel(int i, int c, int y, int x) { return static_cast<uint8_t>(i * 31 + c * 101 + y * 7 + x * 3); }

// CIFAR-10 records (label, 3072 pixels) or CIFAR-100 (coarse, fine, pixels).
std::string Records(const std::vector<std::vector<uint8_t>>& labels) {
  std::string bytes;
  for (size_t i = 0; i < labels.size(); ++i) {
    for (uint8_t l : labels[i]) bytes.push_back(static_cast<char>(l));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) bytes.push_back(static_cast<char>(Pixel(static_cast<int>(i), c, y, x)));
  }
  return bytes;
}

TEST(Cifar, Cifar10RecordsAreChwAndScaled) {
  TempDir dir;
  std::string f = dir.Write("data_batch_1.bin", Records({{3}, {9}, {0}}));
  Dataset ds = LoadCifar({f}, CifarLabel::kCifar10, 0.5f);
  EXPECT_EQ(ds.sample_shape, (Shape{3, 32, 32}));
  ASSERT_EQ(ds.num_samples, 3);
  EXPECT_EQ(ds.y, (std::vector<float>{3, 9, 0}));
  ASSERT_EQ(ds.pixels.size(), 3u * kPixels);
  EXPECT_EQ(ds.scale, 0.5f);
  for (int i : {0, 2})
    for (int c : {0, 1, 2})
      for (int y : {0, 17, 31})
        for (int x : {0, 5, 31}) EXPECT_EQ(ds.pixels[i * kPixels + (c * 32 + y) * 32 + x], Pixel(i, c, y, x));
}

TEST(Cifar, FilesAreConcatenatedInOrder) {
  TempDir dir;
  std::string a = dir.Write("a.bin", Records({{1}, {2}}));
  std::string b = dir.Write("b.bin", Records({{7}}));
  Dataset ds = LoadCifar({a, b});
  EXPECT_EQ(ds.num_samples, 3);
  EXPECT_EQ(ds.y, (std::vector<float>{1, 2, 7}));
  // Default scale 1/255; b's record 0 comes after a's two records.
  EXPECT_EQ(ds.scale, 1.0f / 255.0f);
  EXPECT_EQ(ds.pixels[2 * kPixels + 5], Pixel(0, 0, 0, 5));
}

TEST(Cifar, Cifar100PicksCoarseOrFine) {
  TempDir dir;
  std::string f = dir.Write("train.bin", Records({{19, 99}, {4, 42}}));
  EXPECT_EQ(LoadCifar({f}, CifarLabel::kCoarse).y, (std::vector<float>{19, 4}));
  Dataset fine = LoadCifar({f}, CifarLabel::kFine);
  EXPECT_EQ(fine.y, (std::vector<float>{99, 42}));
  EXPECT_EQ(fine.pixels[kPixels + 1], Pixel(1, 0, 0, 1)) << "pixels start after two label bytes";
}

TEST(Cifar, TruncatedFileNamesRecordAndSizes) {
  TempDir dir;
  std::string bytes = Records({{1}, {2}, {3}});
  std::string f = dir.Write("cut.bin", bytes.substr(0, 2 * 3073 + 100));
  ExpectError([&] { LoadCifar({f}); }, {f, "truncated", "record 2", "3073", "has 100", "6246 bytes"});
}

TEST(Cifar, WrongVariantIsSuggested) {
  TempDir dir;
  std::string f = dir.Write("train.bin", Records({{1, 2}, {3, 4}, {5, 6}}));  // CIFAR-100 sizes
  ExpectError([&] { LoadCifar({f}, CifarLabel::kCifar10); }, {f, "wrong-size", "is this CIFAR-100?"});
  std::string g = dir.Write("batch.bin", Records({{1}, {2}, {3}, {4}}));  // CIFAR-10 sizes
  ExpectError([&] { LoadCifar({g}, CifarLabel::kFine); }, {g, "is this CIFAR-10?"});
}

TEST(Cifar, LabelOutOfRangeNamesRecord) {
  TempDir dir;
  std::string f = dir.Write("bad.bin", Records({{1}, {10}}));
  ExpectError([&] { LoadCifar({f}); }, {f, "record 1", "byte offset 3073", "label 10", "only 10 classes"});
  std::string g = dir.Write("bad100.bin", Records({{20, 5}}));
  ExpectError([&] { LoadCifar({g}, CifarLabel::kCoarse); }, {g, "coarse label 20"});
  EXPECT_EQ(LoadCifar({g}, CifarLabel::kFine).y[0], 5) << "the fine label is in range";
}

TEST(Cifar, EmptyMissingAndDirectory) {
  TempDir dir;
  std::string f = dir.Write("empty.bin", "");
  ExpectError([&] { LoadCifar({f}); }, {f, "empty"});
  ExpectError([&] { LoadCifar({dir.File("nope.bin")}); }, {dir.File("nope.bin"), "cannot open"});
  ExpectError([&] { LoadCifar({dir.path()}); }, {dir.path(), "is a folder; give the CIFAR file"});
  ExpectError([&] { LoadCifar({}); }, {"no files"});
}

}  // namespace
}  // namespace frugal::test
