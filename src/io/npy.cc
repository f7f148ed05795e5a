// NumPy .npy arrays: ReadNpy and WriteNpy (frugal/io.h has the format).
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "frugal/io.h"

namespace frugal {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicBytes = 6;

// The text after `key`'s colon in the header dict, spaces skipped; throws
// Error naming the file when the key is absent.
size_t NpyValueAt(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  FRUGAL_REQUIRE(at != std::string::npos, path, ": the .npy header has no '", key, "': ", header);
  at = header.find(':', at);
  FRUGAL_REQUIRE(at != std::string::npos, path, ": the .npy header's '", key, "' has no value: ", header);
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  return at;
}

// 'shape': (3, 4) or (5,) or ().
std::vector<int64_t> NpyShape(const std::string& header, const std::string& path) {
  size_t at = NpyValueAt(header, "shape", path);
  const size_t end = header.find(')', at);
  FRUGAL_REQUIRE(at < header.size() && header[at] == '(' && end != std::string::npos, path,
                 ": the .npy header's shape is not a tuple: ", header);
  std::vector<int64_t> shape;
  std::string dim;
  for (size_t k = at + 1; k <= end; ++k) {
    const char c = header[k];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      dim += c;
    } else if (c == ',' || c == ')') {
      FRUGAL_REQUIRE(!dim.empty() || c == ')', path, ": the .npy header's shape has an empty dimension: ", header);
      if (!dim.empty()) shape.push_back(std::stoll(dim));
      dim.clear();
    } else {
      FRUGAL_REQUIRE(c == ' ' || c == 'L', path, ": the .npy header's shape is not whole numbers: ", header);
    }
  }
  return shape;
}

std::string NpyDescr(const std::string& header, const std::string& path) {
  const size_t at = NpyValueAt(header, "descr", path);
  FRUGAL_REQUIRE(at < header.size() && (header[at] == '\'' || header[at] == '"'), path,
                 ": the .npy header's descr is not a simple type (a structured array?): ", header);
  const size_t end = header.find(header[at], at + 1);
  FRUGAL_REQUIRE(end != std::string::npos, path, ": the .npy header's descr is not closed: ", header);
  return header.substr(at + 1, end - at - 1);
}

// An integer element of `bytes` bytes at p, little-endian.
int64_t NpyInt(const unsigned char* p, int bytes, bool is_signed) {
  uint64_t u = 0;
  for (int k = 0; k < bytes; ++k) u |= static_cast<uint64_t>(p[k]) << (8 * k);
  if (is_signed && bytes < 8 && (u >> (8 * bytes - 1)) != 0) u |= ~uint64_t{0} << (8 * bytes);
  return static_cast<int64_t>(u);
}

}  // namespace

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FRUGAL_REQUIRE(in, path, ": cannot open the .npy file (", std::strerror(errno), ")");
  std::ostringstream all;
  all << in.rdbuf();
  const std::string b = all.str();
  FRUGAL_REQUIRE(b.size() >= kNpyMagicBytes + 4 && b.compare(0, kNpyMagicBytes, kNpyMagic) == 0, path,
                 ": not a .npy file (no \\x93NUMPY magic at its start; write it with numpy.save)");
  const int major = static_cast<unsigned char>(b[6]);
  FRUGAL_REQUIRE(major >= 1 && major <= 3, path, ": .npy format version ", major, ".",
                 static_cast<int>(static_cast<unsigned char>(b[7])), " is not one frugal reads (1.0 to 3.0)");
  const auto* u = reinterpret_cast<const unsigned char*>(b.data());
  const size_t len_bytes = major == 1 ? 2 : 4;
  FRUGAL_REQUIRE(b.size() >= 8 + len_bytes, path, ": the .npy file ends inside its header length");
  const size_t header_len = static_cast<size_t>(NpyInt(u + 8, static_cast<int>(len_bytes), false));
  const size_t data_at = 8 + len_bytes + header_len;
  FRUGAL_REQUIRE(b.size() >= data_at, path, ": the .npy file ends inside its header (", header_len, " bytes said, ",
                 b.size() - 8 - len_bytes, " there)");
  const std::string header = b.substr(8 + len_bytes, header_len);

  NpyArray a;
  const size_t fo = NpyValueAt(header, "fortran_order", path);
  FRUGAL_REQUIRE(header.compare(fo, 5, "False") == 0, path,
                 ": the array is in Fortran order; save it in C order (numpy.save(f, numpy.ascontiguousarray(x)))");
  a.shape = NpyShape(header, path);
  a.descr = NpyDescr(header, path);
  const std::string& d = a.descr;
  const bool little = d.size() == 3 && (d[0] == '<' || d[0] == '|');
  const char kind = d.size() == 3 ? d[1] : '?';
  const int bytes = d.size() == 3 && std::isdigit(static_cast<unsigned char>(d[2])) ? d[2] - '0' : 0;
  FRUGAL_REQUIRE(!(kind == 'f' && bytes == 8), path, ": the array is float64 ('", d,
                 "'); frugal reads float32: save x.astype(numpy.float32)");
  const bool is_int = (kind == 'i' || kind == 'u') && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8);
  FRUGAL_REQUIRE(little || !(is_int || (kind == 'f' && bytes == 4)), path, ": the array is big-endian ('", d,
                 "'); save x.astype('<", d.substr(1), "')");
  a.is_float = kind == 'f' && bytes == 4;
  FRUGAL_REQUIRE(little && (a.is_float || is_int), path, ": element type '", d,
                 "' is not one frugal reads (float32 '<f4', or integers such as '<i8')");
  const int64_t n = a.size();
  FRUGAL_REQUIRE(static_cast<uint64_t>(b.size() - data_at) == static_cast<uint64_t>(n) * bytes, path, ": shape ",
                 Shape(a.shape), " of '", d, "' needs ", n * bytes, " data bytes but the file holds ",
                 b.size() - data_at);
  const unsigned char* p = u + data_at;
  if (a.is_float) {
    a.f.resize(n);
    std::memcpy(a.f.data(), p, n * sizeof(float));  // little-endian hosts only (x86-64, aarch64)
  } else {
    a.i.resize(n);
    for (int64_t k = 0; k < n; ++k) a.i[k] = NpyInt(p + k * bytes, bytes, kind == 'i');
  }
  return a;
}

void WriteNpy(const std::string& path, const std::vector<int64_t>& shape, const float* values) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ", ";
    n *= d;
  }
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // (3, 4), but (5,) and ()
  if (shape.size() == 1) dims.pop_back();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version and length take 10 bytes; the whole header ends on a
  // multiple of 64 with its '\n'.
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kNpyMagic, kNpyMagicBytes);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  AtomicFile f(path);
  f.Write(out.data(), out.size());
  f.Write(values, static_cast<size_t>(n) * sizeof(float));
  f.Commit();
}

}  // namespace frugal
