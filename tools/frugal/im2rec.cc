// frugal im2rec: pack images into a RecordIO file (.rec) and its index
// (.idx), as MXNet's im2rec, from
//   - a folder with one subfolder per class (labels 0, 1, ... in the sorted
//     order of the subfolder names; images sorted by name inside), which
//     also writes the list it made as PREFIX.lst; or
//   - a list file of "index<TAB>label[<TAB>label...]<TAB>path" lines (MXNet's
//     .lst), paths relative to --root (default: the list's folder).
// Each image is read with OpenCV, optionally centre-cropped to a square and
// resized (shorter side), and re-encoded (JPEG --quality, or PNG); with
// --pass_through the file's bytes are stored as they are.
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>  // the IMREAD_/IMWRITE_ flags only
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli.h"
#include "frugal/recordio.h"
#include "io/imgcodecs.h"

DEFINE_string(input, "",
              "im2rec: a folder of class subfolders, or a .lst file. predict: a .npy of samples, a folder or list "
              "of images, or a text file (a language model)");
DEFINE_string(output, "", "im2rec: output prefix: writes PREFIX.rec and PREFIX.idx");
DEFINE_string(root, "", "im2rec: folder the .lst paths are relative to (default: the list's folder)");
DEFINE_int32(resize, 0, "im2rec: resize the shorter side to this many pixels (0: keep)");
DEFINE_int32(quality, -1, "im2rec: JPEG quality 1-100 (default 95), or PNG compression 0-9 (default 3)");
DEFINE_bool(center_crop, false, "im2rec: crop the centre square before resizing");
DEFINE_string(encoding, ".jpg", "im2rec: .jpg or .png");
DEFINE_bool(pass_through, false, "im2rec: store the files' bytes without decoding or re-encoding");
DEFINE_int32(threads, 2, "im2rec: encoding threads");

namespace frugal::cli {
namespace {

namespace fs = std::filesystem;

struct Item {
  int64_t index = 0;
  std::vector<float> labels;
  std::string path;  // as given (relative to root)
};

bool IsImage(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// Folder mode: one subfolder per class, sorted names -> labels 0, 1, ...
std::vector<Item> ListFolder(const std::string& root) {
  std::vector<std::string> classes;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  std::sort(classes.begin(), classes.end());
  FRUGAL_REQUIRE(!classes.empty(), root, ": no class subfolders (put each class's images in its own subfolder)");
  std::vector<Item> items;
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes[label]))
      if (e.is_regular_file() && IsImage(e.path())) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    for (const std::string& f : files)
      items.push_back({static_cast<int64_t>(items.size()), {static_cast<float>(label)}, classes[label] + "/" + f});
    std::printf("im2rec: class %zu = %s (%zu images)\n", label, classes[label].c_str(), files.size());
  }
  FRUGAL_REQUIRE(!items.empty(), root, ": no images (.jpg, .jpeg, .png, .bmp) in the class subfolders");
  return items;
}

// List mode: "index\tlabel...\tpath" lines.
std::vector<Item> ReadList(const std::string& path) {
  std::ifstream in(path);
  FRUGAL_REQUIRE(in.is_open(), path, ": cannot open the list file");
  std::vector<Item> items;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    FRUGAL_REQUIRE(cols.size() >= 3, path, ":", no, ": expected 'index<TAB>label<TAB>path' but the line has ",
                   cols.size(), " tab-separated columns");
    Item it;
    size_t used = 0;
    try {
      it.index = std::stoll(cols[0], &used);
      FRUGAL_REQUIRE(used == cols[0].size(), "");
      for (size_t i = 1; i + 1 < cols.size(); ++i) {
        it.labels.push_back(std::stof(cols[i], &used));
        FRUGAL_REQUIRE(used == cols[i].size(), "");
      }
    } catch (const std::exception&) {
      throw Error(Fmt(path, ":", no, ": the index must be an integer and the labels numbers: '", line, "'"));
    }
    it.path = cols.back();
    items.push_back(it);
  }
  FRUGAL_REQUIRE(!items.empty(), path, ": the list file has no entries");
  return items;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FRUGAL_REQUIRE(in.is_open(), path, ": cannot open the image");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Reads, crops, resizes and encodes one image (or passes its bytes through).
