#include "test_util.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "frugal/base.h"
#include "frugal/executor.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/shapes.h"

namespace frugal::test {

std::vector<Tensor> RunForward(Graph g, const std::map<std::string, Tensor>& vars) {
  std::vector<std::pair<std::string, Shape>> shapes;
  Bindings b;
  for (const auto& [name, t] : vars) {
    shapes.push_back({name, t.shape()});
    b.vars[name] = t;
  }
  InferShapes(&g, shapes);
  MemoryPlan plan = PlanMemory(g, MemoryStrategy::kShare);
  std::unique_ptr<Engine> engine = MakeEngine("naive");
  Executor exec(g, plan, b, engine.get());
  exec.Run(/*is_train=*/false, 0, 1);
  std::vector<Tensor> out;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    out.push_back(Tensor::Empty(exec.output(static_cast<int>(k)).shape()));
    out.back().CopyFrom(exec.output(static_cast<int>(k)));
  }
  return out;
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(a[i]) * a[i];
  }
  return std::sqrt(d / std::max(n, 1e-30));
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/frugal_test_XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { std::filesystem::remove_all(path_); }

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  std::ofstream(File(name)) << text;
  return File(name);
}

RunResult RunFrugal(const std::string& args) { return RunShell(std::string(FRUGAL_BIN) + " " + args); }

RunResult RunShell(const std::string& command) {
  const std::string cmd = std::string("cd ") + FRUGAL_SOURCE_DIR + " && " + command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void WriteIdx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
              size_t keep_bytes) {
  std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
  bytes.append(data.begin(), data.end());
  std::ofstream(path, std::ios::binary) << bytes.substr(0, std::min(keep_bytes, bytes.size()));
}

void ToySample(int k, uint8_t* image, uint8_t* label) {
  *label = static_cast<uint8_t>((k * 7) % 4);
  for (int p = 0; p < 16; ++p) image[p] = (p / 4 == *label) ? 150 + (k * 7 + p) % 100 : (k * 13 + p) % 90;
}

void WriteToyData(const TempDir& dir, const std::string& prefix, int n) {
  std::vector<uint8_t> images(n * 16), labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(i % 4);
    for (int p = 0; p < 16; ++p) images[i * 16 + p] = (p / 4 == labels[i]) ? 200 + (i * 7 + p) % 50 : (i * 13 + p) % 60;
  }
  WriteIdx(dir.File(prefix + "-images"), {static_cast<uint32_t>(n), 4, 4}, images);
  WriteIdx(dir.File(prefix + "-labels"), {static_cast<uint32_t>(n)}, labels);
}

std::string ToyDataSection(const TempDir& dir, const std::string& batch, const std::string& sample_shape) {
  return "data { train { idx { images: \"" + dir.File("train-images") + "\" labels: \"" + dir.File("train-labels") +
         "\" } }\n       val { idx { images: \"" + dir.File("val-images") + "\" labels: \"" + dir.File("val-labels") +
         "\" } }\n       batch_size: " + batch + " sample_shape: " + sample_shape + " }\n";
}

void WriteToy(const TempDir& dir, const std::string& prefix, const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  std::vector<uint8_t> images(n * 16), labels(n);
  for (int i = 0; i < n; ++i) ToySample(order[i], &images[i * 16], &labels[i]);
  WriteIdx(dir.File(prefix + "-images"), {static_cast<uint32_t>(n), 4, 4}, images);
  WriteIdx(dir.File(prefix + "-labels"), {static_cast<uint32_t>(n)}, labels);
}

std::string Ckpt(const std::string& dir, int64_t iteration) {
  char name[40];
  std::snprintf(name, sizeof(name), "/ckpt-%010lld.frugal", static_cast<long long>(iteration));
  return dir + name;
}

std::vector<std::string> ModelConfigPaths() {
  std::vector<std::string> paths;
  for (const auto& dir : std::filesystem::directory_iterator(std::string(FRUGAL_SOURCE_DIR) + "/models"))
    if (dir.is_directory())
      for (const auto& file : std::filesystem::directory_iterator(dir.path()))
        if (file.path().extension() == ".prototxt") paths.push_back(file.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

void ExpectError(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected frugal::Error containing '" << (needles.empty() ? "" : needles.front()) << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& needle : needles)
      EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

std::vector<std::vector<bool>> HappensBefore(const std::vector<PushRecord>& ops) {
  const size_t n = ops.size();
  std::vector<std::vector<bool>> hb(n, std::vector<bool>(n, false));
  std::map<Var, int> last_write;
  std::map<Var, std::vector<int>> reads_since;
  for (size_t j = 0; j < n; ++j) {
    auto is_write = [&](Var v) { return std::count(ops[j].writes.begin(), ops[j].writes.end(), v) > 0; };
    std::vector<int> deps;
    for (Var v : ops[j].reads)
      if (!is_write(v) && last_write.count(v)) deps.push_back(last_write[v]);
    for (Var v : ops[j].writes) {
      if (last_write.count(v)) deps.push_back(last_write[v]);
      for (int r : reads_since[v]) deps.push_back(r);
    }
    for (int d : deps) {
      hb[d][j] = true;
      for (size_t x = 0; x < n; ++x)
        if (hb[x][d]) hb[x][j] = true;
    }
    for (Var v : ops[j].reads)
      if (!is_write(v)) reads_since[v].push_back(static_cast<int>(j));
    for (Var v : ops[j].writes) {
      last_write[v] = static_cast<int>(j);
      reads_since[v].clear();
    }
  }
  return hb;
}

bool CpuHasFlag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;)
      if (w == flag) return true;
    return false;
  }
  return false;
}

}  // namespace frugal::test
