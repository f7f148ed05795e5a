#include <gtest/gtest.h>

#include "frugal/engine.h"

namespace frugal {
namespace {

TEST(NaiveEngine, RunsInPushOrder) {
  auto e = MakeEngine("naive");
  Var v = e->NewVar();
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) e->Push([&order, i] { order.push_back(i); }, {}, {v}, {});
  e->WaitForVar(v);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(NaiveEngine, ErrorSurfacesAtWaitWithTheOpName) {
  auto e = MakeEngine("naive");
  Var v = e->NewVar();
  bool later_ran = false;
  PushOptions opts;
  opts.name = "fc7";
  e->Push([] { throw Error("label 12 out of range"); }, {}, {v}, opts);
  e->Push([&] { later_ran = true; }, {v}, {}, {});
  try {
    e->WaitAll();
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_STREQ(err.what(), "fc7: label 12 out of range");
  }
  EXPECT_FALSE(later_ran) << "work after a failure must not run";
  e->WaitAll();  // the error is reported once
}

TEST(NaiveEngine, UnknownEngineName) {
  EXPECT_THROW(MakeEngine("turbo"), Error);
}

}  // namespace
}  // namespace frugal