std::string Encode(const std::string& file) {
  if (FLAGS_pass_through) return ReadBytes(file);
  cv::Mat img = imgcodecs::Read(file, cv::IMREAD_COLOR);
  FRUGAL_REQUIRE(!img.empty(), file, ": OpenCV cannot read this image (missing, not an image, or corrupt)");
  if (FLAGS_center_crop && img.rows != img.cols) {
    const int side = std::min(img.rows, img.cols);
    img = img(cv::Rect((img.cols - side) / 2, (img.rows - side) / 2, side, side));
  }
  if (FLAGS_resize > 0) {
    // The shorter side becomes --resize; the other keeps the aspect ratio (as MXNet's im2rec).
    const int64_t r = FLAGS_resize, h = img.rows, w = img.cols;
    const cv::Size size = h > w ? cv::Size(static_cast<int>(r), static_cast<int>(h * r / w))
                                : cv::Size(static_cast<int>(w * r / h), static_cast<int>(r));
    cv::Mat out;
    cv::resize(img, out, size, 0, 0, size.width < w ? cv::INTER_AREA : cv::INTER_LINEAR);
    img = out;
  }
  const bool jpeg = FLAGS_encoding == ".jpg";
  const int quality = FLAGS_quality >= 0 ? FLAGS_quality : jpeg ? 95 : 3;
  const std::vector<int> params = {jpeg ? cv::IMWRITE_JPEG_QUALITY : cv::IMWRITE_PNG_COMPRESSION, quality};
  std::vector<uint8_t> buf;
  FRUGAL_REQUIRE(imgcodecs::Encode(FLAGS_encoding, img, params, &buf), file, ": OpenCV cannot encode it as ",
                 FLAGS_encoding);
  return std::string(buf.begin(), buf.end());
}

void CheckFlags() {
  FRUGAL_REQUIRE(!FLAGS_input.empty() && !FLAGS_output.empty(),
                 "im2rec needs --input (a folder of class subfolders, or a .lst file) and --output PREFIX");
  FRUGAL_REQUIRE(FLAGS_encoding == ".jpg" || FLAGS_encoding == ".png", "--encoding is '", FLAGS_encoding,
                 "' but must be .jpg or .png");
  FRUGAL_REQUIRE(FLAGS_quality == -1 || FLAGS_encoding != ".jpg" || (FLAGS_quality >= 1 && FLAGS_quality <= 100),
                 "--quality ", FLAGS_quality, " must be 1 to 100 for JPEG");
  FRUGAL_REQUIRE(FLAGS_quality == -1 || FLAGS_encoding != ".png" || (FLAGS_quality >= 0 && FLAGS_quality <= 9),
                 "--quality ", FLAGS_quality, " must be 0 to 9 (compression) for PNG");
  FRUGAL_REQUIRE(!FLAGS_pass_through || (FLAGS_resize == 0 && !FLAGS_center_crop),
                 "--pass_through stores files as they are: it cannot be combined with --resize or --center_crop");
}

void WriteList(const std::string& path, const std::vector<Item>& items) {
  std::ostringstream out;
  for (const Item& it : items) {
    out << it.index;
    for (float l : it.labels) out << '\t' << l;
    out << '\t' << it.path << '\n';
  }
  WriteFileAtomic(path, out.str());
}

}  // namespace

int Im2Rec() {
  CheckFlags();
  struct stat st;
  FRUGAL_REQUIRE(stat(FLAGS_input.c_str(), &st) == 0, FLAGS_input, ": no such file or folder");
  const bool folder = S_ISDIR(st.st_mode);
  std::vector<Item> items = folder ? ListFolder(FLAGS_input) : ReadList(FLAGS_input);
  const std::string root =
      folder ? FLAGS_input : (FLAGS_root.empty() ? fs::path(FLAGS_input).parent_path().string() : FLAGS_root);
  if (folder) WriteList(FLAGS_output + ".lst", items);

  RecordWriter writer(FLAGS_output + ".rec");
  std::vector<RecordIndexEntry> index;
  // Encode a chunk of images on the threads, then write it in list order.
  const size_t chunk = 64 * static_cast<size_t>(FLAGS_threads);
  for (size_t first = 0; first < items.size(); first += chunk) {
    const size_t n = std::min(chunk, items.size() - first);
    std::vector<std::string> encoded(n), errors(n);
    std::vector<std::thread> pool;
    for (int t = 0; t < FLAGS_threads; ++t) {
      pool.emplace_back([&, t] {
        for (size_t i = t; i < n; i += FLAGS_threads) {
          const Item& it = items[first + i];
          try {
            encoded[i] = Encode(root.empty() ? it.path : (fs::path(root) / it.path).string());
          } catch (const std::exception& e) { errors[i] = e.what(); }
        }
      });
    }
    for (std::thread& t : pool) t.join();
    for (size_t i = 0; i < n; ++i) {
      if (!errors[i].empty()) throw Error(errors[i]);
      const Item& it = items[first + i];
      const std::string rec =
          PackImageRecord(it.labels, static_cast<uint64_t>(it.index), 0, encoded[i].data(), encoded[i].size());
      index.push_back({it.index, writer.Write(rec)});
    }
  }
  writer.Close();
  WriteRecordIndex(FLAGS_output + ".idx", index);
  const std::string list = folder ? ", " + FLAGS_output + ".lst" : "";
  std::printf("im2rec: %zu images -> %s.rec (%lld bytes), %s.idx%s\n", items.size(), FLAGS_output.c_str(),
              static_cast<long long>(writer.Tell()), FLAGS_output.c_str(), list.c_str());
  return 0;
}

}  // namespace frugal::cli
