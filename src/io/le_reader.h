// Little-endian fields of a binary file held in memory, each read checked
// against the end: the params file's and MXNet's NDArray list's reader.
#pragma once

#include <cstdint>
#include <string>

#include "frugal/base.h"

namespace frugal {

class LeReader {
 public:
  // Reads bytes [pos, end) of the file at path; running past end is an
  // Error "<path>: truncated <kind>: it ends inside <what> (<n> bytes needed
  // at offset <pos>, <left> left); <fix>".
  LeReader(const std::string& bytes, size_t pos, size_t end, const std::string& path, const char* kind, const char* fix)
      : b_(bytes), pos_(pos), end_(end), path_(path), kind_(kind), fix_(fix) {}

  // An unsigned field of n bytes.
  uint64_t Uint(int n, const std::string& what) {
    const char* p = Take(n, what);
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[k])) << (8 * k);
    return v;
  }
  // A signed field of 4 or 8 bytes.
  int64_t Int(int n, const std::string& what) {
    const uint64_t u = Uint(n, what);
    return n == 4 ? static_cast<int32_t>(static_cast<uint32_t>(u)) : static_cast<int64_t>(u);
  }
  // The next n bytes.
  const char* Take(uint64_t n, const std::string& what) {
    FRUGAL_REQUIRE(n <= left(), path_, ": truncated ", kind_, ": it ends inside ", what, " (", n,
                   " bytes needed at offset ", pos_, ", ", left(), " left); ", fix_);
    pos_ += n;
    return b_.data() + pos_ - n;
  }
  uint64_t left() const { return end_ - pos_; }
  const std::string& path() const { return path_; }

 private:
  const std::string& b_;
  size_t pos_, end_;
  const std::string& path_;
  const char* kind_;
  const char* fix_;
};

}  // namespace frugal
