// Helpers for tests: scratch directories and running the frugal binary.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/graph.h"
#include "frugal/tensor.h"

namespace frugal::test {

// A fresh directory under /tmp, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes text to a file in the directory and returns its path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// Every output of a forward graph at inference (naive engine, share plan),
// given its variables by name; copies, so they outlive the executor.
std::vector<Tensor> RunForward(Graph g, const std::map<std::string, Tensor>& vars);

// The relative L2 distance of b from a (a and b of one size).
double RelErr(const std::vector<float>& a, const std::vector<float>& b);

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};
// Runs the frugal CLI with the given arguments from the source directory.
RunResult RunFrugal(const std::string& args);
// Defined in the sanitizer builds, whose shadow memory and quarantine grow
// the process (tests of its peak skip those checks there). The TSan build
// undefines __SANITIZE_THREAD__ and defines GLOG_SANITIZE_THREAD instead
// (CMakeLists.txt says why).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(GLOG_SANITIZE_THREAD)
#define FRUGAL_TEST_SANITIZED 1
#endif
// Whether /proc/cpuinfo lists `flag` ("avx512_bf16") among the CPU's flags.
bool CpuHasFlag(const std::string& flag);
// Runs a shell command line from the source directory (stderr with stdout).
RunResult RunShell(const std::string& command);

// Writes an IDX file of unsigned bytes (magic 0x00000803-style: type 8,
// len(dims) dims), cut to its first keep_bytes bytes (to test truncation).
void WriteIdx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
              size_t keep_bytes = SIZE_MAX);

// Toy sample k of a learnable problem: its class (k * 7) % 4 lights up that
// pixel row of a 4x4 image.
void ToySample(int k, uint8_t* image, uint8_t* label);
// n samples of a learnable toy problem as the IDX files dir/prefix-images
// and dir/prefix-labels: sample i is class i % 4, which lights up pixel
// block i % 4 of its 4x4 image.
void WriteToyData(const TempDir& dir, const std::string& prefix, int n);
// A config's data section over dir's train- and val- IDX files (WriteToyData,
// WriteToy): `batch` (a number or a ${variable}) and the sample shape.
std::string ToyDataSection(const TempDir& dir, const std::string& batch, const std::string& sample_shape = "[1, 4, 4]");
// Writes toy samples `order` as the IDX files dir/prefix-images and
// dir/prefix-labels.
void WriteToy(const TempDir& dir, const std::string& prefix, const std::vector<int>& order);
// The checkpoint `frugal train` writes in dir at this iteration.
std::string Ckpt(const std::string& dir, int64_t iteration);

// Every config of models/ (models/*/*.prototxt), sorted.
std::vector<std::string> ModelConfigPaths();

// Runs fn and expects a frugal::Error of one line that contains every needle
// (a test failure otherwise).
void ExpectError(const std::function<void()>& fn, const std::vector<std::string>& needles);
// One push to an engine, as a test records it.
struct PushRecord {
  std::string name;
  std::vector<Var> reads, writes;
};
// hb[i][j]: push i finishes before push j starts, on any engine, for pushes
// made in this order (reads after a write wait for it; a write waits for
// every earlier access; a variable both read and written is written).
std::vector<std::vector<bool>> HappensBefore(const std::vector<PushRecord>& pushes);

}  // namespace frugal::test
