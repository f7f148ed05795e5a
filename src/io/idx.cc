// Reading IDX files (plain or gzip) and building a Dataset from an image file
// and a label file. See frugal/io.h for the contract.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "frugal/io.h"

namespace frugal {
namespace {

constexpr int kMaxRank = 16;
constexpr int64_t kMaxDataBytes = int64_t{1} << 32;  // 4 GiB: anything larger is a bogus header
constexpr unsigned kChunkBytes = 16u << 20;          // read 16 MiB at a time
// Deflate stores at most 1032 bytes per compressed byte (zlib's technical
// notes), so a file of n bytes holds at most 1032 n bytes of data.
constexpr int64_t kMaxInflate = 1032;
constexpr const char* kIdxFix =
    "re-download or regenerate the file; for Fashion-MNIST re-run data/fashion-mnist/prepare.sh";

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzPtr = std::unique_ptr<gzFile_s, GzCloser>;

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

// The name of an IDX element type byte, for error messages.
const char* IdxTypeName(int type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

// Opens path for reading and sets *file_bytes to its size; throws a clear
// Error if it is missing, a directory, or otherwise unopenable.
GzPtr OpenIdx(const std::string& path, int64_t* file_bytes) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    throw Error(Fmt(path, ": cannot open IDX file: ", std::strerror(errno),
                    " (check the path; for Fashion-MNIST run data/fashion-mnist/prepare.sh)"));
  }
  FRUGAL_REQUIRE(!S_ISDIR(st.st_mode), path,
                 ": cannot open IDX file: it is a directory (pass the path of an IDX file)");
  errno = 0;
  GzPtr f(gzopen(path.c_str(), "rb"));
  if (!f) {
    throw Error(Fmt(path, ": cannot open IDX file: ", errno ? std::strerror(errno) : "out of memory",
                    " (check the file's permissions)"));
  }
  gzbuffer(f.get(), 1u << 20);
  *file_bytes = st.st_size;
  return f;
}

// Reads up to len bytes; returns the count read (short only at end of data).
// Throws if the read fails or zlib reports a corrupt stream.
int64_t ReadSome(gzFile f, const std::string& path, void* buf, unsigned len) {
  int n = gzread(f, buf, len);
  int errnum = Z_OK;
  std::string msg = gzerror(f, &errnum);
  // Z_BUF_ERROR means the gzip stream ended early: reported by the caller as truncation.
  if (n >= 0 && (errnum == Z_OK || errnum == Z_BUF_ERROR)) return n;
  if (errnum == Z_ERRNO) msg = std::strerror(errno);
  // zlib prefixes its message with the path; drop it, the path comes first anyway.
  if (msg.compare(0, path.size() + 2, path + ": ") == 0) msg.erase(0, path.size() + 2);
  const char* what = errnum == Z_DATA_ERROR ? "corrupt gzip data" : "cannot read IDX file";
  throw Error(Fmt(path, ": ", what, ": ", msg, " (", kIdxFix, ")"));
}

// A note for truncation messages when the gzip stream itself was cut short.
std::string GzipNote(gzFile f) {
  int errnum = Z_OK;
  gzerror(f, &errnum);
  return errnum == Z_BUF_ERROR ? "; the gzip stream is cut short" : "";
}

// Reads and checks the 4-byte magic; returns the rank.
int ReadMagic(gzFile f, const std::string& path) {
  uint8_t m[4] = {0, 0, 0, 0};
  int64_t got = ReadSome(f, path, m, 4);
  FRUGAL_REQUIRE(got > 0, path, ": empty IDX file: 0 bytes (", kIdxFix, ")");
  FRUGAL_REQUIRE(got == 4, path, ": truncated IDX header: magic needs 4 bytes but only ", got, " follow", GzipNote(f),
                 " (", kIdxFix, ")");
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%02x%02x%02x%02x", m[0], m[1], m[2], m[3]);
  FRUGAL_REQUIRE(m[0] == 0 && m[1] == 0, path, ": bad magic ", hex,
                 ": an IDX file starts with two zero bytes, this is not an IDX file (", kIdxFix, ")");
  char type_hex[8];
  std::snprintf(type_hex, sizeof(type_hex), "0x%02x", m[2]);
  FRUGAL_REQUIRE(m[2] == 0x08, path, ": unsupported element type ", type_hex, " (", IdxTypeName(m[2]),
                 "): only 0x08 (unsigned byte) is supported ", "(convert the file to unsigned bytes)");
  FRUGAL_REQUIRE(m[3] >= 1 && m[3] <= kMaxRank, path, ": bad IDX rank ", int{m[3]}, ": expected 1 to ", kMaxRank,
                 " dims (", kIdxFix, ")");
  return m[3];
}

// Reads `rank` big-endian uint32 dims and checks each is > 0 and the total
// data size is sane.
std::vector<int64_t> ReadDims(gzFile f, const std::string& path, int rank) {
  uint8_t raw[4 * kMaxRank];
  int64_t got = ReadSome(f, path, raw, 4 * rank);
  FRUGAL_REQUIRE(got == 4 * rank, path, ": truncated IDX header: ", rank, " dims need ", 4 * rank, " bytes but only ",
                 got, " follow", GzipNote(f), " (", kIdxFix, ")");
  // Decode all dims first so messages can show the whole header.
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    const uint8_t* p = raw + 4 * i;
    dims[i] = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
  }
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    FRUGAL_REQUIRE(dims[i] > 0, path, ": zero dim in IDX header: dims ", DimsString(dims), " (dim ", i, " is 0; ",
                   kIdxFix, ")");
    // Check before multiplying so the product can never overflow.
    FRUGAL_REQUIRE(dims[i] <= kMaxDataBytes / total, path, ": absurd IDX dims ", DimsString(dims), ": more than ",
                   HumanBytes(kMaxDataBytes), " of data (", kIdxFix, ")");
    total *= dims[i];
  }
  return dims;
}

