// Decoding ONNX TensorProtos (raw little-endian bytes or typed repeated
// fields) and reading serialized models and tensors.
#include <glog/logging.h>

#include <cstring>
#include <fstream>

#include "frugal/onnx.h"
#include "onnx.pb.h"

namespace frugal {
namespace {

// Element size in raw_data of the integer types we widen to int64; 0 for others.
int IntBytes(int type) {
  switch (type) {
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: return 1;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::INT64: return 8;
    default: return 0;
  }
}

bool IsSigned(int type) {
  return type == onnx::TensorProto::INT8 || type == onnx::TensorProto::INT16 || type == onnx::TensorProto::INT32 ||
         type == onnx::TensorProto::INT64;
}

// One little-endian integer of `bytes` bytes at p, sign-extended if signed.
int64_t ReadLE(const unsigned char* p, int bytes, bool is_signed) {
  uint64_t u = 0;
  for (int b = 0; b < bytes; ++b) u |= static_cast<uint64_t>(p[b]) << (8 * b);
  if (is_signed && bytes < 8 && (u >> (8 * bytes - 1)) & 1) u |= ~uint64_t{0} << (8 * bytes);
  return static_cast<int64_t>(u);
}

}  // namespace

int64_t OnnxTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // checked when decoded
  return n;
}

OnnxTensor DecodeOnnxTensor(const onnx::TensorProto& t, const std::string& where) {
  OnnxTensor out;
  const int type = t.data_type();
  out.type_name = onnx::TensorProto::DataType_IsValid(type)
                      ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type))
                      : Fmt("type ", type);
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    FRUGAL_REQUIRE(d >= 0, where, ": tensor '", t.name(), "' has a negative dim ", d);
    const bool overflow = __builtin_mul_overflow(count, d, &count);
    FRUGAL_REQUIRE(!overflow, where, ": tensor '", t.name(), "' has dims ",
                   Shape(std::vector<int64_t>(t.dims().begin(), t.dims().end())),
                   ", more elements than a 64-bit count holds");
    out.dims.push_back(d);
  }
  FRUGAL_REQUIRE(t.data_location() != onnx::TensorProto::EXTERNAL, where, ": tensor '", t.name(),
                 "' keeps its data in an external file, which frugal does not read");
  const int64_t n = out.NumElements();
  const std::string& raw = t.raw_data();
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  auto check_count = [&](int64_t got) {
    FRUGAL_REQUIRE(got == n, where, ": tensor '", t.name(), "' of shape ", out.shape(), " holds ", got,
                   " values instead of ", n);
  };
  if (type == onnx::TensorProto::FLOAT) {
    out.kind = OnnxTensor::Kind::kFloat;
    if (t.has_raw_data()) {
      FRUGAL_REQUIRE(raw.size() % 4 == 0, where, ": tensor '", t.name(), "' has ", raw.size(), " raw bytes");
      check_count(static_cast<int64_t>(raw.size() / 4));
      out.f.resize(n);
      for (int64_t k = 0; k < n; ++k) {
        uint32_t u = static_cast<uint32_t>(ReadLE(bytes + 4 * k, 4, false));
        std::memcpy(&out.f[k], &u, 4);
      }
    } else {
      check_count(t.float_data_size());
      out.f.assign(t.float_data().begin(), t.float_data().end());
    }
  } else if (int size = IntBytes(type)) {
    out.kind = OnnxTensor::Kind::kInt;
    if (t.has_raw_data()) {
      FRUGAL_REQUIRE(raw.size() % size == 0, where, ": tensor '", t.name(), "' has ", raw.size(), " raw bytes");
      check_count(static_cast<int64_t>(raw.size() / size));
      for (int64_t k = 0; k < n; ++k) out.i.push_back(ReadLE(bytes + size * k, size, IsSigned(type)));
    } else if (type == onnx::TensorProto::INT64) {
      check_count(t.int64_data_size());
      out.i.assign(t.int64_data().begin(), t.int64_data().end());
    } else if (type == onnx::TensorProto::UINT32) {
      check_count(t.uint64_data_size());
      out.i.assign(t.uint64_data().begin(), t.uint64_data().end());
    } else {
      check_count(t.int32_data_size());
      out.i.assign(t.int32_data().begin(), t.int32_data().end());
    }
  }
  return out;
}

OnnxTensor ReadOnnxTensorFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FRUGAL_REQUIRE(in, path, ": cannot open the tensor file");
  onnx::TensorProto t;
  FRUGAL_REQUIRE(t.ParseFromIstream(&in), path, ": not a serialized ONNX TensorProto");
  return DecodeOnnxTensor(t, path);
}

Tensor ToTensor(const OnnxTensor& t, MemKind kind) {
  CHECK(t.kind == OnnxTensor::Kind::kFloat) << "ToTensor of a " << t.type_name << " tensor";
  Tensor out = Tensor::Empty(t.shape(), DType::kFloat32, {}, kind);
  if (!t.f.empty()) std::memcpy(out.f(), t.f.data(), t.f.size() * sizeof(float));
  return out;
}

onnx::ModelProto ReadOnnxModel(const std::string& path) {
  const std::string bytes = ReadFileBytes(path, "ONNX model");
  FRUGAL_REQUIRE(!bytes.empty(), path, ": the file is empty, not an ONNX model");
  onnx::ModelProto m;
  FRUGAL_REQUIRE(m.ParseFromString(bytes), path, ": not an ONNX model (cannot parse a ModelProto)");
  FRUGAL_REQUIRE(m.has_graph(), path, ": the ONNX model holds no graph");
  return m;
}

}  // namespace frugal
