// The DataIter family: DatasetIter (CHW augmentation, data-parallel parts),
// ArrayIter (the caller's arrays), TextIter
// (vocabularies, BPTT streams, shuffled sequences), SyntheticIter, and
// MakeDataIter from config messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "frugal.pb.h"
#include "frugal/io.h"
#include "test_util.h"

namespace frugal::test {
namespace {

// All batches of one epoch, concatenated.
struct Epoch {
  std::vector<float> data, label;
  std::vector<int64_t> valid;
};
Epoch ReadEpoch(DataIter* it, int64_t epoch) {
  it->Reset(epoch);
  Epoch e;
  std::vector<float> d(it->batch_size() * it->sample_shape().Size()), l(it->batch_size() * it->label_shape().Size());
  int64_t v = 0;
  while (it->Next(d.data(), l.data(), &v)) {
    e.data.insert(e.data.end(), d.begin(), d.end());
    e.label.insert(e.label.end(), l.begin(), l.end());
    e.valid.push_back(v);
  }
  return e;
}

// n samples of (c,h,w) at scale 1/2; byte k of the data set is (37 k) mod 251.
Dataset Chw(int64_t n, int64_t c, int64_t h, int64_t w) {
  Dataset ds;
  ds.sample_shape = Shape{c, h, w};
  ds.num_samples = n;
  ds.scale = 0.5f;
  for (int64_t k = 0; k < n * c * h * w; ++k) ds.pixels.push_back(static_cast<uint8_t>(37 * k % 251));
  for (int64_t i = 0; i < n; ++i) ds.y.push_back(static_cast<float>(i));
  return ds;
}

// The data set's values in its own order: pixel * scale.
std::vector<float> DatasetValues(const Dataset& ds) {
  std::vector<float> v;
  for (uint8_t p : ds.pixels) v.push_back(p * ds.scale);
  return v;
}

// ---------------------------------------------------------------- DatasetIter

TEST(DatasetIter, PlainBatchesAreScaledPixels) {
  Dataset ds = Chw(8, 1, 2, 2);
  DatasetIter it(ds, "t", 4, false, 7);
  Epoch e = ReadEpoch(&it, 0);
  EXPECT_EQ(e.data, DatasetValues(ds)) << "an unshuffled epoch reads every byte times the scale, in order";
  EXPECT_EQ(e.label, ds.y);
  EXPECT_EQ(e.valid, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(it.label_shape(), Shape(std::vector<int64_t>{}));
}

TEST(DatasetIter, PadCropMirrorNormalise) {
  const int64_t c = 2, h = 3, w = 4;
  Dataset ds = Chw(40, c, h, w);
  Augment aug;
  aug.pad = 1;
  aug.rand_crop = true;
  aug.mirror = true;
  aug.mean = {1.f, 2.f};
  aug.std = {2.f, 0.5f};
  DatasetIter it(ds, "t", 40, false, 3, aug);
  Epoch e = ReadEpoch(&it, 0);
  std::set<std::tuple<int, int, bool>> seen;
  for (int64_t i = 0; i < 40; ++i) {
    const float* q = e.data.data() + i * c * h * w;
    bool found = false;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx)
        for (bool flip : {false, true}) {
          bool ok = true;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t y = 0; y < h; ++y)
              for (int64_t x = 0; x < w; ++x) {
                const int64_t sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
                const float v = (sy < 0 || sy >= h || sx < 0 || sx >= w)
                                    ? 0.f
                                    : ds.pixels[((i * c + ch) * h + sy) * w + sx] * ds.scale;
                ok &= q[(ch * h + y) * w + x] == (v - aug.mean[ch]) / aug.std[ch];
              }
          if (ok && !found) seen.insert({dy, dx, flip}), found = true;
        }
    EXPECT_TRUE(found) << "sample " << i << " is no shifted, maybe mirrored window of its padded self";
  }
  EXPECT_GE(seen.size(), 8u) << "crops and flips should vary";
  // Centre crop with padding is the identity (before normalisation).
  Augment centre;
  centre.pad = 2;
  DatasetIter id(ds, "t", 40, false, 3, centre);
  EXPECT_EQ(ReadEpoch(&id, 0).data, DatasetValues(ds));
}

TEST(DatasetIter, AugmentationIsAFunctionOfSeedEpochAndSample) {
  Dataset ds = Chw(9, 1, 4, 4);
  Augment aug;
  aug.pad = 2;
  aug.rand_crop = true;
  aug.mirror = true;
  DatasetIter a(ds, "t", 3, true, 11, aug), b(ds, "t", 9, true, 11, aug), c(ds, "t", 3, true, 12, aug);
  // Different batch sizes, same samples in the same order: same values.
  EXPECT_EQ(ReadEpoch(&a, 1).data, ReadEpoch(&b, 1).data);
  EXPECT_NE(ReadEpoch(&a, 1).data, ReadEpoch(&c, 1).data);
  EXPECT_NE(ReadEpoch(&a, 1).data, ReadEpoch(&a, 2).data);
}

// Part r of N with batch b reads rows [r*b, (r+1)*b) of every global batch
// of N*b from the same shuffled order: the parts' batches side by side are
// one iterator's batches of N*b, wrapped rows and num_valid included.
TEST(DatasetIter, PartsReadTheirRowsOfEveryGlobalBatch) {
  Dataset ds = Chw(11, 1, 2, 1);
  for (int parts : {2, 3}) {
    for (int64_t b : {1, 2, 5}) {
      DatasetIter one(ds, "t", parts * b, true, 9);
      std::vector<Epoch> part;
      for (int r = 0; r < parts; ++r) {
        DatasetIter it(ds, "t", b, true, 9, {}, {r, parts});
        EXPECT_EQ(it.batches_per_epoch(), one.batches_per_epoch());
        part.push_back(ReadEpoch(&it, 2));
      }
      const Epoch want = ReadEpoch(&one, 2);
      Epoch got;
      for (size_t k = 0; k < want.valid.size(); ++k) {
        int64_t valid = 0;
        for (const Epoch& e : part) {
          got.label.insert(got.label.end(), e.label.begin() + k * b, e.label.begin() + (k + 1) * b);
          got.data.insert(got.data.end(), e.data.begin() + k * b * 2, e.data.begin() + (k + 1) * b * 2);
          valid += e.valid[k];
        }
        got.valid.push_back(valid);
      }
      EXPECT_EQ(got.label, want.label) << parts << " parts of batch " << b;
      EXPECT_EQ(got.data, want.data) << parts << " parts of batch " << b;
      EXPECT_EQ(got.valid, want.valid) << parts << " parts of batch " << b;
    }
  }
  // Unshuffled, 5 samples, 2 parts of 2: global batches {0,1 | 2,3} and {4,0 | 1,2}.
  Dataset five = Chw(5, 1, 1, 1);
  DatasetIter p0(five, "t", 2, false, 0, {}, {0, 2}), p1(five, "t", 2, false, 0, {}, {1, 2});
  EXPECT_EQ(ReadEpoch(&p0, 0).label, (std::vector<float>{0, 1, 4, 0}));
  EXPECT_EQ(ReadEpoch(&p1, 0).label, (std::vector<float>{2, 3, 1, 2}));
  EXPECT_EQ(ReadEpoch(&p0, 0).valid, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ReadEpoch(&p1, 0).valid, (std::vector<int64_t>{2, 0})) << "rank 1's rows of the last batch all wrap";
  EXPECT_EQ(p1.num_samples(), 5);
}

TEST(DatasetIter, Errors) {
  Dataset ds = Chw(5, 1, 1, 1);
  Augment resize;
  resize.resize = 8;
  ExpectError([&] { DatasetIter x(ds, "cfg: data.train", 2, false, 0, resize); },
              {"cfg: data.train", "RecordIO images only"});
  Augment mean;
  mean.mean = {0.f, 0.f};
  ExpectError([&] { DatasetIter x(ds, "t", 2, false, 0, mean); }, {"augment.mean has 2 values", "1 channels"});
  Dataset flat = Chw(3, 1, 1, 1);
  flat.sample_shape = Shape{1};
  Augment mirror;
  mirror.mirror = true;
  ExpectError([&] { DatasetIter x(flat, "t", 1, false, 0, mirror); }, {"needs (c,h,w) samples"});
  ExpectError([&] { DatasetIter x(ds, "t", 1, false, 0, {}, {6, 6}); }, {"t: data shard: part 6 of 6 is not a part"});
}

// ---------------------------------------------------------------- ArrayIter

// The caller's arrays batch as a DatasetIter over the same values: the same
// rows, shuffled or not, in parts, with the last batch wrapping; a label of
// several values per sample is copied whole.
TEST(ArrayIter, BatchesAsADatasetIterOfTheSameValues) {
  const Dataset ds = Chw(11, 1, 2, 1);
  const std::vector<float> x = DatasetValues(ds);
  for (bool shuffle : {false, true}) {
    for (int parts : {1, 3}) {
      for (int64_t b : {1, 4}) {
        for (int r = 0; r < parts; ++r) {
          DatasetIter want(ds, "t", b, shuffle, 9, {}, {r, parts});
          ArrayIter got(x.data(), ds.sample_shape, ds.y.data(), Shape(std::vector<int64_t>{}), 11, "t", b, shuffle, 9,
                        {r, parts});
          for (int64_t epoch : {0, 1}) {
            const Epoch w = ReadEpoch(&want, epoch), g = ReadEpoch(&got, epoch);
            EXPECT_EQ(g.data, w.data) << shuffle << " " << parts << " " << b;
            EXPECT_EQ(g.label, w.label) << shuffle << " " << parts << " " << b;
            EXPECT_EQ(g.valid, w.valid) << shuffle << " " << parts << " " << b;
          }
        }
      }
    }
  }
  const std::vector<float> seq = {0, 1, 2, 10, 11, 12, 20, 21, 22};  // 3 samples, labels of 3
  ArrayIter it(seq.data(), Shape{3}, seq.data(), Shape{3}, 3, "t", 2, false, 0);
  const Epoch e = ReadEpoch(&it, 0);
  EXPECT_EQ(e.label, (std::vector<float>{0, 1, 2, 10, 11, 12, 20, 21, 22, 0, 1, 2}));
  EXPECT_EQ(e.valid, (std::vector<int64_t>{2, 1}));
  EXPECT_THROW(ArrayIter(seq.data(), Shape{3}, seq.data(), Shape{3}, 0, "t", 2, false, 0), Error);
  EXPECT_THROW(ArrayIter(seq.data(), Shape{3}, seq.data(), Shape{3}, 3, "t", 0, false, 0), Error);
}

// ---------------------------------------------------------------- TextIter

TEST(TextIter, CharVocabularyAndBpttStreams) {
  TempDir dir;
  TextIterOptions o;
  o.path = dir.Write("c.txt", "abcdefghijklmnopqrstuvwxyz");
  o.batch_size = 2;
  o.seq_len = 3;
  TextIter it(o);
  EXPECT_EQ(it.vocab().size(), 27) << "<unk> and 26 letters";
  EXPECT_EQ(it.vocab().tokens[0], "<unk>");
  EXPECT_EQ(it.vocab().Id("a"), 1);
  EXPECT_EQ(it.vocab().Id("?"), 0);
  EXPECT_EQ(it.sample_shape(), Shape{3});
  EXPECT_EQ(it.label_shape(), Shape{3});
  // Streams "abcdefghijklm" and "nopqrstuvwxyz"; (13 - 1) / 3 = 4 batches.
  EXPECT_EQ(it.batches_per_epoch(), 4);
  Epoch e = ReadEpoch(&it, 0);
  auto id = [](char c) { return static_cast<float>(c - 'a' + 1); };
  // Batch 0: rows "abc" and "nop"; batch 1 continues them: "def" and "qrs".
  EXPECT_EQ(std::vector<float>(e.data.begin(), e.data.begin() + 12),
            (std::vector<float>{id('a'), id('b'), id('c'), id('n'), id('o'), id('p'), id('d'), id('e'), id('f'),
                                id('q'), id('r'), id('s')}));
  EXPECT_EQ(std::vector<float>(e.label.begin(), e.label.begin() + 6),
            (std::vector<float>{id('b'), id('c'), id('d'), id('o'), id('p'), id('q')}));
  EXPECT_EQ(e.label.back(), id('z')) << "the last label is stream 2's last token";
  EXPECT_EQ(e.label[3 * 6 + 2], id('m')) << "and row 0 of the last batch ends with stream 1's";
  EXPECT_EQ(e.valid, (std::vector<int64_t>(4, 2)));
  EXPECT_EQ(ReadEpoch(&it, 1).data, e.data) << "BPTT epochs are all the same";
}

TEST(TextIter, WordVocabularyWithEosAndUnknowns) {
  TempDir dir;
  std::string text = "the cat sat\n\nthe  dog\n";
  Vocabulary v = BuildVocabulary(text, TextLevel::kWord);
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"<unk>", "the", "cat", "sat", "<eos>", "dog"}));
  EXPECT_EQ(Tokenize(text, v), (std::vector<int64_t>{1, 2, 3, 4, 4, 1, 5, 4}));
  EXPECT_EQ(Tokenize("a cat", v), (std::vector<int64_t>{0, 2, 4})) << "unterminated last line still ends in <eos>";
  TextIterOptions o;
  o.path = dir.Write("val.txt", "the bird sat\n");
  o.vocab_path = dir.Write("train.txt", text);
  o.level = TextLevel::kWord;
  o.batch_size = 1;
  o.seq_len = 3;
  TextIter it(o);
  Epoch e = ReadEpoch(&it, 0);
  EXPECT_EQ(e.data, (std::vector<float>{1, 0, 3}));
  EXPECT_EQ(e.label, (std::vector<float>{0, 3, 4}));
}