// Reads exactly `total` data bytes into one buffer, reserved once: as much
// as a file of file_bytes can hold, so a bogus header on a short file does
// not allocate gigabytes. (A buffer grown chunk by chunk left its earlier
// copies resident in the heap: 40 MiB for Fashion-MNIST's 47 MiB.)
std::vector<uint8_t> ReadData(gzFile f, const std::string& path, const std::vector<int64_t>& dims, int64_t total,
                              int64_t file_bytes) {
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<size_t>(std::min(total, kMaxInflate * file_bytes)));
  int64_t have = 0;
  while (have < total) {
    unsigned want = static_cast<unsigned>(std::min<int64_t>(kChunkBytes, total - have));
    bytes.resize(have + want);
    int64_t got = ReadSome(f, path, bytes.data() + have, want);
    have += got;
    FRUGAL_REQUIRE(got == want, path, ": truncated IDX file: header says ", DimsString(dims), " = ", total,
                   " bytes of data but only ", have, " follow", GzipNote(f), " (", kIdxFix, ")");
  }
  return bytes;
}

// Throws if any byte follows the data.
void CheckNoTrailing(gzFile f, const std::string& path, const std::vector<int64_t>& dims, int64_t total) {
  uint8_t extra[4096];
  int64_t n = ReadSome(f, path, extra, sizeof(extra));
  if (n == 0) return;
  int64_t more = n;
  while ((n = ReadSome(f, path, extra, sizeof(extra))) > 0) more += n;
  throw Error(Fmt(path, ": trailing garbage after IDX data: header says ", DimsString(dims), " = ", total,
                  " bytes of data but ", more, " more bytes follow (", kIdxFix, ")"));
}

}  // namespace

IdxFile ReadIdx(const std::string& path) {
  // 1. Open (gzip or plain: gzread passes plain files through).
  int64_t file_bytes = 0;
  GzPtr f = OpenIdx(path, &file_bytes);
  // 2. Header: magic (type + rank), then the big-endian dims.
  int rank = ReadMagic(f.get(), path);
  IdxFile out;
  out.dims = ReadDims(f.get(), path, rank);
  int64_t total = 1;
  for (int64_t d : out.dims) total *= d;
  // 3. Exactly `total` data bytes, and nothing after them.
  out.bytes = ReadData(f.get(), path, out.dims, total, file_bytes);
  CheckNoTrailing(f.get(), path, out.dims, total);
  return out;
}

Dataset LoadIdxDataset(const std::string& images, const std::string& labels, float scale) {
  FRUGAL_REQUIRE(std::isfinite(scale), "LoadIdxDataset(", images, "): scale ", scale,
                 " is not finite (pass a finite scale such as 1/255)");
  // 1. Read both files and check their ranks.
  IdxFile img = ReadIdx(images);
  FRUGAL_REQUIRE(img.dims.size() == 3, images,
                 ": expected an image IDX file of rank 3 (N,H,W) "
                 "but it has dims ",
                 DimsString(img.dims), " (pass the images file first, labels second)");
  IdxFile lab = ReadIdx(labels);
  FRUGAL_REQUIRE(lab.dims.size() == 1, labels,
                 ": expected a label IDX file of rank 1 (N) "
                 "but it has dims ",
                 DimsString(lab.dims), " (pass the images file first, labels second)");
  // 2. The counts must agree.
  FRUGAL_REQUIRE(img.dims[0] == lab.dims[0], "mismatched sample counts: ", images, " has ", img.dims[0], " images but ",
                 labels, " has ", lab.dims[0], " labels (pass the label file that belongs to these images)");
  // 3. Keep the bytes; DatasetIter scales them per batch.
  Dataset ds;
  ds.num_samples = img.dims[0];
  ds.sample_shape = Shape{1, img.dims[1], img.dims[2]};
  ds.pixels = std::move(img.bytes);
  ds.scale = scale;
  ds.y.assign(lab.bytes.begin(), lab.bytes.end());
  return ds;
}

}  // namespace frugal
