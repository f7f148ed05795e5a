// ImageRecordIter and DecodeAugmentImage: exact pixels through decode, crop
// and normalisation (lossless PNGs), mirror and random crops, determinism
// across thread counts and prefetch depths, data-parallel parts, and errors.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "frugal/io.h"
#include "frugal/recordio.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// The BGR pixel OpenCV stores at (y, x) of image i.
cv::Vec3b Bgr(int i, int y, int x) {
  return cv::Vec3b(static_cast<uint8_t>(i * 11 + x * 9), static_cast<uint8_t>(y * 13 + i),
                   static_cast<uint8_t>(x + y * 3 + 100));
}

cv::Mat MakeImage(int i, int h, int w) {
  cv::Mat img(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) img.at<cv::Vec3b>(y, x) = Bgr(i, y, x);
  return img;
}

std::string Png(const cv::Mat& img) {
  std::vector<uint8_t> buf;
  EXPECT_TRUE(cv::imencode(".png", img, buf));
  return std::string(buf.begin(), buf.end());
}

// n PNG images of h x w, image i labelled i; writes dir/x.rec and dir/x.idx.
std::string WriteRec(const TempDir& dir, int n, int h, int w) {
  RecordWriter writer(dir.File("x.rec"));
  std::vector<RecordIndexEntry> idx;
  for (int i = 0; i < n; ++i) {
    std::string png = Png(MakeImage(i, h, w));
    idx.push_back({i, writer.Write(PackImageRecord({static_cast<float>(i)}, i, 0, png.data(), png.size()))});
  }
  writer.Close();
  WriteRecordIndex(dir.File("x.idx"), idx);
  return dir.File("x.rec");
}

struct Batches {
  std::vector<std::vector<float>> data, label;
  std::vector<int64_t> valid;
};

// Every batch of epochs [0, epochs).
Batches ReadEpochs(const ImageRecordIterOptions& o, int epochs) {
  ImageRecordIter it(o);
  Batches b;
  for (int e = 0; e < epochs; ++e) {
    it.Reset(e);
    std::vector<float> d(o.batch_size * o.data_shape.Size()), l(o.batch_size * o.label_width);
    int64_t v = 0;
    while (it.Next(d.data(), l.data(), &v)) {
      b.data.push_back(d);
      b.label.push_back(l);
      b.valid.push_back(v);
    }
  }
  return b;
}

ImageRecordIterOptions Options(const std::string& rec, Shape shape, int64_t batch) {
  ImageRecordIterOptions o;
  o.path = rec;
  o.data_shape = shape;
  o.batch_size = batch;
  return o;
}

TEST(ImageRecordIter, CentreCropNormalisesToRgbChw) {
  TempDir dir;
  std::string rec = WriteRec(dir, 3, 6, 8);
  ImageRecordIterOptions o = Options(rec, Shape{3, 4, 4}, 3);
  o.aug.scale = 0.5f;
  o.aug.mean = {1.f, 2.f, 3.f};
  o.aug.std = {2.f, 4.f, 8.f};
  Batches b = ReadEpochs(o, 1);
  ASSERT_EQ(b.data.size(), 1u);
  EXPECT_EQ(b.label[0], (std::vector<float>{0, 1, 2}));
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) {
          // Centre crop of 6x8 to 4x4 starts at row 1, column 2; channel c is RGB, OpenCV's 2 - c.
          const float p = Bgr(i, y + 1, x + 2)[2 - c];
          ASSERT_FLOAT_EQ(b.data[0][((i * 3 + c) * 4 + y) * 4 + x], (p * 0.5f - o.aug.mean[c]) / o.aug.std[c])
              << i << " " << c << " " << y << " " << x;
        }
}

