#include "frugal/base.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace frugal {

int64_t Shape::Size() const { return Prod(0, ndim()); }

int64_t Shape::Prod(int begin, int end) const {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) {
    const bool overflow = __builtin_mul_overflow(n, dims_[i], &n);
    FRUGAL_REQUIRE(!overflow, "shape ", ToString(), " has more elements than a 64-bit count holds");
  }
  return n;
}

std::string Shape::ToString() const {
  if (!known_) return "?";
  std::string s = "(";
  for (int i = 0; i < ndim(); ++i) s += (i ? "," : "") + std::to_string(dims_[i]);
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.ToString(); }

int64_t DTypeBytes(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kInt32: return 4;
    case DType::kUInt8: return 1;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
    case DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

const char* LayoutName(Layout l) { return l == Layout::kNhwc ? "nhwc" : "plain"; }

DType ParseComputeDType(const std::string& text) {
  if (text == "float32" || text == "fp32" || text == "f32") return DType::kFloat32;
  if (text == "bfloat16" || text == "bf16") return DType::kBFloat16;
  throw Error(Fmt("unknown dtype '", text, "': use float32 (fp32) or bfloat16 (bf16)"));
}

std::string Device::ToString() const { return Fmt(type == DeviceType::kCPU ? "cpu(" : "cuda(", id, ")"); }

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string SourceLoc::ToString() const {
  if (file.empty()) return "";
  if (line == 0) return file;
  return Fmt(file, ":", line, column ? Fmt(":", column) : "");
}

int64_t ParseBytes(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) { pos = 0; }
  std::string unit = text.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  struct U {
    const char* name;
    double mult;
  };
  const U units[] = {
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  FRUGAL_REQUIRE(pos > 0 && v >= 0, "'", text,
                 "' is not a byte size (write a number with an optional unit: 1024, 512MiB, 7GB)");
  for (const U& u : units) {
    if (unit != u.name) continue;
    FRUGAL_REQUIRE(v * u.mult < 9.2e18, "'", text, "' is more bytes than frugal counts (at most 9.2e18)");
    return static_cast<int64_t>(std::llround(v * u.mult));
  }
  throw Error(Fmt("'", text, "': unknown unit '", unit, "' (use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB)"));
}

namespace {
// Levenshtein distance.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string Nearest(const std::string& name, const std::vector<std::string>& candidates, size_t max_distance) {
  std::string best;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(name, c);
    if (d < max_distance) {
      max_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace frugal
