#include "test_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "frugal/base.h"

namespace frugal::test {

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

RunResult RunFrugal(const std::string& args) {
  std::string cmd = std::string("cd ") + FRUGAL_SOURCE_DIR + " && " + FRUGAL_BIN + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void ExpectError(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected frugal::Error containing '" << (needles.empty() ? "" : needles.front()) << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& needle : needles) EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

}  // namespace frugal::test