TEST(ImageRecordIter, GreyImagesAndIndexOrScanAgree) {
  TempDir dir;
  std::string rec = WriteRec(dir, 5, 4, 4);
  ImageRecordIterOptions o = Options(rec, Shape{1, 4, 4}, 2);
  Batches scanned = ReadEpochs(o, 1);
  o.index_path = dir.File("x.idx");
  Batches indexed = ReadEpochs(o, 1);
  EXPECT_EQ(scanned.data, indexed.data);
  ASSERT_EQ(indexed.valid, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(indexed.label[2], (std::vector<float>{4, 0})) << "the last batch wraps to the start";
  const std::string png = Png(MakeImage(1, 4, 4));
  cv::Mat grey = cv::imdecode(std::vector<uint8_t>(png.begin(), png.end()), cv::IMREAD_GRAYSCALE);
  EXPECT_FLOAT_EQ(indexed.data[0][16 + 5], grey.at<uint8_t>(1, 1) / 255.f);
}

TEST(ImageRecordIter, MirrorFlipsHalfTheTime) {
  TempDir dir;
  std::string rec = WriteRec(dir, 16, 4, 4);
  ImageRecordIterOptions o = Options(rec, Shape{3, 4, 4}, 16);
  Batches plain = ReadEpochs(o, 1);
  o.aug.mirror = true;
  Batches m = ReadEpochs(o, 1);
  int flipped = 0;
  for (int i = 0; i < 16; ++i) {
    const float* p = plain.data[0].data() + i * 48;
    const float* q = m.data[0].data() + i * 48;
    bool same = true, flip = true;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) {
          same &= q[(c * 4 + y) * 4 + x] == p[(c * 4 + y) * 4 + x];
          flip &= q[(c * 4 + y) * 4 + x] == p[(c * 4 + y) * 4 + 3 - x];
        }
    EXPECT_TRUE(same || flip) << "image " << i << " is neither itself nor its mirror";
    flipped += flip;
  }
  EXPECT_GT(flipped, 2);
  EXPECT_LT(flipped, 14);
}

TEST(ImageRecordIter, PaddedRandomCropIsAShiftedWindow) {
  TempDir dir;
  std::string rec = WriteRec(dir, 20, 4, 4);
  ImageRecordIterOptions o = Options(rec, Shape{3, 4, 4}, 20);
  o.aug.pad = 1;
  o.aug.rand_crop = true;
  Batches b = ReadEpochs(o, 1);
  std::set<std::pair<int, int>> shifts;
  for (int i = 0; i < 20; ++i) {
    const float* q = b.data[0].data() + i * 48;
    bool found = false;
    for (int dy = -1; dy <= 1 && !found; ++dy)
      for (int dx = -1; dx <= 1 && !found; ++dx) {
        bool ok = true;
        for (int c = 0; c < 3; ++c)
          for (int y = 0; y < 4; ++y)
            for (int x = 0; x < 4; ++x) {
              const int sy = y + dy, sx = x + dx;
              const float want = (sy < 0 || sy > 3 || sx < 0 || sx > 3) ? 0.f : Bgr(i, sy, sx)[2 - c] / 255.f;
              ok &= std::abs(q[(c * 4 + y) * 4 + x] - want) < 1e-6f;
            }
        if (ok) shifts.insert({dy, dx}), found = true;
      }
    EXPECT_TRUE(found) << "image " << i << " is not a window of its padded self";
  }
  EXPECT_GE(shifts.size(), 4u) << "random crops should land in several places";
}

TEST(ImageRecordIter, DeterministicAcrossThreadsAndPrefetch) {
  TempDir dir;
  std::string rec = WriteRec(dir, 23, 12, 16);
  ImageRecordIterOptions o = Options(rec, Shape{3, 8, 8}, 5);
  o.shuffle = true;
  o.seed = 42;
  o.aug.rand_resized_crop = true;
  o.aug.mirror = true;
  o.threads = 1;
  o.prefetch = 0;
  Batches one = ReadEpochs(o, 2);
  o.threads = 4;
  o.prefetch = 3;
  Batches four = ReadEpochs(o, 2);
  EXPECT_EQ(one.data, four.data);
  EXPECT_EQ(one.label, four.label);
  EXPECT_NE(one.data[0], one.data[5]) << "epoch 1 differs from epoch 0";
  o.seed = 43;
  EXPECT_NE(ReadEpochs(o, 1).data, std::vector<std::vector<float>>(one.data.begin(), one.data.begin() + 5));
}

