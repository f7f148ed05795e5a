// MakeDataIter: the DataIter for one DataSource of the config. See
// frugal/io.h.
#include <opencv2/imgcodecs.hpp>  // the IMREAD_ flags only: the codecs load on first use

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "frugal.pb.h"
#include "frugal/io.h"
#include "io/imgcodecs.h"

namespace frugal {
namespace {

Augment ToAugment(const config::Augment& a, float scale) {
  Augment out;
  out.resize = a.resize();
  out.pad = a.pad();
  out.rand_crop = a.rand_crop();
  out.rand_resized_crop = a.rand_resized_crop();
  out.min_area = a.min_area();
  out.max_area = a.max_area();
  out.min_ratio = a.min_ratio();
  out.max_ratio = a.max_ratio();
  out.mirror = a.mirror();
  out.scale = scale;
  out.mean.assign(a.mean().begin(), a.mean().end());
  out.std.assign(a.std().begin(), a.std().end());
  return out;
}

CifarLabel ToCifarLabel(config::CifarSource::Label l) {
  switch (l) {
    case config::CifarSource::COARSE: return CifarLabel::kCoarse;
    case config::CifarSource::FINE: return CifarLabel::kFine;
    default: return CifarLabel::kCifar10;
  }
}

std::unique_ptr<DataIter> MakeIdx(const config::IdxSource& s, const DataIterOptions& o) {
  FRUGAL_REQUIRE(!s.images().empty() && !s.labels().empty(), o.where,
                 ": idx needs both files (idx { images: \"...\" labels: \"...\" })");
  return std::make_unique<DatasetIter>(LoadIdxDataset(s.images(), s.labels()), o.where, o.batch_size, o.shuffle, o.seed,
                                       Augment{}, o.shard);
}

std::unique_ptr<DataIter> MakeCifar(const config::CifarSource& s, const DataIterOptions& o) {
  FRUGAL_REQUIRE(s.path_size() > 0, o.where, ": cifar lists no files (cifar { path: \"data_batch_1.bin\" ... })");
  FRUGAL_REQUIRE(std::isfinite(s.scale()), o.where, ": cifar.scale ", s.scale(), " is not finite");
  std::vector<std::string> files(s.path().begin(), s.path().end());
  Dataset ds = LoadCifar(files, ToCifarLabel(s.label()), s.scale());
  return std::make_unique<DatasetIter>(std::move(ds), o.where, o.batch_size, o.shuffle, o.seed,
                                       ToAugment(s.augment(), 1.f), o.shard);
}

std::unique_ptr<DataIter> MakeRecordIO(const config::RecordIOSource& s, const DataIterOptions& o) {
  FRUGAL_REQUIRE(!s.path().empty(), o.where, ": recordio needs a path (recordio { path: \"train.rec\" })");
  FRUGAL_REQUIRE(o.sample_shape.known() && o.sample_shape.ndim() == 3, o.where,
                 ": recordio images need data.sample_shape [c, h, w] (e.g. [3, 224, 224]), not ", o.sample_shape);
  ImageRecordIterOptions r;
  r.path = s.path();
  r.index_path = s.index();
  r.data_shape = o.sample_shape;
  r.batch_size = o.batch_size;
  r.shuffle = o.shuffle;
  r.seed = o.seed;
  r.threads = s.threads();
  r.prefetch = s.prefetch();
  r.label_width = s.label_width();
  r.aug = ToAugment(s.augment(), s.scale());
  r.shard = o.shard;
  return std::make_unique<ImageRecordIter>(r);
}

std::unique_ptr<DataIter> MakeText(const config::TextSource& s, const DataIterOptions& o) {
  FRUGAL_REQUIRE(!s.path().empty(), o.where, ": text needs a path (text { path: \"data/text/corpus.txt\" })");
  TextIterOptions t;
  t.path = s.path();
  t.vocab_path = s.vocab_path();
  t.level = s.level() == config::TextSource::WORD ? TextLevel::kWord : TextLevel::kChar;
  t.seq_len = s.seq_len();
  t.batch_size = o.batch_size;
  t.bptt = s.bptt();
  t.shuffle = o.shuffle;
  t.seed = o.seed;
  t.shard = o.shard;
  return std::make_unique<TextIter>(t);
}

std::unique_ptr<DataIter> MakeSynthetic(const config::SyntheticSource& s, const DataIterOptions& o) {
  SyntheticIterOptions y;
  y.sample_shape =
      s.shape_size() > 0 ? Shape(std::vector<int64_t>(s.shape().begin(), s.shape().end())) : o.sample_shape;
  FRUGAL_REQUIRE(y.sample_shape.known(), o.where,
                 ": synthetic data needs a shape (set data.sample_shape or synthetic { shape: [...] })");
  y.num_classes = s.num_classes();
  y.num_samples = s.num_samples();
  y.batch_size = o.batch_size;
  y.min = s.min();
  y.max = s.max();
  y.integers = s.integers();
  y.label_shape = Shape(std::vector<int64_t>(s.label_shape().begin(), s.label_shape().end()));
  y.seed = o.seed;
  return std::make_unique<SyntheticIter>(y);
}

}  // namespace

std::unique_ptr<DataIter> MakeDataIter(const config::DataSource& src, const DataIterOptions& o) {
  switch (src.source_case()) {
    case config::DataSource::kIdx: return MakeIdx(src.idx(), o);
    case config::DataSource::kCifar: return MakeCifar(src.cifar(), o);
    case config::DataSource::kRecordio: return MakeRecordIO(src.recordio(), o);
    case config::DataSource::kText: return MakeText(src.text(), o);
    case config::DataSource::kSynthetic: return MakeSynthetic(src.synthetic(), o);
    case config::DataSource::SOURCE_NOT_SET: break;
  }
  throw Error(Fmt(o.where, " has no source (write one of idx, cifar, recordio, text, synthetic { ... })"));
}

void ReadImageSample(const config::DataSource& src, const std::string& where, const Shape& sample_shape,
                     const std::string& path, float* out) {
  const bool raw = src.has_idx() || src.has_cifar();  // arrays of pixels: no resize or crop
  FRUGAL_REQUIRE(raw || src.has_recordio(), where,
                 " holds no images (idx, cifar or recordio): give the model a .npy of its data instead");
  Augment aug;
  if (src.has_recordio()) aug = ToAugment(src.recordio().augment(), src.recordio().scale());
  if (src.has_cifar()) aug = ToAugment(src.cifar().augment(), src.cifar().scale());
  aug.rand_crop = aug.rand_resized_crop = aug.mirror = false;
  if (raw) aug.resize = aug.pad = 0;
  std::ifstream in(path, std::ios::binary);
  FRUGAL_REQUIRE(in, path, ": cannot open the image (", std::strerror(errno), ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string encoded = bytes.str();
  const bool grey = sample_shape.ndim() == 3 && sample_shape[0] == 1;
  const cv::Mat img = imgcodecs::Decode(encoded.data(), encoded.size(), grey ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  FRUGAL_REQUIRE(!img.empty(), path, ": cannot decode the image (", encoded.size(),
                 " bytes): not a PNG, JPEG or other format OpenCV reads, or corrupt");
  FRUGAL_REQUIRE(!raw || sample_shape.ndim() != 3 || (img.rows == sample_shape[1] && img.cols == sample_shape[2]), path,
                 ": the image is ", img.rows, "x", img.cols, " (height x width) but the model takes ",
                 sample_shape.ndim() == 3 ? sample_shape[1] : 0, "x", sample_shape.ndim() == 3 ? sample_shape[2] : 0,
                 " images (", where, " holds arrays of that size, which frugal does not resize); resize it first");
  DecodeAugmentImage(encoded, sample_shape, aug, 0, 0, 0, path, out);
}

}  // namespace frugal
