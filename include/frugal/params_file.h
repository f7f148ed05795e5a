// The params file: named float32 tensors (weights), for import-onnx and
// later for checkpoints. A small, documented binary format, every field
// little-endian:
//
//   offset  size         field
//   0       8            magic "FRGPARAM"
//   8       4  uint32    version, 1
//   12      4  uint32    count: how many tensors
//   16      ...          payload: count records, each
//                          uint32 name length L, then L bytes of name (UTF-8)
//                          uint32 ndim (at most 16), then ndim int64 dims (>= 0)
//                          prod(dims) float32 values, row-major
//   end-4   4  uint32    CRC-32 (zlib's crc32) of the payload bytes
//
// The loader rejects a wrong magic or version, a file that ends inside a
// record or has bytes after the checksum, impossible dims, duplicate names
// and a checksum that does not match, each with a one-line Error naming the
// file.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frugal/tensor.h"

namespace frugal {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The file's bytes for these tensors (float32 only).
std::string EncodeParams(const NamedTensors& params);
// Parses bytes read from `path` (used in messages). Throws Error.
NamedTensors DecodeParams(const std::string& bytes, const std::string& path);

// Writes path atomically (a temporary file, then rename). Throws Error.
void SaveParams(const std::string& path, const NamedTensors& params);
// Reads and checks path. Tensors are allocated as MemKind::kParam. Throws Error.
NamedTensors LoadParams(const std::string& path);

}  // namespace frugal