// Parts of 3 with batch 2: each global batch of 6 shuffled records is the
// parts' rows side by side; the last one wraps (7 records: 1 real row, on
// part 0).
TEST(ImageRecordIter, PartsReadTheirRowsOfEveryGlobalBatch) {
  TempDir dir;
  std::string rec = WriteRec(dir, 7, 8, 8);
  ImageRecordIterOptions o = Options(rec, Shape{3, 6, 6}, 6);
  o.aug.rand_crop = true;
  o.aug.mirror = true;
  o.shuffle = true;
  o.seed = 5;
  Batches all = ReadEpochs(o, 2);
  o.batch_size = 2;
  std::vector<Batches> parts;
  for (int k = 0; k < 3; ++k) {
    o.shard = {k, 3};
    parts.push_back(ReadEpochs(o, 2));
  }
  ASSERT_EQ(all.label.size(), 4u) << "2 global batches per epoch";
  for (size_t b = 0; b < all.label.size(); ++b) {
    std::vector<float> data, label;
    int64_t valid = 0;
    for (const Batches& p : parts) {
      ASSERT_EQ(p.label.size(), all.label.size());
      data.insert(data.end(), p.data[b].begin(), p.data[b].end());
      label.insert(label.end(), p.label[b].begin(), p.label[b].end());
      valid += p.valid[b];
    }
    EXPECT_EQ(label, all.label[b]) << "batch " << b;
    EXPECT_EQ(data, all.data[b]) << "batch " << b << ": a record's augmentation depends on its record number";
    EXPECT_EQ(valid, all.valid[b]) << "batch " << b;
  }
  EXPECT_EQ(parts[0].valid[1], 1);
  EXPECT_EQ(parts[1].valid[1], 0);
}

