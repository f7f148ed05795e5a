// The budget planner against the exact reference (tests/passes/optimum.h) on the
// gap suite at three budgets each: one markdown table row per case and
// budget (docs/memory.md, "How far from the optimum").
//   build/frugal_bench_optimum [--small] [--case NAME] [--max-builds N] [--max-programs N] [--why]
//   build/frugal_bench_optimum --planner-only FIRST:LAST | --planner-only suite
//   build/frugal_bench_optimum --seeds FIRST:LAST [--max-builds N] [--max-programs N] [--why]
// --max-programs: integer programs the reference solves where its search of
// drop sets is cut off after --max-builds (0: none).
// --case: only the case of that name (chain40, resnet20, ...); --why: after
// each row, what the optimum and the planner drop. --planner-only: no
// reference; the planner's recomputation (FLOPs) at the three budgets of
// random chains and DAGs of 20, 30 and 40 nodes, seeds FIRST to LAST, one
// line each: to compare two planners on more graphs than the suite's
// (`suite`: on the suite's cases).
// --seeds: the table on those random cases instead of the suite, and a
// last line: the rows within 5%, the largest gap known, and the rows only
// bounded with their largest bound.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "passes/optimum.h"

namespace {

int PlannerOnly(const std::vector<frugal::test::GapCase>& cases) {
  namespace test = frugal::test;
  std::cout << "| case | budget | planner FLOPs | planner ms |\n|---|---:|---:|---:|" << std::endl;
  for (const test::GapCase& c : cases)
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
  bool seeded = false;
  unsigned long long first = 0, last = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--small") {
      small = true;
    } else if (arg == "--why") {
      why = true;
    } else if (arg == "--case" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--planner-only" && i + 1 < argc && std::string(argv[i + 1]) == "suite") {
      return PlannerOnly(frugal::test::GapSuite(/*small=*/false));
    } else if ((arg == "--planner-only" || arg == "--seeds") && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%llu:%llu", &first, &last) != 2 || first > last) {
        std::cerr << arg << " takes FIRST:LAST seeds, e.g. 100:109\n";
        return 2;
      }
      if (arg == "--planner-only") return PlannerOnly(frugal::test::RandomGapCases(first, last));
      seeded = true;
    } else if (arg == "--max-builds" && i + 1 < argc) {
      max_builds = std::atoll(argv[++i]);
    } else if (arg == "--max-programs" && i + 1 < argc) {
      max_programs = std::atoll(argv[++i]);
    } else {
      std::cerr << "usage: " << argv[0] << " [--small | --seeds FIRST:LAST] [--case NAME] [--max-builds N]"
                << " [--max-programs N] [--why] | --planner-only FIRST:LAST|suite\n";
      return 2;
    }
  }
  std::cout << frugal::test::GapTableHeader() << std::endl;
  namespace test = frugal::test;
  int rows = 0, within = 0, bounded = 0;
  double largest = 0, largest_bound = 0;  // of the gaps known, and of the bounds of those only bounded
  for (const test::GapCase& c : seeded ? test::RandomGapCases(first, last) : test::GapSuite(small)) {
    if (!only.empty() && c.name != only) continue;
    for (int64_t budget : test::GapBudgets(c)) {
      const test::GapRow r = test::MeasureGap(c, budget, max_builds, max_programs);
      std::cout << test::GapTableLine(r) << std::endl;
      ++rows;
      if (r.planner_fits && (r.optimum.plan || !r.optimum.exact)) {
        within += r.gap() <= 0.05 + 5e-4;
        bounded += !r.optimum.exact;
        double& most = r.optimum.exact ? largest : largest_bound;
        most = std::max(most, r.gap());
      }
      if (why)
        std::cout << "  optimum drops: " << (r.optimum.plan ? test::Dropped(c.fwd, r.optimum.plan->keep) : "-")
                  << "\n  planner drops: " << test::Dropped(c.fwd, r.planner_keep) << std::endl;
    }
  }
  if (rows == 0) {
    std::cerr << "no case named " << only
              << (seeded  ? " among the seeds' cases (chain20/SEED, dag40/SEED, ...)"
                  : small ? " in the suite (--small: the first four)"
                          : " in the suite")
              << "\n";
    return 2;
  }
  std::cout << "\n"
            << within << " of " << rows << " rows within 5% of the optimum or its bound; largest gap known "
            << largest * 100 << "%; " << bounded << " only bounded, by up to " << largest_bound * 100 << "%"
            << std::endl;
  return 0;
}
