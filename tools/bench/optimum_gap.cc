// The budget planner against the exact reference (tests/optimum.h) on the
// gap suite at three budgets each: one markdown table row per case and
// budget (docs/memory.md, "How far from the optimum").
//   build/frugal_bench_optimum [--small] [--max-builds N] [--why]
// --why: after each row, what the optimum and the planner drop.
#include <cstdlib>
#include <iostream>
#include <string>

#include "optimum.h"

int main(int argc, char** argv) {
  bool small = false, why = false;
  int64_t max_builds = 200000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--small") {
      small = true;
    } else if (arg == "--why") {
      why = true;
    } else if (arg == "--max-builds" && i + 1 < argc) {
      max_builds = std::atoll(argv[++i]);
    } else {
      std::cerr << "usage: " << argv[0] << " [--small] [--max-builds N] [--why]\n";
      return 2;
    }
  }
  std::cout << frugal::test::GapTableHeader() << std::endl;
  namespace test = frugal::test;
  for (const test::GapCase& c : test::GapSuite(small)) {
    for (int64_t budget : test::GapBudgets(c)) {
      const test::GapRow r = test::MeasureGap(c, budget, max_builds);
      std::cout << test::GapTableLine(r) << std::endl;
      if (why)
        std::cout << "  optimum drops: " << (r.optimum.plan ? test::Dropped(c.fwd, r.optimum.plan->keep) : "-")
                  << "\n  planner drops: " << test::Dropped(c.fwd, r.planner_keep) << std::endl;
    }
  }
  return 0;
}
