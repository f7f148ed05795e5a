// Data input: readers for IDX (MNIST / Fashion-MNIST) and CIFAR binary files
// into an in-memory Dataset of bytes; and the DataIter interface the trainer
// reads batches through, with its iterators: in-memory datasets (with CHW
// augmentation), images in RecordIO files (OpenCV decoding and augmentation on
// a thread pool), text for language models, and synthetic data. MakeDataIter
// builds one from the config's DataSource.
//
// Randomness is reproducible everywhere: an epoch's order is a pure function
// of (seed, epoch), a sample's augmentation of (seed, epoch, sample index),
// whatever the platform, thread count or scheduling.
//
// Every problem the user can cause (missing file, corrupt or truncated data,
// image/label count mismatch, bad batch size) throws frugal::Error with a
// one-line message that names the file, the problem, the values and the fix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "frugal/base.h"

namespace frugal {
namespace config {
class DataSource;
}

// The contents of one IDX file (the MNIST/Fashion-MNIST format): dims and raw
// unsigned bytes. bytes.size() is the product of dims; bytes are row-major.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// Reads an IDX file, gzip-compressed or plain (zlib's gzopen/gzread read
// both). Only element type 0x08 (unsigned byte) is accepted.
//
// Format: two zero bytes, a type byte, a rank byte, then `rank` big-endian
// uint32 dims, then exactly prod(dims) data bytes.
//
// Throws Error naming the path for: missing/unreadable file, bad magic,
// unsupported type, zero/absurd dims (rank 0 or > 16, any dim 0, more than
// 4 GiB of data), truncated data (or a corrupt gzip stream), trailing garbage.
IdxFile ReadIdx(const std::string& path);

// An in-memory labelled data set, held as the files store it: one byte per
// pixel (a quarter of float32's memory; Fashion-MNIST's 60,000 images take
// 47 MB, not 188 MB). A sample's values are pixel * scale, computed per batch
// (the same float product the loaders once stored). Labels are float class
// indices.
struct Dataset {
  Shape sample_shape;  // e.g. (1,28,28) for IDX images of 28x28
  int64_t num_samples = 0;
  std::vector<uint8_t> pixels;  // num_samples * sample_shape.Size() bytes
  float scale = 1.0f / 255.0f;  // value = pixel * scale
  std::vector<float> y;         // num_samples class indices
};

// Loads images (N,H,W) -> sample_shape (1,H,W) and labels (N). Each pixel
// byte p stands for p * scale; each label byte becomes a float class index.
// Throws Error if the image file is not rank 3, the label file is not rank 1,
// scale is not finite, or counts differ (naming both files and both counts).
Dataset LoadIdxDataset(const std::string& images, const std::string& labels, float scale = 1.0f / 255.0f);

// ------------------------------------------------------------------ CIFAR

// Which label a CIFAR record carries: CIFAR-10 records have one label byte
// (10 classes); CIFAR-100 records have a coarse (20 classes) and a fine (100
// classes) label byte, and kCoarse / kFine picks one.
enum class CifarLabel { kCifar10, kCoarse, kFine };

// Reads CIFAR binary batches (CIFAR-10: data_batch_1.bin .. data_batch_5.bin,
// test_batch.bin; CIFAR-100: train.bin, test.bin) in the order given into one
// Dataset: sample_shape (3,32,32) CHW, RGB, each pixel byte p as p * scale,
// labels as float class indices.
//
// Throws Error naming the file for: a missing or empty file, a size that is
// not a whole number of records (naming the record that is cut short and the
// record and file sizes, and saying when the size would fit the other CIFAR
// variant), a label out of range (naming the record), a non-finite scale.
Dataset LoadCifar(const std::vector<std::string>& files, CifarLabel which = CifarLabel::kCifar10,
                  float scale = 1.0f / 255.0f);

// ------------------------------------------------------------------ DataIter

// What the trainer reads batches from. A batch is batch_size() samples: data
// is batch_size() * sample_shape().Size() floats (sample-major, each sample in
// sample_shape's row-major layout), label is batch_size() *
// label_shape().Size() floats. The epoch's last batch is filled up by
// wrapping to the start of the epoch's order, and num_valid says how many
// rows are real.
class DataIter {
 public:
  virtual ~DataIter() = default;
  // Starts epoch `epoch` (>= 0) at its first batch. A new iterator is at the
  // start of epoch 0.
  virtual void Reset(int64_t epoch) = 0;
  // Writes the next batch and sets *num_valid (if non-null); returns false,
  // writing nothing, at the end of the epoch.
  virtual bool Next(float* data, float* label, int64_t* num_valid) = 0;
  virtual int64_t batch_size() const = 0;
  // One sample's data shape, without the batch dim.
  virtual Shape sample_shape() const = 0;
  // One sample's label shape: () (a scalar class index) or e.g. (T).
  virtual Shape label_shape() const = 0;
  // Samples (or sequences) one epoch walks: all of them, on every part (see
  // Shard; the part reads its rows of each global batch).
  virtual int64_t num_samples() const = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // One line for the log: what is read, how, and how much.
  virtual std::string Describe() const = 0;
};

// Which rows of every batch an iterator reads, for data-parallel training
// (one part per rank). Every part walks the same epoch order (the seeded
// shuffle is the same on every rank) in global batches of num_parts x
// batch_size samples, and part r takes rows [r * batch_size, (r + 1) *
// batch_size) of each: so the parts' batches k, side by side in part order,
// are row for row batch k of one iterator with batch num_parts x batch_size
// (its wrapped rows and its num_valid, summed over the parts, included).
// A part's batch can hold no valid row at all (num_valid 0: the global
// batch ran out before the part's rows); it still holds wrapped rows.
// TextIter's BPTT streams are cut the same way: N x batch_size streams over
// the whole corpus, part r continuing streams [r * batch_size, (r + 1) *
// batch_size).
struct Shard {
  int part_index = 0;
  int num_parts = 1;
};

// ------------------------------------------------------------------ augmentation

// Augmentation of image samples, applied per sample in this order:
//   1. resize: the shorter side to `resize` pixels (0: keep)       [images]
//   2. crop to the output (h,w):
//      rand_resized_crop: a random region of area fraction in
//        [min_area, max_area] and aspect ratio (w/h, log-uniform) in
//        [min_ratio, max_ratio], resized to (h,w) (ten tries, then the
//        centre crop as a fallback)                                 [images]
//      otherwise pad by `pad` zero pixels on every side, then a random
//        (rand_crop) or centre crop of (h,w)
//   3. mirror: a horizontal flip with probability 1/2
//   4. per channel c: out = (pixel * scale - mean[c]) / std[c]
// mean and std are empty (0 and 1) or have one value per channel. Items
// marked [images] exist for RecordIO images only.
struct Augment {
  int resize = 0;
  int pad = 0;
  bool rand_crop = false;
  bool rand_resized_crop = false;
  float min_area = 0.08f, max_area = 1.0f;
  float min_ratio = 3.0f / 4.0f, max_ratio = 4.0f / 3.0f;
  bool mirror = false;
  float scale = 1.0f / 255.0f;
  std::vector<float> mean, std;
};
// Throws Error naming `where` unless mean and std are each empty or one
// number per channel, and every std positive.
void CheckNormalisation(const Augment& a, int64_t channels, const std::string& where);

// ------------------------------------------------------------------ iterators

// A DataIter over an in-memory Dataset (IDX, CIFAR): each batch's samples are
// converted from bytes (pixel * ds.scale) as they are copied out. For CHW
// samples it can pad and crop (random or centre) back to the sample's (h,w),
// mirror, and normalise per channel (mean/std, on the scaled values:
// Augment::scale is ignored, the Dataset's applies); resize and
// rand_resized_crop throw. label_shape is ().
//
// With shuffle, an epoch's order is a hand-written Fisher-Yates over a
// std::mt19937_64 seeded from (seed, epoch) (io/order.h), the same whatever
// the batch size; without it, the order is the data set's. The last partial
// batch wraps to the start of the epoch's order.
class DatasetIter : public DataIter {
 public:
  // Throws Error for an empty or inconsistent dataset, batch_size < 1, a bad
  // shard, or augmentation the dataset cannot take (naming `name`).
  DatasetIter(Dataset ds, const std::string& name, int64_t batch_size, bool shuffle, uint64_t seed,
              const Augment& aug = {}, Shard shard = {});
  void Reset(int64_t epoch) override;
  bool Next(float* data, float* label, int64_t* num_valid) override;
  int64_t batch_size() const override { return batch_; }
  Shape sample_shape() const override { return ds_.sample_shape; }
  Shape label_shape() const override { return Shape(std::vector<int64_t>{}); }
  int64_t num_samples() const override { return ds_.num_samples; }
  int64_t batches_per_epoch() const override;
  std::string Describe() const override;