// BPTT streams and shuffled sequences alike: 2 parts of batch 2 read, side
// by side, the batches of one iterator of batch 4.
TEST(TextIter, PartsReadTheirRowsOfEveryGlobalBatch) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 61; ++i) text.push_back(static_cast<char>('!' + i));
  for (bool bptt : {true, false}) {
    TextIterOptions o;
    o.path = dir.Write("t.txt", text);
    o.bptt = bptt;
    o.shuffle = !bptt;
    o.seed = 9;
    o.seq_len = 3;
    o.batch_size = 4;
    TextIter one(o);
    const Epoch want = ReadEpoch(&one, 1);
    o.batch_size = 2;
    std::vector<Epoch> part;
    for (int r = 0; r < 2; ++r) {
      o.shard = {r, 2};
      TextIter it(o);
      EXPECT_EQ(it.batches_per_epoch(), one.batches_per_epoch());
      part.push_back(ReadEpoch(&it, 1));
    }
    Epoch got;
    for (size_t k = 0; k < want.valid.size(); ++k) {
      for (const Epoch& e : part) {
        got.data.insert(got.data.end(), e.data.begin() + k * 6, e.data.begin() + (k + 1) * 6);
        got.label.insert(got.label.end(), e.label.begin() + k * 6, e.label.begin() + (k + 1) * 6);
      }
      got.valid.push_back(part[0].valid[k] + part[1].valid[k]);
    }
    EXPECT_EQ(got.data, want.data) << (bptt ? "bptt" : "sequences");
    EXPECT_EQ(got.label, want.label) << (bptt ? "bptt" : "sequences");
    EXPECT_EQ(got.valid, want.valid) << (bptt ? "bptt" : "sequences");
  }
}

