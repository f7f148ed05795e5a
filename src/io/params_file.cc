// The params file (format in include/frugal/params_file.h).
#include "frugal/params_file.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "io/le_reader.h"

namespace frugal {
namespace {

constexpr char kMagic[8] = {'F', 'R', 'G', 'P', 'A', 'R', 'A', 'M'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 16;  // magic, version, count
constexpr int kMaxDims = 16;

void PutU32(std::string* s, uint32_t v) {
  for (int b = 0; b < 4; ++b) s->push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}
void PutU64(std::string* s, uint64_t v) {
  for (int b = 0; b < 8; ++b) s->push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

uint32_t Crc(const char* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes uInt lengths
    uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

constexpr char kParamsKind[] = "params file";
constexpr char kParamsFix[] = "rewrite it: was the copy interrupted?";

}  // namespace

std::string EncodeParams(const NamedTensors& params) {
  std::string out(kMagic, sizeof(kMagic));
  PutU32(&out, kVersion);
  PutU32(&out, static_cast<uint32_t>(params.size()));
  for (const auto& [name, t] : params) {
    FRUGAL_REQUIRE(t.dtype() == DType::kFloat32, "params file: tensor '", name, "' is ", DTypeName(t.dtype()),
                   "; only float32 is stored");
    FRUGAL_REQUIRE(t.shape().ndim() <= kMaxDims, "params file: tensor '", name, "' has more than 16 dims");
    PutU32(&out, static_cast<uint32_t>(name.size()));
    out += name;
    PutU32(&out, static_cast<uint32_t>(t.shape().ndim()));
    for (int64_t d : t.shape().dims()) PutU64(&out, static_cast<uint64_t>(d));
    for (int64_t k = 0; k < t.size(); ++k) {
      uint32_t u;
      std::memcpy(&u, t.f() + k, 4);
      PutU32(&out, u);
    }
  }
  PutU32(&out, Crc(out.data() + kHeader, out.size() - kHeader));
  return out;
}

NamedTensors DecodeParams(const std::string& bytes, const std::string& path) {
  FRUGAL_REQUIRE(bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0, path,
                 ": not a frugal params file (bad magic; expected it to start with FRGPARAM)");
  FRUGAL_REQUIRE(bytes.size() >= kHeader + 4, path, ": truncated params file: ", bytes.size(),
                 " bytes is shorter than the header and checksum");
  LeReader head(bytes, sizeof(kMagic), kHeader, path, kParamsKind, kParamsFix);
  const uint64_t version = head.Uint(4, "the header");
  FRUGAL_REQUIRE(version == kVersion, path, ": params file version ", version, " is not supported (this build reads ",
                 kVersion, ")");
  const uint64_t count = head.Uint(4, "the header");
  const size_t payload_end = bytes.size() - 4;
  LeReader r(bytes, kHeader, payload_end, path, kParamsKind, kParamsFix);
  NamedTensors out;
  std::set<std::string> names;
  for (uint64_t k = 0; k < count; ++k) {
    const std::string what = Fmt("tensor ", k, " of ", count);
    const uint64_t len = r.Uint(4, what + " (its name length)");
    std::string name(r.Take(len, what + " (its name)"), len);
    const std::string where = Fmt(what, " '", name, "'");
    FRUGAL_REQUIRE(names.insert(name).second, path, ": tensor name '", name, "' appears twice");
    const uint64_t ndim = r.Uint(4, where);
    FRUGAL_REQUIRE(ndim <= kMaxDims, path, ": ", where, " claims ", ndim, " dims (corrupt file?)");
    std::vector<int64_t> dims;
    uint64_t size = 1;
    for (uint64_t d = 0; d < ndim; ++d) {
      const uint64_t dim = r.Uint(8, where + " (its dims)");
      FRUGAL_REQUIRE(dim < (uint64_t{1} << 40) && (dim == 0 || size <= (uint64_t{1} << 40) / dim), path, ": ", where,
                     " has impossible dims (corrupt file?)");
      size *= dim;
      dims.push_back(static_cast<int64_t>(dim));
    }
    FRUGAL_REQUIRE(size * 4 <= r.left(), path, ": truncated params file: it ends inside ", where, "'s values (",
                   size * 4, " bytes needed, ", r.left(), " left)");
    const char* data = r.Take(size * 4, where);
    Tensor t = Tensor::Empty(Shape(dims), DType::kFloat32, {}, MemKind::kParam);
    if (size) std::memcpy(t.f(), data, size * 4);  // the file is little-endian, as is every host frugal runs on
    out.emplace_back(std::move(name), std::move(t));
  }
  FRUGAL_REQUIRE(r.left() == 0, path, ": ", r.left(), " unexpected bytes after the last tensor (corrupt file?)");
  LeReader tail(bytes, payload_end, bytes.size(), path, kParamsKind, kParamsFix);
  const uint64_t stored = tail.Uint(4, "the checksum");
  const uint32_t actual = Crc(bytes.data() + kHeader, payload_end - kHeader);
  FRUGAL_REQUIRE(stored == actual, path, ": checksum mismatch (stored ", stored, ", computed ", actual,
                 "): the file is corrupt");
  return out;
}

void SaveParams(const std::string& path, const NamedTensors& params) {
  const std::string bytes = EncodeParams(params);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    FRUGAL_REQUIRE(out, tmp, ": cannot write (check the directory exists and is writable)");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    FRUGAL_REQUIRE(out, tmp, ": write failed (disk full?)");
  }
  FRUGAL_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0, path, ": cannot rename ", tmp, " to it");
}

NamedTensors LoadParams(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FRUGAL_REQUIRE(in, path, ": cannot open the params file (check the path)");
  std::stringstream ss;
  ss << in.rdbuf();
  return DecodeParams(ss.str(), path);
}

}  // namespace frugal
