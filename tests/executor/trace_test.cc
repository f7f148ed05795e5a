// The Chrome trace writer: valid JSON with the events, args and thread
// names given, from several threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "frugal/trace.h"
#include "io/json.h"
#include "test_util.h"

namespace frugal {
namespace {

using Json = JsonValue;

TEST(Trace, WritesParsableJsonWithTheEvents) {
  TraceWriter w;
  w.SetThreadName(1, "engine worker 1");
  TraceEvent fc;
  fc.name = "fc1";
  fc.category = "forward";
  fc.tid = 1;
  fc.begin_us = 120;
  fc.end_us = 170;
  fc.Arg("recompute", true).Arg("bytes", int64_t{4096}).Arg("ratio", 0.5).Arg("op", "fully_connected");
  w.Add(fc);
  TraceEvent odd;
  odd.name = "quote\" back\\slash\nnewline";
  odd.category = "backward";
  odd.begin_us = 10;
  odd.end_us = 12;
  odd.Arg("nan", std::nan(""));
  w.Add(odd);

  test::TempDir dir;
  w.Write(dir.File("trace.json"));
  std::ifstream in(dir.File("trace.json"));
  Json j = ParseJson(std::string(std::istreambuf_iterator<char>(in), {}), "trace.json");
  EXPECT_EQ(j["displayTimeUnit"].str, "ms");
  const auto& ev = j["traceEvents"].array;
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["ph"].str, "M");
  EXPECT_EQ(ev[0]["args"]["name"].str, "engine worker 1");
  // Ordered by begin time.
  EXPECT_EQ(ev[1]["name"].str, odd.name);
  EXPECT_EQ(ev[1]["args"]["nan"].kind, Json::kNull);
  const Json& e = ev[2];
  EXPECT_EQ(e["name"].str, "fc1");
  EXPECT_EQ(e["cat"].str, "forward");
  EXPECT_EQ(e["ph"].str, "X");
  EXPECT_EQ(e["ts"].num, 120);
  EXPECT_EQ(e["dur"].num, 50);
  EXPECT_EQ(e["tid"].num, 1);
  EXPECT_TRUE(e["args"]["recompute"].b);
  EXPECT_EQ(e["args"]["bytes"].num, 4096);
  EXPECT_EQ(e["args"]["ratio"].num, 0.5);
  EXPECT_EQ(e["args"]["op"].str, "fully_connected");
}

TEST(Trace, ConcurrentAddsAreAllKept) {
  TraceWriter w;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&w, t] {
      for (int i = 0; i < 500; ++i) {
        ScopedTrace s(&w, "op" + std::to_string(i), "forward", t);
        s.event().Arg("i", i);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(w.size(), 2000u);
  Json j = ParseJson(w.ToJson(), "the trace");
  ASSERT_EQ(j["traceEvents"].array.size(), 2000u);
  int64_t last = -1;
  for (const Json& e : j["traceEvents"].array) {
    EXPECT_GE(e["ts"].num, last);
    EXPECT_GE(e["dur"].num, 0);
    last = static_cast<int64_t>(e["ts"].num);
  }
}

TEST(Trace, TheJsonCheckerRejectsBrokenJson) {
  // The checker itself can fail: the tests above mean something.
  EXPECT_THROW(ParseJson("{\"a\": [1, 2,]}", "bad"), std::runtime_error);
  EXPECT_THROW(ParseJson("{\"a\": \"x\"} extra", "bad"), std::runtime_error);
  EXPECT_THROW(ParseJson("{\"a\": \"line\nbreak\"}", "bad"), std::runtime_error);
  EXPECT_EQ(ParseJson("{\"a\": [true, null, -1.5e3]}", "good")["a"].array[2].num, -1500);
}

}  // namespace
}  // namespace frugal