TEST(ImageRecordIter, RandomResizedCropStaysInsideTheImage) {
  // A constant image: any region resized is the same constant, so the
  // output is exact whatever region is drawn.
  TempDir dir;
  RecordWriter w(dir.File("c.rec"));
  std::string png = Png(cv::Mat(30, 50, CV_8UC3, cv::Scalar(10, 20, 30)));
  for (int i = 0; i < 8; ++i) w.Write(PackImageRecord({1.f}, i, 0, png.data(), png.size()));
  w.Close();
  ImageRecordIterOptions o = Options(dir.File("c.rec"), Shape{3, 7, 5}, 8);
  o.aug.rand_resized_crop = true;
  o.aug.scale = 1.f;
  Batches b = ReadEpochs(o, 1);
  for (int i = 0; i < 8; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(b.data[0][(i * 3 + c) * 35 + 17], 30.f - 10.f * c);
}

TEST(ImageRecordIter, MultipleLabels) {
  TempDir dir;
  RecordWriter w(dir.File("m.rec"));
  std::string png = Png(MakeImage(0, 2, 2));
  w.Write(PackImageRecord({1.f, 2.f, 3.f}, 0, 0, png.data(), png.size()));
  w.Close();
  ImageRecordIterOptions o = Options(dir.File("m.rec"), Shape{3, 2, 2}, 1);
  o.label_width = 2;
  ImageRecordIter it(o);
  EXPECT_EQ(it.label_shape(), Shape{2});
  EXPECT_EQ(ReadEpochs(o, 1).label[0], (std::vector<float>{1.f, 2.f}));
  o.label_width = 4;
  ExpectError([&] { ReadEpochs(o, 1); }, {"record 0", "3 labels but label_width is 4"});
}

TEST(ImageRecordIter, BadRecordsAndOptionsAreNamed) {
  TempDir dir;
  RecordWriter w(dir.File("bad.rec"));
  std::string png = Png(MakeImage(0, 4, 4));
  w.Write(PackImageRecord({0.f}, 0, 0, png.data(), png.size()));
  w.Write(PackImageRecord({1.f}, 1, 0, "not an image", 12));
  w.Close();
  const std::string rec = dir.File("bad.rec");
  ImageRecordIterOptions o = Options(rec, Shape{3, 4, 4}, 1);
  ImageRecordIter it(o);
  std::vector<float> d(48), l(1);
  EXPECT_TRUE(it.Next(d.data(), l.data(), nullptr));
  ExpectError([&] { it.Next(d.data(), l.data(), nullptr); }, {rec, "record 1 (byte offset", "cannot decode"});
  o.data_shape = Shape{3, 5, 4};
  ExpectError([&] { ReadEpochs(o, 1); }, {rec, "record 0", "image is 4x4", "crop is 5x4", "augment.resize"});
  ExpectError([&] { ImageRecordIter(Options(rec, Shape{2, 4, 4}, 1)); }, {rec, "c 1 (grey) or 3"});
  o = Options(rec, Shape{3, 4, 4}, 1);
  o.aug.mean = {1.f};
  ExpectError([&] { ImageRecordIter x(o); }, {"augment.mean has 1 values", "3 channels"});
  o = Options(rec, Shape{3, 4, 4}, 1);
  o.aug.scale = std::nanf("");
  ExpectError([&] { ImageRecordIter x(o); }, {rec, "recordio.scale nan must be a number other than 0"});
  o = Options(rec, Shape{3, 4, 4}, 1);
  o.aug.mean = {0.f, std::nanf(""), 0.f};
  ExpectError([&] { ImageRecordIter x(o); }, {rec, "augment.mean nan is not a number"});
  o = Options(rec, Shape{3, 4, 4}, 1);
  o.shard = {3, 3};
  ExpectError([&] { ImageRecordIter x(o); }, {rec, "data shard: part 3 of 3 is not a part"});
  ExpectError([&] { ImageRecordIter(Options(dir.Write("e.rec", ""), Shape{3, 4, 4}, 1)); }, {"holds no records"});
}

TEST(Im2Rec, FolderToRecAndIdxReadsBack) {
  TempDir dir;
  for (const char* cls : {"cat", "ant"}) std::filesystem::create_directories(dir.File("img/") + cls);
  // ant (label 0): images 0, 1; cat (label 1): image 2. PNG keeps pixels exact.
  cv::imwrite(dir.File("img/ant/b.png"), MakeImage(1, 5, 6));
  cv::imwrite(dir.File("img/ant/a.png"), MakeImage(0, 5, 6));
  cv::imwrite(dir.File("img/cat/z.png"), MakeImage(2, 5, 6));
  dir.Write("img/cat/notes.txt", "not an image");
  RunResult r = RunFrugal("im2rec --input " + dir.File("img") + " --output " + dir.File("out") + " --encoding .png");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 images"), std::string::npos) << r.output;
  std::vector<RecordIndexEntry> idx = ReadRecordIndex(dir.File("out.idx"));
  ASSERT_EQ(idx.size(), 3u);
  RecordReader reader(dir.File("out.rec"));
  for (int i = 0; i < 3; ++i) {
    ImageRecord rec = UnpackImageRecord(reader.ReadAt(idx[i].offset), "out.rec");
    EXPECT_EQ(idx[i].key, i);
    EXPECT_EQ(rec.id, static_cast<uint64_t>(i));
    EXPECT_EQ(rec.labels, std::vector<float>{i < 2 ? 0.f : 1.f});
    cv::Mat img = cv::imdecode(std::vector<uint8_t>(rec.image.begin(), rec.image.end()), cv::IMREAD_COLOR);
    EXPECT_EQ(cv::norm(img, MakeImage(i, 5, 6), cv::NORM_INF), 0) << "image " << i;
  }
  std::ifstream lst(dir.File("out.lst"));
  std::string first;
  std::getline(lst, first);
  EXPECT_EQ(first, "0\t0\tant/a.png");
}

TEST(Im2Rec, ListWithLabelsResizeCropAndQuality) {
  TempDir dir;
  cv::imwrite(dir.File("wide.png"), MakeImage(0, 40, 80));
  cv::imwrite(dir.File("tall.png"), MakeImage(1, 60, 30));
  dir.Write("x.lst", "10\t1\t2.5\twide.png\n11\t0\t-1\ttall.png\n");
  RunResult r = RunFrugal("im2rec --input " + dir.File("x.lst") + " --output " + dir.File("a") + " --resize 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  RecordReader reader(dir.File("a.rec"));
  std::string s;
  std::vector<cv::Size> sizes;
  while (reader.Next(&s)) {
    ImageRecord rec = UnpackImageRecord(s, "a.rec");
    EXPECT_EQ(rec.flag, 2u);
    sizes.push_back(cv::imdecode(std::vector<uint8_t>(rec.image.begin(), rec.image.end()), cv::IMREAD_COLOR).size());
    if (sizes.size() == 1) { EXPECT_EQ(rec.labels, (std::vector<float>{1.f, 2.5f})); }
  }
  EXPECT_EQ(sizes, (std::vector<cv::Size>{{40, 20}, {20, 40}})) << "shorter side 20, aspect kept";
  EXPECT_EQ(ReadRecordIndex(dir.File("a.idx"))[1].key, 11);
  r = RunFrugal("im2rec --input " + dir.File("x.lst") + " --output " + dir.File("b") + " --center-crop --resize 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  RecordReader b(dir.File("b.rec"));
  ASSERT_TRUE(b.Next(&s));
  ImageRecord rec = UnpackImageRecord(s, "b.rec");
  EXPECT_EQ(cv::imdecode(std::vector<uint8_t>(rec.image.begin(), rec.image.end()), cv::IMREAD_COLOR).size(),
            cv::Size(16, 16));
  // --pass-through stores the file's bytes unchanged.
  ASSERT_EQ(
      RunFrugal("im2rec --input " + dir.File("x.lst") + " --output " + dir.File("p") + " --pass-through").exit_code, 0);
  RecordReader p(dir.File("p.rec"));
  ASSERT_TRUE(p.Next(&s));
  std::ifstream png(dir.File("wide.png"), std::ios::binary);
  EXPECT_EQ(UnpackImageRecord(s, "p.rec").image, std::string(std::istreambuf_iterator<char>(png), {}));
  // Lower JPEG quality, smaller file.
  ASSERT_EQ(RunFrugal("im2rec --input " + dir.File("x.lst") + " --output " + dir.File("q") + " --quality 10").exit_code,
            0);
  ASSERT_EQ(RunFrugal("im2rec --input " + dir.File("x.lst") + " --output " + dir.File("h")).exit_code, 0);
  EXPECT_LT(RecordReader(dir.File("q.rec")).file_size(), RecordReader(dir.File("h.rec")).file_size());
}

TEST(Im2Rec, ErrorsAreOneLine) {
  TempDir dir;
  dir.Write("x.lst", "0\t1\tmissing.jpg\n");
  RunResult r = RunFrugal("im2rec --input " + dir.File("x.lst") + " --output " + dir.File("o"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("frugal: error: " + dir.File("missing.jpg")), std::string::npos) << r.output;
  dir.Write("y.lst", "zero\t1\ta.jpg\n");
  r = RunFrugal("im2rec --input " + dir.File("y.lst") + " --output " + dir.File("o"));
  EXPECT_NE(r.output.find(dir.File("y.lst") + ":1: the index must be an integer"), std::string::npos) << r.output;
  r = RunFrugal("im2rec --input " + dir.File("y.lst") + " --output " + dir.File("o") + " --quality 0 --threads 1");
  EXPECT_NE(r.output.find("--quality 0 must be 1 to 100"), std::string::npos) << r.output;
  r = RunFrugal("im2rec --input " + dir.File("y.lst") + " --output " + dir.File("o") + " --pass-through --resize 8");
  EXPECT_NE(r.output.find("--pass_through stores files as they are"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace frugal::test
