// Reading CIFAR-10 / CIFAR-100 binary batches into a Dataset. See frugal/io.h
// for the contract.
//
// Format (https://www.cs.toronto.edu/~kriz/cifar.html, the "binary version"):
// a file is a plain sequence of records, no header. A CIFAR-10 record is one
// label byte (0..9) then 3072 pixel bytes; a CIFAR-100 record is a coarse
// label byte (0..19), a fine label byte (0..99), then 3072 pixel bytes. The
// pixels are the 1024 red, then green, then blue values of a 32x32 image, rows
// top to bottom: exactly the (3,32,32) CHW layout.
#include <algorithm>
#include <cmath>

#include "frugal/base.h"
#include "frugal/io.h"

namespace frugal {
namespace {

constexpr int64_t kPixels = 3 * 32 * 32;
// The files of the data sets, for an error that finds none at a path.
constexpr const char* kCifarFiles =
    "CIFAR-10 has data_batch_1.bin .. data_batch_5.bin and test_batch.bin, CIFAR-100 train.bin and test.bin";
constexpr const char* kCifarFix =
    "re-extract the data set (cifar-10-batches-bin / cifar-100-binary), or pick the right label option";

const char* LabelName(CifarLabel which) {
  switch (which) {
    case CifarLabel::kCifar10: return "CIFAR-10 label";
    case CifarLabel::kCoarse: return "CIFAR-100 coarse label";
    case CifarLabel::kFine: return "CIFAR-100 fine label";
  }
  return "label";
}

int LabelCount(CifarLabel which) {
  switch (which) {
    case CifarLabel::kCifar10: return 10;
    case CifarLabel::kCoarse: return 20;
    case CifarLabel::kFine: return 100;
  }
  return 0;
}

int64_t RecordBytes(CifarLabel which) { return (which == CifarLabel::kCifar10 ? 1 : 2) + kPixels; }

// Appends the records of one file's bytes to *ds.
void AppendCifar(const std::string& path, const std::string& bytes, CifarLabel which, Dataset* ds) {
  const int64_t rec = RecordBytes(which);
  const int64_t size = static_cast<int64_t>(bytes.size());
  const int64_t whole = size / rec, rest = size % rec;
  FRUGAL_REQUIRE(size > 0, path, ": empty CIFAR file: 0 bytes (", kCifarFix, ")");
  if (rest != 0) {
    // The commonest mix-up: a CIFAR-100 file read as CIFAR-10 or the reverse.
    const CifarLabel other = which == CifarLabel::kCifar10 ? CifarLabel::kFine : CifarLabel::kCifar10;
    const bool other_fits = size % RecordBytes(other) == 0;
    throw Error(Fmt(path, ": truncated or wrong-size CIFAR file: ", size, " bytes is ", whole, " records of ", rec,
                    " bytes (", which == CifarLabel::kCifar10 ? "CIFAR-10" : "CIFAR-100", ") and ", rest,
                    " bytes more: record ", whole, " is cut short (needs ", rec, " bytes, has ", rest, ")",
                    other_fits ? Fmt("; the size fits ", RecordBytes(other), "-byte records: is this ",
                                     other == CifarLabel::kCifar10 ? "CIFAR-10" : "CIFAR-100", "?")
                               : std::string(),
                    " (", kCifarFix, ")"));
  }
  const int64_t first = ds->num_samples;
  ds->num_samples += whole;
  ds->pixels.resize(ds->num_samples * kPixels);
  ds->y.resize(ds->num_samples);
  const int labels = LabelCount(which);
  for (int64_t i = 0; i < whole; ++i) {
    const uint8_t* r = reinterpret_cast<const uint8_t*>(bytes.data()) + i * rec;
    // CIFAR-100: byte 0 coarse, byte 1 fine.
    const int label = which == CifarLabel::kFine ? r[1] : r[0];
    FRUGAL_REQUIRE(label < labels, path, ": record ", i, " (byte offset ", i * rec, ") has ", LabelName(which), " ",
                   label, " but there are only ", labels, " classes (", kCifarFix, ")");
    ds->y[first + i] = static_cast<float>(label);
    const uint8_t* px = r + (rec - kPixels);
    std::copy(px, px + kPixels, ds->pixels.begin() + (first + i) * kPixels);
  }
}

}  // namespace

Dataset LoadCifar(const std::vector<std::string>& files, CifarLabel which, float scale) {
  FRUGAL_REQUIRE(!files.empty(), "LoadCifar: no files given (list the .bin batches, e.g. data_batch_1.bin)");
  FRUGAL_REQUIRE(std::isfinite(scale), "LoadCifar(", files[0], "): scale ", scale,
                 " is not finite (pass a finite scale such as 1/255)");
  Dataset ds;
  ds.sample_shape = Shape{3, 32, 32};
  ds.scale = scale;
  for (const std::string& f : files) AppendCifar(f, ReadFileBytes(f, "CIFAR file", kCifarFiles), which, &ds);
  return ds;
}

}  // namespace frugal
