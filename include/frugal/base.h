// Basic value types shared by every part of frugal: shapes, element types,
// devices, and the error type that carries a user-facing message.
//
// User errors (bad config, bad data, impossible shapes) throw frugal::Error
// with a message that names the file/line, the node, the values and the fix.
// Internal invariants use glog's CHECK, which aborts: a CHECK failure is a
// bug in frugal, never the user's fault.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace frugal {

// An error the user can act on. what() is one line, ready to print.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Builds a message from streamable parts: Fmt("got ", n, " expected ", m).
template <typename... Args>
std::string Fmt(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Throws frugal::Error when cond is false; the message parts are only
// formatted on failure.
#define FRUGAL_REQUIRE(cond, ...)                                   \
  do {                                                              \
    if (!(cond)) throw ::frugal::Error(::frugal::Fmt(__VA_ARGS__)); \
  } while (0)

// A tensor shape. An empty dims vector with known()==false means "not yet
// inferred"; a known shape with no dims is a scalar.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims), known_(true) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)), known_(true) {}

  bool known() const { return known_; }
  int ndim() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t Size() const;  // product of dims; 1 for a scalar
  // Product of dims in [begin, end).
  int64_t Prod(int begin, int end) const;

  bool operator==(const Shape& o) const { return known_ == o.known_ && dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string ToString() const;  // "(32,784)" or "?"

 private:
  std::vector<int64_t> dims_;
  bool known_ = false;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

// Element types. The numbers are stored in checkpoints: append only.
// kBFloat16: bfloat16 (the top 16 bits of a float32; frugal/bf16.h), the
// activations and their gradients of a mixed-precision graph.
enum class DType : uint8_t { kFloat32, kInt32, kUInt8, kBFloat16 };
int64_t DTypeBytes(DType t);

// The most bytes one tensor may hold (1 TiB). Shape inference refuses
// larger ones: oneDNN's primitive creation dies of SIGFPE from 2^40
// elements on (seen with AVX-512 convolution), beyond where any device holds
// such a tensor anyway.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;
const char* DTypeName(DType t);

// How the bytes of a 4-D activation (N, C, H, W) are ordered. Shapes stay
// logical (N, C, H, W) whatever the layout. kNhwc (channels last) is what
// oneDNN's convolutions read and write without a reorder; ChooseLayouts
// (frugal/passes/shapes.h) picks it for the activations between ops that
// take it.
enum class Layout : uint8_t { kPlain, kNhwc };
const char* LayoutName(Layout l);
// "float32"/"fp32"/"f32" or "bfloat16"/"bf16" (the compute types a user picks);
// throws Error naming the choices.
DType ParseComputeDType(const std::string& text);

enum class DeviceType : uint8_t { kCPU, kCUDA };
struct Device {
  DeviceType type = DeviceType::kCPU;
  int id = 0;
  bool operator==(const Device& o) const { return type == o.type && id == o.id; }
  std::string ToString() const;  // "cpu(0)"
};
constexpr int kMaxDevices = 16;
// A GPU's stream with its cuBLAS and cuDNN handles
// (src/backend/cuda/cuda_util.h): what CUDA kernels and the training loop's
// copies are queued on. Work on the CPU gets none (nullptr).
namespace cuda {
struct Context;
}

// FNV-1a over the bytes of s: stable across platforms and runs (std::hash
// promises neither).
inline uint64_t StableHash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001B3ull;
  return h;
}

// A place in a config file, for errors ("file:line:column").
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
  std::string ToString() const;  // empty when unknown
};

// Formats a byte count for people: "1.50 MiB".
std::string HumanBytes(int64_t bytes);
// Parses "7GB", "512MiB", "1024" into bytes; throws Error on bad input.
int64_t ParseBytes(const std::string& text);

// A file written whole or not at all: every file frugal writes (configs,
// checkpoints, weights, ONNX models, plots, traces, cost tables) goes
// through one. Its bytes go to a temporary file beside `path`, which
// Commit() syncs and renames over it, then syncs the folder; until then
// `path` keeps what it held, and an AtomicFile destroyed before Commit()
// removes its temporary. Each failure is an Error naming `path` and the
// OS's reason (a folder given for `path` says so), so no write is reported
// that was not made.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void Write(const void* data, size_t bytes);
  void Commit();
  // Leaves the temporary as it is (a simulated crash: tests/train/checkpoint_test.cc).
  void Abandon();
  int fd() const { return fd_; }  // for bytes written in place (pwrite) before Commit()
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};
// The whole file at once, through an AtomicFile.
void WriteFileAtomic(const std::string& path, const std::string& bytes);
// The whole file at `path` (a `what`: "ONNX model", "cost table"); an Error
// naming both where it is missing, a folder or cannot be read. A `hint`
// says, where it is missing, where such a file comes from.
std::string ReadFileBytes(const std::string& path, const std::string& what, const std::string& hint = "");

// The candidate nearest to `name` in edit distance (Levenshtein), or "" when
// none is closer than `max_distance`: the "did you mean" of error messages.
std::string Nearest(const std::string& name, const std::vector<std::string>& candidates, size_t max_distance = 4);

}  // namespace frugal
