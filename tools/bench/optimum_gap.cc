// The budget planner against the exact reference (tests/optimum.h) on the
// gap suite at three budgets each: one markdown table row per case and
// budget (docs/memory.md, "How far from the optimum").
//   build/frugal_bench_optimum [--small] [--case NAME] [--max-builds N] [--max-programs N] [--why]
//   build/frugal_bench_optimum --planner-only FIRST:LAST
// --max-programs: integer programs the reference solves where its search of
// drop sets is cut off after --max-builds (0: none).
// --case: only the case of that name (chain40, resnet20, ...); --why: after
// each row, what the optimum and the planner drop. --planner-only: no
// reference; the planner's recomputation (FLOPs) at the three budgets of
// random chains and DAGs of 20, 30 and 40 nodes, seeds FIRST to LAST, one
// line each: to compare two planners on more graphs than the suite's.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "optimum.h"

namespace {

int PlannerOnly(uint64_t first_seed, uint64_t last_seed) {
  namespace test = frugal::test;
  std::cout << "| case | budget | planner FLOPs | planner ms |\n|---|---:|---:|---:|" << std::endl;
  for (const test::GapCase& c : test::RandomGapCases(first_seed, last_seed))
    for (int64_t budget : test::GapBudgets(c)) {
      const test::GapRow r = test::MeasurePlanner(c, budget);
      const std::string flops =
          r.planner_fits ? std::to_string(static_cast<int64_t>(r.planner_cost)) : std::string("none fits");
      std::cout << "| " << c.name << " | " << budget << " | " << flops << " | " << static_cast<int>(r.planner_ms)
                << " |" << std::endl;
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool small = false, why = false;
  std::string only;
  int64_t max_builds = 200000, max_programs = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--small") {
      small = true;
    } else if (arg == "--why") {
      why = true;
    } else if (arg == "--case" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--planner-only" && i + 1 < argc) {
      unsigned long long first = 0, last = 0;
      if (std::sscanf(argv[++i], "%llu:%llu", &first, &last) != 2 || first > last) {
        std::cerr << "--planner-only takes FIRST:LAST seeds, e.g. 100:109\n";
        return 2;
      }
      return PlannerOnly(first, last);
    } else if (arg == "--max-builds" && i + 1 < argc) {
      max_builds = std::atoll(argv[++i]);
    } else if (arg == "--max-programs" && i + 1 < argc) {
      max_programs = std::atoll(argv[++i]);
    } else {
      std::cerr << "usage: " << argv[0] << " [--small] [--case NAME] [--max-builds N] [--max-programs N] [--why]"
                << " | --planner-only FIRST:LAST\n";
      return 2;
    }
  }
  std::cout << frugal::test::GapTableHeader() << std::endl;
  namespace test = frugal::test;
  int rows = 0;
  for (const test::GapCase& c : test::GapSuite(small)) {
    if (!only.empty() && c.name != only) continue;
    for (int64_t budget : test::GapBudgets(c)) {
      const test::GapRow r = test::MeasureGap(c, budget, max_builds, max_programs);
      std::cout << test::GapTableLine(r) << std::endl;
      ++rows;
      if (why)
        std::cout << "  optimum drops: " << (r.optimum.plan ? test::Dropped(c.fwd, r.optimum.plan->keep) : "-")
                  << "\n  planner drops: " << test::Dropped(c.fwd, r.planner_keep) << std::endl;
    }
  }
  if (rows == 0) {
    std::cerr << "no case named " << only << " in the suite" << (small ? " (--small: the first four)" : "") << "\n";
    return 2;
  }
  return 0;
}
