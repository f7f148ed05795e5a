// Engine overhead per pushed function: pushes N empty functions in three
// patterns and reports the wall time per function from the first push until
// WaitAll returns, and the caller's time per Push alone.
//   chain:        every function writes one variable (each waits for the last)
//   independent:  function i writes variable i % 64 (64 chains side by side)
//   graph:        function i reads variables i-1 and i-2 of a ring of 32 and
//                 writes variable i (the shape of an executor's pushes)
//   round trip:   push one function, WaitForVar on it, repeat (N / 20 times):
//                 the latency of waking an idle worker and being woken
// Usage: frugal_bench_engine [N] [repeats]; prints a Markdown table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "frugal/engine.h"

using frugal::Engine;
using frugal::Var;
using Clock = std::chrono::steady_clock;

namespace {

struct Figures {
  double per_fn_us, per_push_us;
};

Figures Measure(Engine* e, const std::string& pattern, int n) {
  std::vector<Var> vars(64);
  for (Var& v : vars) v = e->NewVar();
  const std::vector<Var> none;
  const frugal::PushOptions opts;
  if (pattern == "round trip") {
    n /= 20;
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      e->Push([] {}, none, {vars[0]}, opts);
      e->WaitForVar(vars[0]);
    }
    auto t1 = Clock::now();
    for (Var v : vars) e->DeleteVar(v);
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
    return {us, us};
  }
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (pattern == "chain") {
      e->Push([] {}, none, {vars[0]}, opts);
    } else if (pattern == "independent") {
      e->Push([] {}, none, {vars[i % 64]}, opts);
    } else {
      e->Push([] {}, {vars[(i + 31) % 32], vars[(i + 30) % 32]}, {vars[i % 32]}, opts);
    }
  }
  auto t1 = Clock::now();
  e->WaitAll();
  auto t2 = Clock::now();
  for (Var v : vars) e->DeleteVar(v);
  return {std::chrono::duration<double, std::micro>(t2 - t0).count() / n,
          std::chrono::duration<double, std::micro>(t1 - t0).count() / n};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  struct Config {
    const char* label;
    const char* engine;
    frugal::EngineOptions opts;
  };
  const std::vector<Config> configs = {
      {"naive", "naive", {}},
      {"threaded, 1 worker", "threaded", {1, 0}},
      {"threaded, 2 workers", "threaded", {2, 0}},
  };
  std::printf("%d empty functions per run, best of %d runs; microseconds per function\n\n", n, repeats);
  std::printf("| engine | pattern | per function (push to end of wait) | per Push call |\n|---|---|---|---|\n");
  for (const Config& c : configs) {
    auto e = frugal::MakeEngine(c.engine, c.opts);
    for (const char* pattern : {"chain", "independent", "graph", "round trip"}) {
      Figures best{1e9, 1e9};
      for (int r = 0; r < repeats; ++r) {
        Figures f = Measure(e.get(), pattern, n);
        best.per_fn_us = std::min(best.per_fn_us, f.per_fn_us);
        best.per_push_us = std::min(best.per_push_us, f.per_push_us);
      }
      std::printf("| %s | %s | %.2f | %.2f |\n", c.label, pattern, best.per_fn_us, best.per_push_us);
    }
  }
  return 0;
}