 private:
  void Fill(int64_t sample, float* out) const;  // one sample, augmented
  Dataset ds_;
  std::string name_;
  int64_t batch_;
  bool shuffle_;
  uint64_t seed_;
  Augment aug_;
  Shard shard_;
  int64_t epoch_ = 0, position_ = 0;
  std::vector<int64_t> order_;  // this epoch's order over all samples
};

// A DataIter over the caller's float arrays (MXNet's NDArrayIter; the
// Python module's numpy data): num_samples samples of sample_shape at data
// and their labels of label_shape at labels, each row-major, sample after
// sample, which the caller keeps alive and unchanged while it is used.
// Batched as DatasetIter batches: the same epoch order (shuffled or not),
// the last partial batch wrapping to the start. Throws Error for no
// samples, batch_size < 1 or a bad shard.
class ArrayIter : public DataIter {
 public:
  ArrayIter(const float* data, Shape sample_shape, const float* labels, Shape label_shape, int64_t num_samples,
            const std::string& name, int64_t batch_size, bool shuffle, uint64_t seed, Shard shard = {});
  void Reset(int64_t epoch) override;
  bool Next(float* data, float* label, int64_t* num_valid) override;
  int64_t batch_size() const override { return batch_; }
  Shape sample_shape() const override { return sample_; }
  Shape label_shape() const override { return label_; }
  int64_t num_samples() const override { return n_; }
  int64_t batches_per_epoch() const override;
  std::string Describe() const override;

