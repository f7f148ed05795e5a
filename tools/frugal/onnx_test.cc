// frugal onnx-test DIR...: runs ONNX backend tests (a folder of test dirs,
// or test dirs themselves), prints a line per failure with its reason and
// ends with "N passed, M failed, K unsupported". Exit status 0 iff M == 0.
// With --expect-passed FILE (a test name per line, '#' comments), a test on
// the list that does not pass is named and ends the output instead, with
// exit status 1: an op that regresses to "unsupported" does not go unnoticed.
#include <gflags/gflags.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "cli.h"
#include "frugal/onnx.h"

DEFINE_bool(list_unsupported, false, "onnx-test: also print a line per unsupported test with the reason");
DEFINE_bool(list_passed, false, "onnx-test: also print a line per passed test");
DEFINE_bool(summary, false, "onnx-test: also count the tests held back by each unsupported ONNX op and reason");
DEFINE_bool(inputs_at_run_time, false,
            "onnx-test: feed every input at run time (only its shape known at import: nothing folded into constants)");
DEFINE_string(expect_passed, "",
              "onnx-test: a file of test names (one per line) that must pass; any that does not fails the run");

namespace frugal::cli {
namespace {

// The names listed in an --expect-passed file.
std::set<std::string> ExpectedPasses(const std::string& path) {
  std::ifstream in(path);
  FRUGAL_REQUIRE(in.is_open(), "--expect-passed ", path, ": cannot open the list of tests that must pass");
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    line.erase(std::remove_if(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); }), line.end());
    if (!line.empty()) names.insert(line);
  }
  return names;
}

}  // namespace

int OnnxTest() {
  FRUGAL_REQUIRE(!g_args.empty(), "onnx-test needs test folders: frugal onnx-test DIR... (e.g. ",
                 "/usr/share/libonnx-testdata/data/node, from Debian's libonnx-testdata)");
  const auto start = std::chrono::steady_clock::now();
  int passed = 0, failed = 0, unsupported = 0;
  std::set<std::string> expected;
  if (!FLAGS_expect_passed.empty()) expected = ExpectedPasses(FLAGS_expect_passed);
  std::map<std::string, std::string> regressed;  // listed name -> what it did instead
  std::map<std::string, int> why;                // "Conv: maps to frugal op 'convolution'..." -> tests
  for (const std::string& dir : FindOnnxTests(g_args)) {
    OnnxTestResult r = RunOnnxBackendTest(dir, !FLAGS_inputs_at_run_time);
    const std::string name = std::filesystem::path(dir).filename().string();
    if (expected.erase(name) && r.status != OnnxTestStatus::kPassed)
      regressed[name] = (r.status == OnnxTestStatus::kFailed ? "failed: " : "unsupported: ") + r.reason;
    switch (r.status) {
      case OnnxTestStatus::kPassed:
        ++passed;
        if (FLAGS_list_passed) std::printf("PASS %s\n", name.c_str());
        break;
      case OnnxTestStatus::kFailed:
        ++failed;
        std::printf("FAIL %s: %s\n", name.c_str(), r.reason.c_str());
        break;
      case OnnxTestStatus::kUnsupported:
        ++unsupported;
        {
          std::set<std::string> keys;
          for (const auto& u : r.unsupported) keys.insert(u.op_type + ": " + u.reason);
          if (keys.empty()) keys.insert(r.reason);
          for (const auto& k : keys) ++why[k];
        }
        if (FLAGS_list_unsupported) std::printf("UNSUPPORTED %s: %s\n", name.c_str(), r.reason.c_str());
        break;
    }
    std::fflush(stdout);
  }
  if (FLAGS_summary) {
    std::vector<std::pair<int, std::string>> order;
    for (const auto& [k, n] : why) order.push_back({-n, k});
    std::sort(order.begin(), order.end());
    std::printf("unsupported, by ONNX op and reason (tests held back):\n");
    for (const auto& [n, k] : order) std::printf("%5d  %s\n", -n, k.c_str());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("onnx-test: %d tests in %.1f s\n", passed + failed + unsupported, s);
  std::printf("%d passed, %d failed, %d unsupported\n", passed, failed, unsupported);
  for (const std::string& name : expected) regressed[name] = "not found among the tests run";
  for (const auto& [name, what] : regressed) std::printf("NO LONGER PASSES %s: %s\n", name.c_str(), what.c_str());
  if (!regressed.empty()) {
    std::printf("%zu tests of %s no longer pass\n", regressed.size(), FLAGS_expect_passed.c_str());
    return 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace frugal::cli