TEST(TextIter, ShuffledSequencesCoverTheCorpus) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 61; ++i) text.push_back(static_cast<char>('!' + i));
  TextIterOptions o;
  o.path = dir.Write("t.txt", text);
  o.bptt = false;
  o.shuffle = true;
  o.seed = 9;
  o.batch_size = 4;
  o.seq_len = 6;
  TextIter it(o);
  EXPECT_EQ(it.num_samples(), 10) << "(61 - 1) / 6 sequences";
  EXPECT_EQ(it.batches_per_epoch(), 3);
  Epoch e = ReadEpoch(&it, 0);
  EXPECT_EQ(e.valid, (std::vector<int64_t>{4, 4, 2}));
  std::set<float> starts;
  for (int r = 0; r < 10; ++r) {
    starts.insert(e.data[r * 6]);
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(e.label[r * 6 + k], e.data[r * 6 + k] + 1) << "the label is the next character";
      if (k) { EXPECT_EQ(e.data[r * 6 + k], e.data[r * 6 + k - 1] + 1) << "a sequence is contiguous"; }
    }
  }
  EXPECT_EQ(starts.size(), 10u) << "every sequence once per epoch";
  EXPECT_NE(ReadEpoch(&it, 1).data, e.data) << "each epoch has its own order";
}