 private:
  const float* data_;
  const float* labels_;
  Shape sample_, label_;
  int64_t n_;
  std::string name_;
  int64_t batch_;
  bool shuffle_;
  uint64_t seed_;
  Shard shard_;
  int64_t position_ = 0;
  std::vector<int64_t> order_;
};

struct ImageRecordIterOptions {
  std::string path;        // the .rec file
  std::string index_path;  // its .idx (optional: without it the .rec is scanned once)
  Shape data_shape;        // (c,h,w) of a sample; c is 1 (grey) or 3 (RGB)
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  int threads = 2;      // decoding threads
  int prefetch = 1;     // batches decoded ahead of the one Next() returns
  int label_width = 1;  // labels per sample: label_shape () if 1, else (label_width)
  Augment aug;
  Shard shard;
};

// Images in a RecordIO file (MXNet image records, as `frugal im2rec` writes
// them): each is decoded with OpenCV, augmented (see Augment) and written as
// float CHW RGB (or grey for c = 1). Decoding runs on `threads` worker
// threads, `prefetch` batches ahead; a sample's result depends only on (seed,
// epoch, its record number), never on threads or timing.
//
// Throws Error at construction for a missing or malformed file or index, a
// bad shape, option or shard; from Next() for a record that does not decode
// or is smaller than the crop (naming the file, the record and the sizes).
class ImageRecordIter : public DataIter {
 public:
  explicit ImageRecordIter(const ImageRecordIterOptions& opts);
  ~ImageRecordIter() override;
  void Reset(int64_t epoch) override;
  bool Next(float* data, float* label, int64_t* num_valid) override;
  int64_t batch_size() const override;
  Shape sample_shape() const override;
  Shape label_shape() const override;
  int64_t num_samples() const override;
  int64_t batches_per_epoch() const override;
  std::string Describe() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decodes, augments and normalises one encoded image into out (c*h*w floats
// in data_shape's layout), as ImageRecordIter does for each sample, drawing
// from the stream of (seed, epoch, sample). `where` names the image in errors.
void DecodeAugmentImage(const std::string& encoded, const Shape& data_shape, const Augment& aug, uint64_t seed,
                        int64_t epoch, int64_t sample, const std::string& where, float* out);

// An image file as a sample of the data source `src`, for inference (`frugal
// predict`): decoded (grey for a sample_shape of 1 channel, else RGB) and
// made a sample as src's reader makes one, without its random parts:
// recordio: resize, pad and the centre crop to (h, w), then pixel * scale,
// mean and std (rand_crop, rand_resized_crop and mirror left out); idx and
// cifar, which hold raw arrays: the image must be h x w already, then pixel
// / 255 (idx) or pixel * scale, mean and std (cifar). Writes
// sample_shape.Size() floats at out. Throws Error naming the file for one
// that is missing or does not decode and for a size that does not fit, and
// naming `where` for a source that holds no images (text, synthetic).
void ReadImageSample(const config::DataSource& src, const std::string& where, const Shape& sample_shape,
                     const std::string& path, float* out);

// Tokens of a text corpus: bytes (kChar) or whitespace-separated words with
// an "<eos>" token at the end of every line (kWord, as PyTorch's
// word_language_model example).
enum class TextLevel { kChar, kWord };

// A token vocabulary. Id 0 is "<unk>" (tokens of other files that this
// vocabulary has not seen); the others follow in order of first appearance.
struct Vocabulary {
  TextLevel level = TextLevel::kChar;
  std::vector<std::string> tokens;               // id -> token
  std::unordered_map<std::string, int64_t> ids;  // token -> id
  int64_t Id(const std::string& token) const;    // 0 if unknown
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

// Reads a text file; throws Error naming it if missing, unreadable or empty.
std::string ReadTextFile(const std::string& path);

Vocabulary BuildVocabulary(const std::string& text, TextLevel level);
std::vector<int64_t> Tokenize(const std::string& text, const Vocabulary& vocab);

struct TextIterOptions {
  std::string path;        // the corpus
  std::string vocab_path;  // the text to build the vocabulary from (default: path)
  TextLevel level = TextLevel::kChar;
  int64_t seq_len = 35;  // T
  int64_t batch_size = 20;
  // true: the corpus is cut into batch_size contiguous streams, and batch i
  // holds tokens [i*T, (i+1)*T) of every stream, so each row continues the
  // same row of the previous batch (truncated BPTT; no shuffle, no
  // wrapping). false: the corpus is cut into sequences at multiples of T,
  // which are shuffled (if shuffle) and batched like any data set.
  bool bptt = true;
  bool shuffle = false;
  uint64_t seed = 0;
  Shard shard;
};

// Language-model batches: data (batch, T) token ids and labels (batch, T) the
// next token of each (the input shifted by one), both as floats.
class TextIter : public DataIter {
 public:
  explicit TextIter(const TextIterOptions& opts);
  void Reset(int64_t epoch) override;
  bool Next(float* data, float* label, int64_t* num_valid) override;
  int64_t batch_size() const override { return o_.batch_size; }
  Shape sample_shape() const override { return Shape{o_.seq_len}; }
  Shape label_shape() const override { return Shape{o_.seq_len}; }
  int64_t num_samples() const override;
  int64_t batches_per_epoch() const override;
  std::string Describe() const override;
  const Vocabulary& vocab() const { return vocab_; }

 private:
  TextIterOptions o_;
  Vocabulary vocab_;
  std::vector<int64_t> tokens_;  // the whole corpus (every part reads its rows of each batch)
  int64_t stream_len_ = 0;       // bptt: tokens per stream
  int64_t position_ = 0;
  std::vector<int64_t> order_;  // !bptt: this epoch's sequence order
};

struct SyntheticIterOptions {
  Shape sample_shape;          // any shape
  int64_t num_classes = 10;    // labels uniform in [0, num_classes)
  int64_t num_samples = 1024;  // per epoch
  int64_t batch_size = 1;
  float min = 0.f, max = 1.f;                 // data uniform in [min, max)
  bool integers = false;                      // data rounded down to whole numbers (token ids)
  Shape label_shape{std::vector<int64_t>{}};  // labels per sample
  uint64_t seed = 0;
};

// Random data for benchmarks: one batch of uniform data and labels, drawn
// once from the seed, returned ceil(num_samples / batch_size) times per
// epoch (so reading costs a copy, not a random-number generator).
class SyntheticIter : public DataIter {
 public:
  explicit SyntheticIter(const SyntheticIterOptions& opts);
  void Reset(int64_t epoch) override { position_ = 0; }
  bool Next(float* data, float* label, int64_t* num_valid) override;
  int64_t batch_size() const override { return o_.batch_size; }
  Shape sample_shape() const override { return o_.sample_shape; }
  Shape label_shape() const override { return o_.label_shape; }
  int64_t num_samples() const override { return o_.num_samples; }
  int64_t batches_per_epoch() const override { return (o_.num_samples + o_.batch_size - 1) / o_.batch_size; }
  std::string Describe() const override;

 private:
  SyntheticIterOptions o_;
  std::vector<float> data_, label_;
  int64_t position_ = 0;
};

// ------------------------------------------------------------------ .npy

// An array in NumPy's .npy format (version 1.0 to 3.0): the magic "\x93NUMPY",
// a major and minor version byte, the header's length (uint16 little-endian
// in 1.0, uint32 in 2.0 and 3.0), the header, a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with
// spaces to a multiple of 64 bytes and ended by '\n', then the raw elements.
// Read: float32 ('<f4') into f, or integers (signed or unsigned, 1 to 8
// bytes, little-endian) into i; C order only.
struct NpyArray {
  std::vector<int64_t> shape;
  std::string descr;  // as the file says it, e.g. "<f4", "<i8"
  bool is_float = false;
  std::vector<float> f;    // is_float
  std::vector<int64_t> i;  // !is_float
  int64_t size() const;    // the product of shape (1 for shape ())
};

// Reads a .npy file. Throws Error naming the file for a missing or
// unreadable one, a bad magic or version, a header it cannot parse, Fortran
// order (with the fix: np.ascontiguousarray), an element type other than
// float32 and the integers (float64 says to save with astype(np.float32);
// big-endian ones to use '<'), and a data size that does not match the shape.
NpyArray ReadNpy(const std::string& path);

// Writes float32 values of `shape` (C order) as a version 1.0 .npy file.
// Throws Error naming the file when it cannot be written.
void WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const float* values);

// ------------------------------------------------------------------ from the config

struct DataIterOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  // The config's data.sample_shape (the shape RecordIO images are cropped
  // to, and synthetic data's default shape); may be unknown for the others.
  Shape sample_shape;
  Shard shard;
  // Names the source in errors, e.g. "models/x.prototxt: data.train".
  std::string where;
};

// The iterator for one DataSource of the config (idx, cifar, recordio, text,
// synthetic). Throws Error naming `where` for an empty source or settings
// that do not fit it, and whatever the iterator throws.
std::unique_ptr<DataIter> MakeDataIter(const config::DataSource& src, const DataIterOptions& opts);

}  // namespace frugal
