// MXNet's NDArray list file (format in include/frugal/mxnet.h): the reader
// that import-mxnet uses and the writer that tests use in MXNet's place.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "frugal/mxnet.h"
#include "io/le_reader.h"

namespace frugal {
namespace {

constexpr uint64_t kListMagic = 0x112;
constexpr uint32_t kV1Magic = 0xF993FAC8, kV2Magic = 0xF993FAC9, kV3Magic = 0xF993FACA;
constexpr int64_t kMaxNdDims = 32;
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

// MXNet's type flags (mshadow::TypeFlag) that a params file may hold, with
// their element sizes; the others (bool, bfloat16, ...) are refused.
struct TypeFlag {
  int32_t flag;
  const char* name;
  int bytes;
};
constexpr TypeFlag kTypes[] = {{0, "float32", 4}, {1, "float64", 8}, {2, "float16", 2}, {3, "uint8", 1},
                               {4, "int32", 4},   {5, "int8", 1},    {6, "int64", 8}};

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  float f;
  if (exp == 0x1F) {  // inf, nan
    const uint32_t bits = sign | 0x7F800000u | (mant << 13);
    std::memcpy(&f, &bits, 4);
    return f;
  }
  f = exp == 0 ? std::ldexp(static_cast<float>(mant), -24) : std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return sign ? -f : f;
}

template <typename T>
T Raw(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element k of little-endian data of type t, as float.
float ElementAt(const char* p, const TypeFlag& t, int64_t k) {
  p += k * t.bytes;
  switch (t.flag) {
    case 0: return Raw<float>(p);
    case 1: return static_cast<float>(Raw<double>(p));
    case 2: return HalfToFloat(Raw<uint16_t>(p));
    case 3: return Raw<uint8_t>(p);
    case 4: return static_cast<float>(Raw<int32_t>(p));
    case 5: return Raw<int8_t>(p);
    default: return static_cast<float>(Raw<int64_t>(p));
  }
}

std::vector<int64_t> ReadDims(LeReader* r, uint32_t magic, const std::string& what) {
  // Legacy arrays have no magic: the word read as one is their ndim, and
  // their dims are uint32.
  const bool legacy = magic != kV1Magic && magic != kV2Magic && magic != kV3Magic;
  const int64_t ndim = legacy ? magic : r->Int(4, what + " (its ndim)");
  const bool none = ndim < 0 || (ndim == 0 && magic != kV3Magic);
  FRUGAL_REQUIRE(!none, r->path(), ": ", what, " has no shape (ndim ", ndim,
                 "): an empty NDArray, which a params file should not hold");
  FRUGAL_REQUIRE(ndim <= kMaxNdDims, r->path(), ": ", what, " claims ", ndim, " dims (at most ", kMaxNdDims,
                 legacy ? "; not an NDArray magic either: is this an MXNet params file?)" : "; corrupt file?)");
  std::vector<int64_t> dims;
  uint64_t size = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t dim = r->Int(legacy ? 4 : 8, what + " (its dims)");
    FRUGAL_REQUIRE(dim >= 0 && static_cast<uint64_t>(dim) < kMaxElements &&
                       (dim == 0 || size <= kMaxElements / static_cast<uint64_t>(dim)),
                   r->path(), ": ", what, " has impossible dim ", d, " = ", dim, " (corrupt file?)");
    size *= static_cast<uint64_t>(dim);
    dims.push_back(dim);
  }
  return dims;
}

Tensor ReadArray(LeReader* r, const std::string& what) {
  const uint32_t magic = static_cast<uint32_t>(r->Uint(4, what + " (its magic)"));
  if (magic == kV2Magic || magic == kV3Magic) {
    const int64_t stype = r->Int(4, what + " (its storage type)");
    FRUGAL_REQUIRE(stype == 0, r->path(), ": ", what, " has storage type ", stype,
                   " (sparse); frugal reads dense arrays (storage type 0): save it with tostype('default')");
  }
  const Shape shape(ReadDims(r, magic, what));
  r->Take(8, what + " (its context)");
  const int64_t flag = r->Int(4, what + " (its type flag)");
  const TypeFlag* type = nullptr;
  for (const TypeFlag& t : kTypes)
    if (t.flag == flag) type = &t;
  FRUGAL_REQUIRE(type, r->path(), ": ", what, " ", shape, " has type flag ", flag,
                 ", which frugal does not read (0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, 5 int8, 6 int64)");
  const uint64_t bytes = static_cast<uint64_t>(shape.Size()) * type->bytes;
  FRUGAL_REQUIRE(bytes <= r->left(), r->path(), ": ", what, " declares ", shape, " ", type->name, " = ", bytes,
                 " bytes but only ", r->left(), " bytes are left in the file (truncated or corrupt; save it again)");
  const char* p = r->Take(bytes, what);
  Tensor t = Tensor::Empty(shape, DType::kFloat32, {}, MemKind::kParam);
  for (int64_t k = 0; k < shape.Size(); ++k) t.f()[k] = ElementAt(p, *type, k);
  return t;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

void PutU(std::string* s, uint64_t v, int n) {
  for (int b = 0; b < n; ++b) s->push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

}  // namespace

NamedTensors DecodeMxnetParams(const std::string& bytes, const std::string& path) {
  LeReader r(bytes, 0, bytes.size(), path, "MXNet params file", "save it again from MXNet");
  const uint64_t magic = r.Uint(8, "the header");
  FRUGAL_REQUIRE(magic == kListMagic, path, ": not an MXNet params file (magic ", Hex(magic),
                 ", expected 0x112, the NDArray list that mx.nd.save and Module.save_checkpoint write)");
  r.Uint(8, "the header");  // reserved
  const uint64_t count = r.Uint(8, "the header (the array count)");
  // Each array takes at least 16 bytes: a count beyond that is corrupt.
  FRUGAL_REQUIRE(count <= r.left() / 16, path, ": the header promises ", count, " arrays, more than the ", r.left(),
                 " bytes left can hold (corrupt or truncated file)");
  std::vector<Tensor> arrays;
  for (uint64_t k = 0; k < count; ++k) arrays.push_back(ReadArray(&r, Fmt("array ", k, " of ", count)));
  const uint64_t names = r.Uint(8, "the name count after the arrays");
  FRUGAL_REQUIRE(names == count, path, ": ", count, " arrays but ", names,
                 " names; frugal needs each array named (arg:NAME or aux:NAME), as Module.save_checkpoint writes");
  NamedTensors out;
  std::set<std::string> seen;
  for (uint64_t k = 0; k < count; ++k) {
    const std::string what = Fmt("the name of array ", k, " of ", count);
    const uint64_t len = r.Uint(8, what);
    std::string name(r.Take(len, what), len);
    FRUGAL_REQUIRE(seen.insert(name).second, path, ": the name '", name, "' is given to two arrays");
    out.emplace_back(std::move(name), arrays[k]);
  }
  FRUGAL_REQUIRE(r.left() == 0, path, ": ", r.left(), " unexpected bytes after the last name (corrupt file?)");
  return out;
}

NamedTensors ReadMxnetParams(const std::string& path) {
  return DecodeMxnetParams(ReadFileBytes(path, "MXNet params"), path);
}

std::string EncodeMxnetParams(const NamedTensors& arrays) {
  std::string out;
  PutU(&out, kListMagic, 8);
  PutU(&out, 0, 8);
  PutU(&out, arrays.size(), 8);
  for (const auto& [name, t] : arrays) {
    FRUGAL_REQUIRE(t.dtype() == DType::kFloat32, "MXNet params: array '", name, "' is not float32");
    PutU(&out, kV2Magic, 4);
    PutU(&out, 0, 4);  // dense
    PutU(&out, static_cast<uint32_t>(t.shape().ndim()), 4);
    for (int64_t d : t.shape().dims()) PutU(&out, static_cast<uint64_t>(d), 8);
    PutU(&out, 1, 4);  // dev_type: CPU
    PutU(&out, 0, 4);  // dev_id
    PutU(&out, 0, 4);  // float32
    out.append(reinterpret_cast<const char*>(t.f()), static_cast<size_t>(t.bytes()));
  }
  PutU(&out, arrays.size(), 8);
  for (const auto& [name, t] : arrays) {
    PutU(&out, name.size(), 8);
    out += name;
  }
  return out;
}

void WriteMxnetParams(const std::string& path, const NamedTensors& arrays) {
  WriteFileAtomic(path, EncodeMxnetParams(arrays));
}

}  // namespace frugal