TEST(TextIter, ErrorsNameTheFile) {
  TempDir dir;
  TextIterOptions o;
  o.path = dir.Write("small.txt", "abcdef");
  o.batch_size = 3;
  o.seq_len = 2;
  ExpectError([&] { TextIter it(o); }, {"small.txt", "3 streams give 2 tokens each", "seq_len + 1 = 3"});
  o.path = dir.File("none.txt");
  ExpectError([&] { TextIter it(o); }, {"none.txt", "cannot open", "prepare.sh"});
  o.path = dir.Write("empty.txt", "");
  ExpectError([&] { TextIter it(o); }, {"empty.txt", "empty"});
}

// ---------------------------------------------------------------- SyntheticIter

TEST(SyntheticIter, SeededRangesAndBatches) {
  SyntheticIterOptions o;
  o.sample_shape = Shape{2, 3};
  o.num_classes = 5;
  o.num_samples = 10;
  o.batch_size = 4;
  o.min = -1.f;
  o.max = 2.f;
  o.seed = 3;
  SyntheticIter a(o), b(o);
  Epoch ea = ReadEpoch(&a, 0);
  EXPECT_EQ(ea.valid, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(ea.data, ReadEpoch(&b, 0).data);
  EXPECT_EQ(ea.data, ReadEpoch(&a, 5).data);
  std::set<float> labels(ea.label.begin(), ea.label.end());
  for (float l : labels) EXPECT_TRUE(l >= 0 && l < 5 && l == static_cast<int>(l)) << l;
  for (float x : ea.data) EXPECT_TRUE(x >= -1.f && x < 2.f) << x;
  EXPECT_GT(std::set<float>(ea.data.begin(), ea.data.end()).size(), 20u);
  o.seed = 4;
  EXPECT_NE(ReadEpoch(std::make_unique<SyntheticIter>(o).get(), 0).data, ea.data);
  o.min = 3.f;
  ExpectError([&] { SyntheticIter x(o); }, {"range [3, 2) is empty"});
}

// ---------------------------------------------------------------- MakeDataIter

TEST(MakeDataIter, BuildsEachSourceFromTheConfig) {
  TempDir dir;
  DataIterOptions o;
  o.batch_size = 2;
  o.where = "cfg: data.train";
  config::DataSource src;
  ExpectError([&] { MakeDataIter(src, o); }, {"cfg: data.train has no source"});

  src.mutable_synthetic()->set_num_samples(6);
  ExpectError([&] { MakeDataIter(src, o); }, {"cfg: data.train", "needs a shape"});
  o.sample_shape = Shape{3, 2, 2};
  auto it = MakeDataIter(src, o);
  EXPECT_EQ(it->sample_shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(it->batches_per_epoch(), 3);
  EXPECT_EQ(it->label_shape(), Shape(std::vector<int64_t>{}));
  // Token sequences: whole numbers in [0, 7), a label per position.
  src.mutable_synthetic()->set_integers(true);
  src.mutable_synthetic()->set_max(7);
  src.mutable_synthetic()->add_label_shape(4);
  src.mutable_synthetic()->set_num_classes(5);
  it = MakeDataIter(src, o);
  EXPECT_EQ(it->label_shape(), Shape{4});
  std::vector<float> data(2 * 12), label(2 * 4);
  ASSERT_TRUE(it->Next(data.data(), label.data(), nullptr));
  for (float x : data) EXPECT_TRUE(x >= 0 && x < 7 && x == std::floor(x)) << x;
  for (float y : label) EXPECT_TRUE(y >= 0 && y < 5 && y == std::floor(y)) << y;
  EXPECT_GT(*std::max_element(data.begin(), data.end()), 0.f);  // not all zero
  src.mutable_synthetic()->clear_label_shape();
  src.mutable_synthetic()->clear_integers();

  std::string text(100, 'x');
  src.mutable_text()->set_path(dir.Write("t.txt", text));
  src.mutable_text()->set_seq_len(5);
  it = MakeDataIter(src, o);
  EXPECT_EQ(it->sample_shape(), Shape{5});
  EXPECT_NE(it->Describe().find("BPTT"), std::string::npos) << it->Describe();

  std::string cifar(2 * 3073, '\1');
  src.mutable_cifar()->add_path(dir.Write("c.bin", cifar));
  src.mutable_cifar()->mutable_augment()->set_pad(4);
  src.mutable_cifar()->mutable_augment()->set_rand_crop(true);
  it = MakeDataIter(src, o);
  EXPECT_EQ(it->num_samples(), 2);
  EXPECT_NE(it->Describe().find("pad 4 rand_crop"), std::string::npos) << it->Describe();
  src.mutable_cifar()->mutable_augment()->set_rand_resized_crop(true);
  ExpectError([&] { MakeDataIter(src, o); }, {"cfg: data.train", "RecordIO images only"});

  src.mutable_recordio();
  ExpectError([&] { MakeDataIter(src, o); }, {"cfg: data.train", "recordio needs a path"});
  src.mutable_recordio()->set_path(dir.File("none.rec"));
  o.sample_shape = Shape{3};
  ExpectError([&] { MakeDataIter(src, o); }, {"data.sample_shape [c, h, w]"});
}

}  // namespace
}  // namespace frugal::test
